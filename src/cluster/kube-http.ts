// A minimal HTTPS client for a local cluster's API server, used while the cluster is being
// set up and checked (health, nodes, CRDs), before anything heavier is needed.
import { readFile } from "node:fs/promises";
import { request } from "node:https";
import { setTimeout as sleep } from "node:timers/promises";
import { parseAllDocuments } from "yaml";

export interface KubeEndpoint {
  server: string;
  token: string;
  /** PEM of the API server's CA; undefined while it is not written yet (then TLS is not verified). */
  ca?: string;
}

export interface KubeResponse {
  status: number;
  body: string;
}

export function kubeRequest(
  ep: KubeEndpoint,
  method: string,
  path: string,
  body?: unknown,
  contentType = "application/json",
  extraHeaders: Record<string, string | string[]> = {},
): Promise<KubeResponse> {
  const url = new URL(path, ep.server);
  const payload = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method,
        headers: {
          authorization: `Bearer ${ep.token}`,
          accept: "application/json",
          ...extraHeaders,
          ...(payload !== undefined
            ? { "content-type": contentType, "content-length": Buffer.byteLength(payload) }
            : {}),
        },
        ...(ep.ca ? { ca: ep.ca } : { rejectUnauthorized: false }),
        timeout: 10_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`${method} ${path}: timed out`)));
    req.on("error", reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

/** Creates an object; an existing one (409) is left as it is. */
export async function createIfMissing(ep: KubeEndpoint, collectionPath: string, obj: unknown): Promise<void> {
  const res = await kubeRequest(ep, "POST", collectionPath, obj);
  if (res.status !== 201 && res.status !== 200 && res.status !== 409) {
    throw new Error(`POST ${collectionPath}: HTTP ${res.status}: ${res.body.slice(0, 500)}`);
  }
}

export async function getJson<T>(ep: KubeEndpoint, path: string): Promise<T> {
  const res = await kubeRequest(ep, "GET", path);
  if (res.status !== 200) throw new Error(`GET ${path}: HTTP ${res.status}: ${res.body.slice(0, 300)}`);
  return JSON.parse(res.body) as T;
}

/** Creates the CustomResourceDefinitions in these manifest files (existing ones stay) and waits until each is established. */
export async function installCrds(ep: KubeEndpoint, files: readonly string[]): Promise<void> {
  const path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  const names: string[] = [];
  for (const f of files) {
    for (const doc of parseAllDocuments(await readFile(f, "utf8"))) {
      const crd = doc.toJS() as { kind?: string; metadata: { name: string } } | null;
      if (crd?.kind !== "CustomResourceDefinition") continue;
      await createIfMissing(ep, path, crd);
      names.push(crd.metadata.name);
    }
  }
  for (const name of names) {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const c = await getJson<{ status?: { conditions?: { type: string; status: string }[] } }>(ep, `${path}/${name}`);
      if (c.status?.conditions?.some((x) => x.type === "Established" && x.status === "True")) break;
      if (Date.now() > deadline) throw new Error(`CRD ${name} was not established within 60s`);
      await sleep(100);
    }
  }
}
