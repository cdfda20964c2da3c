// Pushes an image to a registry with the distribution API itself, as any client does: each blob
// the registry lacks (HEAD, then a monolithic POST + PUT upload), then the manifest under a tag.
// The source is an OCI archive (what `buildctl --output type=oci` writes) or blobs in memory.
// The registry's answer must name the manifest's own digest.
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { fetch, type Dispatcher } from "undici";

const run = promisify(execFile);

export interface PushTarget {
  /** "https://host:port". */
  readonly base: string;
  /** The Authorization header for a repository (Basic, or a token for its push scope; "": none). */
  readonly authorization: (repository: string) => Promise<string>;
  readonly dispatcher?: Dispatcher;
}

export interface PushBlob {
  readonly digest: string;
  readonly bytes: () => Promise<Uint8Array>;
}

export function sha256Digest(b: Uint8Array): string {
  return `sha256:${createHash("sha256").update(b).digest("hex")}`;
}

async function call(
  t: PushTarget,
  repository: string,
  method: string,
  url: string,
  headers: Record<string, string> = {},
  body?: Uint8Array,
): Promise<{ status: number; location: string | null; digest: string | null; text: string }> {
  const authorization = await t.authorization(repository);
  const r = await fetch(url.startsWith("http") ? url : `${t.base}${url}`, {
    method,
    headers: { ...(authorization === "" ? {} : { Authorization: authorization }), ...headers },
    body,
    ...(t.dispatcher ? { dispatcher: t.dispatcher } : {}),
  });
  return {
    status: r.status,
    location: r.headers.get("location"),
    digest: r.headers.get("docker-content-digest"),
    text: (await r.text()).slice(0, 500),
  };
}

/** Uploads the blobs the registry lacks, then the manifest under `tag`; answers its digest. */
export async function pushManifest(
  t: PushTarget,
  repository: string,
  tag: string,
  blobs: readonly PushBlob[],
  manifestBytes: Uint8Array,
  mediaType: string,
): Promise<string> {
  for (const b of blobs) {
    const head = await call(t, repository, "HEAD", `/v2/${repository}/blobs/${b.digest}`);
    if (head.status === 200) continue;
    const start = await call(t, repository, "POST", `/v2/${repository}/blobs/uploads/`);
    if (start.status !== 202 || !start.location)
      throw new Error(`starting an upload to ${repository}: HTTP ${start.status} ${start.text}`);
    const url = new URL(start.location, t.base);
    url.searchParams.set("digest", b.digest);
    const put = await call(
      t,
      repository,
      "PUT",
      url.toString(),
      { "Content-Type": "application/octet-stream" },
      await b.bytes(),
    );
    if (put.status !== 201) throw new Error(`uploading ${b.digest} to ${repository}: HTTP ${put.status} ${put.text}`);
  }
  const put = await call(
    t,
    repository,
    "PUT",
    `/v2/${repository}/manifests/${tag}`,
    { "Content-Type": mediaType },
    manifestBytes,
  );
  if (put.status !== 201)
    throw new Error(`pushing the manifest of ${repository}:${tag}: HTTP ${put.status} ${put.text}`);
  const digest = sha256Digest(manifestBytes);
  if (put.digest !== digest) throw new Error(`the registry stored ${String(put.digest)}, not ${digest}`);
  return digest;
}

interface OciIndex {
  manifests: { mediaType: string; digest: string; annotations?: Record<string, string> }[];
}

interface OciManifest {
  mediaType?: string;
  config: { digest: string };
  layers: { digest: string }[];
}

/**
 * Pushes an image of an OCI archive as `repository:tag`: the one tagged `from`, or the archive's
 * only image. Answers the manifest's digest.
 */
export async function pushOciArchive(
  t: PushTarget,
  archive: string,
  repository: string,
  tag: string,
  from?: string,
): Promise<string> {
  const layout = await mkdtemp(join(tmpdir(), "krane-push-"));
  try {
    await run("tar", ["-xf", archive, "-C", layout]);
    const blob = (digest: string) => readFile(join(layout, "blobs", ...digest.split(":")));
    const index = JSON.parse(await readFile(join(layout, "index.json"), "utf8")) as OciIndex;
    const entry =
      from === undefined
        ? index.manifests.length === 1
          ? index.manifests[0]
          : undefined
        : index.manifests.find((m) => m.annotations?.["org.opencontainers.image.ref.name"] === from);
    if (!entry)
      throw new Error(`${archive} has no image ${from === undefined ? "(or more than one)" : `tagged ${from}`}`);
    const manifestBytes = await blob(entry.digest);
    const manifest = JSON.parse(manifestBytes.toString("utf8")) as OciManifest;
    if (!Array.isArray(manifest.layers)) throw new Error(`${archive}'s image is an index, not one image's manifest`);
    const blobs = [manifest.config.digest, ...manifest.layers.map((l) => l.digest)].map((digest) => ({
      digest,
      bytes: () => blob(digest),
    }));
    return await pushManifest(t, repository, tag, blobs, manifestBytes, manifest.mediaType ?? entry.mediaType);
  } finally {
    await rm(layout, { recursive: true, force: true });
  }
}
