// A minimal HTTPS client for a local cluster's API server, used while the cluster is being
// set up and checked (health, nodes, CRDs), before anything heavier is needed.
import { request } from "node:https";

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
