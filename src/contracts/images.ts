// Image references as ctrl and the agent both read them (pure): which registry an image comes
// from (the host a credential is for, the host a pull error names), its repository, its tag or
// digest, and the pinned form a revision's pods run (`repository@sha256:…`).
//
// The grammar is the distribution project's (the one Docker, containerd and the kubelet use): the
// first path component is a registry host when it contains "." or ":" or is "localhost";
// otherwise the image is on Docker Hub ("nginx" is docker.io/library/nginx).

/** Docker Hub as a registry host (what `krane registry add docker.io` names). */
export const DOCKER_HUB = "docker.io";
/** Where Docker Hub's registry API answers. */
const DOCKER_HUB_API = "registry-1.docker.io";
/** The key Docker's own config (and so the kubelet) files Docker Hub's credentials under. */
const DOCKER_HUB_CONFIG_KEY = "https://index.docker.io/v1/";

const COMPONENT = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
const HOST_LABEL = "[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?";
const HOST = `(?:${HOST_LABEL})(?:\\.${HOST_LABEL})*(?::[0-9]{1,5})?|\\[[0-9a-fA-F:.]+\\](?::[0-9]{1,5})?`;
const REF = new RegExp(
  `^(?:(${HOST})/)?(${COMPONENT}(?:/${COMPONENT})*)(?::([\\w][\\w.-]{0,127}))?(?:@([a-z0-9]+(?:[.+_-][a-z0-9]+)*:[0-9a-fA-F]{32,}))?$`,
);
const HOST_ONLY = new RegExp(`^(?:${HOST})$`);
/** The digests krane pins and accepts: sha256 or sha512, lowercase hex. */
export const DIGEST = /^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$/;

export interface ImageRef {
  /** The registry host as a credential names it: "ghcr.io", "10.0.0.1:5000", "docker.io". */
  readonly registry: string;
  /** The repository within the registry: "acme/web", "library/nginx". */
  readonly repository: string;
  /** The image's name as given, without tag or digest ("nginx", "ghcr.io/acme/web"). */
  readonly name: string;
  /** The tag; undefined when the image names none (then "latest", unless it has a digest). */
  readonly tag: string | undefined;
  /** "sha256:…" when the image is given by digest. */
  readonly digest: string | undefined;
}

/**
 * A registry host in its canonical form (lowercase; Docker Hub's aliases are "docker.io"), or
 * undefined when `host` is not one (a scheme, a path, a user name, spaces).
 */
export function registryHost(host: string): string | undefined {
  const h = host.trim().toLowerCase();
  if (!HOST_ONLY.test(h)) return undefined;
  const port = /:(\d+)$/.exec(h)?.[1];
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65_535)) return undefined;
  if (h === "index.docker.io" || h === DOCKER_HUB_API) return DOCKER_HUB;
  return h;
}

/** Parses an image reference; undefined when it is not one. */
export function parseImageRef(image: string): ImageRef | undefined {
  const m = REF.exec(image);
  if (!m) return undefined;
  const [, first, path = "", tag, digest] = m;
  // A first component without "." or ":" (and not localhost) is a Docker Hub namespace, not a host.
  let host = first;
  let repository = path;
  if (host !== undefined && !/[.:[]/.test(host) && host !== "localhost") {
    // An uppercase first component is neither a registry nor a repository's.
    if (!new RegExp(`^${COMPONENT}$`).test(host)) return undefined;
    repository = `${host}/${path}`;
    host = undefined;
  }
  const registry = host === undefined ? DOCKER_HUB : registryHost(host);
  if (registry === undefined) return undefined;
  if (registry === DOCKER_HUB && !repository.includes("/")) repository = `library/${repository}`;
  if (digest !== undefined && !DIGEST.test(digest)) return undefined;
  const name = image.slice(0, image.length - (digest ? digest.length + 1 : 0) - (tag ? tag.length + 1 : 0));
  return { registry, repository, name, tag, digest };
}

/** The image pinned to a digest: its name as given, `@digest` (a tag it had is dropped). */
export function pinnedImage(ref: ImageRef, digest: string): string {
  return `${ref.name}@${digest}`;
}

/**
 * What a revision's pods run: the image as named, or pinned to the digest it was resolved to
 * (`name@digest`, the tag dropped: the digest alone says which bytes).
 */
export function imageAsRun(image: string, digest: string | null | undefined): string {
  if (!digest) return image;
  const ref = parseImageRef(image);
  return ref ? pinnedImage(ref, digest) : image;
}

/** Where a registry's HTTP API answers (Docker Hub's is not at docker.io). */
export function registryApiHost(registry: string): string {
  return registry === DOCKER_HUB ? DOCKER_HUB_API : registry;
}

/** The key a registry's credentials are filed under in a pull secret (.dockerconfigjson's "auths"). */
export function dockerConfigKey(registry: string): string {
  return registry === DOCKER_HUB ? DOCKER_HUB_CONFIG_KEY : registry;
}

/**
 * The registry host of an image as a pod names it, for messages ("" when it cannot be told):
 * the kubelet's pull errors carry the image, not the registry.
 */
export function registryOf(image: string): string {
  return parseImageRef(image)?.registry ?? "";
}

/**
 * The pull Secret of a workspace's namespace (kubernetes.io/dockerconfigjson), holding every
 * registry credential of the workspace; the pods of its deployments and cron jobs name it in
 * imagePullSecrets. One per namespace: every region's agent on a cluster writes the same content.
 */
export const PULL_SECRET_NAME = "krane-registry-credentials";
/** The one key of a pull Secret's data. */
export const PULL_SECRET_KEY = ".dockerconfigjson";

/**
 * The `.dockerconfigjson` of a `kubernetes.io/dockerconfigjson` pull Secret holding these
 * credentials: `{"auths": {<key>: {username, password, auth}}}`, `auth` being base64 of
 * "username:password" (the kubelet reads either), keyed as the kubelet matches an image's host
 * (Docker Hub under its legacy index URL). Sorted by host, so the same credentials are the same bytes.
 */
export function dockerConfigJson(
  credentials: readonly { readonly host: string; readonly username: string; readonly password: string }[],
): string {
  const auths: Record<string, { username: string; password: string; auth: string }> = {};
  for (const c of [...credentials].sort((a, b) => (a.host < b.host ? -1 : a.host > b.host ? 1 : 0)))
    auths[dockerConfigKey(c.host)] = {
      username: c.username,
      password: c.password,
      auth: Buffer.from(`${c.username}:${c.password}`, "utf8").toString("base64"),
    };
  return JSON.stringify({ auths });
}

/**
 * Why a pull failed, in a few words, from the kubelet's message (containerd's error chain):
 * "401 unauthorized", "403 forbidden", "not found", "untrusted certificate", or undefined when
 * the message does not say. A wrong or expired credential is the first two.
 */
export function pullFailureReason(message: string): string | undefined {
  if (/\b401\b|unauthorized|failed to authorize/i.test(message)) return "401 unauthorized";
  if (/\b403\b|forbidden|denied|insufficient_scope/i.test(message)) return "403 forbidden";
  if (/not found|manifest unknown|\b404\b/i.test(message)) return "not found";
  if (/x509|certificate/i.test(message)) return "untrusted certificate";
  return undefined;
}
