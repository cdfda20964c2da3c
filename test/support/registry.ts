// A real private registry on this machine for tests: the distribution project's registry
// (REGISTRY_BUILD, tools/registry) with htpasswd auth (bcrypt, written by the build's htpasswd
// tool) behind TLS from a CA of its own (openssl, as src/cluster/nodes/pki.ts makes the kubelets'
// CA: the local cluster's cert-manager CA would need cert-manager's controllers running). With
// `auth: "token"` the registry takes Bearer tokens instead (auth.token with a JWKS), which a small
// token service here issues to the same users after checking their Basic credentials — the flow
// of Docker Hub, GHCR and GitLab. It listens on one address: 127.0.0.1 for ctrl alone, or a real-node cluster's link address
// (`cluster.realNodes.hostIp`), which both this machine (ctrl) and the nodes' containerd reach.
//
// `push` uploads an image from an OCI archive (the hello image's, src/cluster/images.ts) with
// the registry API itself (src/builds/push.ts, what ctrl's builds push with).
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { createServer as createHttpsServer, type Server } from "node:https";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { Agent, fetch } from "undici";
import { pushManifest, pushOciArchive, sha256Digest, type PushTarget } from "../../src/builds/push.js";
import { ensureRegistry } from "../../src/cluster/build.js";
import { logTail, startComponent, type RunningComponent } from "../../src/cluster/process.js";
import { createServer } from "node:net";

const run = promisify(execFile);

export interface RegistryUser {
  readonly username: string;
  readonly password: string;
}

export interface TestRegistry {
  /** host:port, as images name it. */
  readonly host: string;
  /** The CA that signed its certificate (PEM) and that file. */
  readonly caPem: string;
  readonly caFile: string;
  readonly users: readonly RegistryUser[];
  readonly logFile: string;
  /** Token requests the token service answered, by outcome (auth "token" only). */
  readonly tokenRequests: { granted: number; refused: number };
  /**
   * Pushes the manifest tagged `from` in the OCI archive as `repository:tag` (the user is the
   * first one); returns the manifest's digest.
   */
  push(archive: string, from: string, repository: string, tag: string): Promise<string>;
  /** Pushes a tiny image (not runnable: one small layer) whose config names `label`; its digest. */
  pushTiny(repository: string, tag: string, label: string): Promise<string>;
  /** Deletes a manifest by digest (the registry allows deletes). */
  deleteManifest(repository: string, digest: string): Promise<void>;
  stop(): Promise<void>;
}

/** A port free on `address` now (the registry listens on it right after). */
export function freePortOn(address: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, address, () => {
      const a = s.address();
      s.close(() => (a && typeof a === "object" ? resolve(a.port) : reject(new Error("no port"))));
    });
  });
}

async function openssl(args: string[]): Promise<void> {
  await run("openssl", args);
}

/** A CA and a server certificate for `address` (an IP or a name), valid one day. */
export async function certificates(dir: string, address: string): Promise<{ ca: string; crt: string; key: string }> {
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  const ca = join(dir, "ca.crt");
  const caKey = join(dir, "ca.key");
  const crt = join(dir, "tls.crt");
  const key = join(dir, "tls.key");
  const csr = join(dir, "tls.csr");
  const ext = join(dir, "server.ext");
  await openssl([
    "req",
    "-x509",
    ...ec,
    "-keyout",
    caKey,
    "-out",
    ca,
    "-days",
    "1",
    "-subj",
    "/CN=krane test registry CA",
  ]);
  await openssl(["req", ...ec, "-keyout", key, "-out", csr, "-subj", `/CN=${address}`]);
  const san = /^[0-9.]+$/.test(address) ? `IP:${address}` : `DNS:${address}`;
  await writeFile(ext, `subjectAltName=${san}\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n`);
  await openssl([
    "x509",
    "-req",
    "-in",
    csr,
    "-CA",
    ca,
    "-CAkey",
    caKey,
    "-CAcreateserial",
    "-out",
    crt,
    "-days",
    "1",
    "-extfile",
    ext,
  ]);
  return { ca, crt, key };
}

const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";

/**
 * Starts a registry on `address` (default 127.0.0.1) with these users (default one, random
 * password); stop() ends it. Its data and certificates live in a temporary directory under `dir`.
 */
export async function startTestRegistry(opts: {
  dir: string;
  address?: string;
  users?: RegistryUser[];
  auth?: "htpasswd" | "token";
  /**
   * With auth "token": another token issuer (ctrl's) instead of the one here — its realm, the
   * service and issuer its tokens name, and the JWKS file of its key. The registry's own pushes
   * (push, pushTiny, deleteManifest) then have no credential.
   */
  issuer?: { realm: string; service: string; issuer: string; jwks: string };
}): Promise<TestRegistry> {
  const address = opts.address ?? "127.0.0.1";
  const users = opts.users ?? [{ username: "ci", password: randomBytes(12).toString("hex") }];
  const tools = await ensureRegistry();
  const dir = await mkdtemp(join(opts.dir, "registry-"));
  const certs = await certificates(dir, address);
  const lines: string[] = [];
  for (const u of users) {
    const p = promisify(execFile)(tools.htpasswd, [u.username]);
    p.child.stdin?.end(`${u.password}\n`);
    lines.push((await p).stdout.trim());
  }
  const htpasswd = join(dir, "htpasswd");
  await writeFile(htpasswd, `${lines.join("\n")}\n`);
  await mkdir(join(dir, "data"));
  const port = await freePortOn(address);
  const host = `${address}:${port}`;
  const logFile = join(dir, "registry.log");
  const caPem = await readFile(certs.ca, "utf8");
  const tokenRequests = { granted: 0, refused: 0 };
  const tokens =
    opts.auth === "token" && !opts.issuer
      ? await startTokenService(address, certs, users, join(dir, "jwks.json"), tokenRequests)
      : undefined;
  const tokenAuth = opts.issuer ?? (tokens && { ...tokens, service: TOKEN_SERVICE, issuer: TOKEN_ISSUER });
  const config = join(dir, "config.yml");
  await writeFile(
    config,
    [
      "version: 0.1",
      "log:",
      "  level: info",
      "storage:",
      "  filesystem:",
      `    rootdirectory: ${join(dir, "data")}`,
      "  delete:",
      "    enabled: true",
      "http:",
      `  addr: ${host}`,
      `  secret: ${randomBytes(16).toString("hex")}`,
      "  tls:",
      `    certificate: ${certs.crt}`,
      `    key: ${certs.key}`,
      "auth:",
      ...(tokenAuth
        ? [
            "  token:",
            `    realm: ${tokenAuth.realm}`,
            `    service: ${tokenAuth.service}`,
            `    issuer: ${tokenAuth.issuer}`,
            `    jwks: ${tokenAuth.jwks}`,
          ]
        : ["  htpasswd:", "    realm: krane-test", `    path: ${htpasswd}`]),
      "",
    ].join("\n"),
  );
  const proc: RunningComponent = startComponent({
    name: "registry",
    command: tools.bin,
    args: ["serve", config],
    logFile,
    env: { PATH: process.env.PATH ?? "", HOME: dir, OTEL_TRACES_EXPORTER: "none" },
  });
  const dispatcher = new Agent({ connect: { ca: caPem } });
  const base = `https://${host}`;
  const [user] = users;
  const basic = user ? `Basic ${Buffer.from(`${user.username}:${user.password}`).toString("base64")}` : "";
  /** What the first user sends for `repository`: Basic, or a token of the token service. */
  const authFor = async (repository: string): Promise<string> => {
    if (!tokens) return basic;
    const url = `${tokens.realm}?service=${TOKEN_SERVICE}&scope=repository:${repository}:pull,push`;
    const r = await fetch(url, { headers: { Authorization: basic }, dispatcher });
    return `Bearer ${((await r.json()) as { token: string }).token}`;
  };
  // Up when /v2/ answers (401 without credentials: auth is on).
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (proc.hasExited()) throw new Error(`the registry exited: ${logTail(logFile)}`);
    const up = await fetch(`${base}/v2/`, { dispatcher })
      .then((r) => r.status === 401)
      .catch(() => false);
    if (up) break;
    if (Date.now() > deadline) throw new Error(`the registry did not answer on ${host}: ${logTail(logFile)}`);
    await sleep(100);
  }

  const call = async (
    repository: string,
    method: string,
    url: string,
    headers: Record<string, string> = {},
    body?: Uint8Array,
  ): Promise<{ status: number; headers: Headers; text: string }> => {
    const r = await fetch(url.startsWith("http") ? url : `${base}${url}`, {
      method,
      headers: { Authorization: await authFor(repository), ...headers },
      body,
      dispatcher,
    });
    return { status: r.status, headers: r.headers as unknown as Headers, text: await r.text() };
  };

  const target: PushTarget = { base, authorization: authFor, dispatcher };
  const push = (archive: string, from: string, repository: string, tag: string): Promise<string> =>
    pushOciArchive(target, archive, repository, tag, from);

  /** A tiny image (one small layer, a config naming `label`) as `repository:tag`; its digest. */
  async function pushTiny(repository: string, tag: string, label: string): Promise<string> {
    const t = tinyImage(label);
    return pushManifest(target, repository, tag, t.blobs, t.manifest, t.mediaType);
  }

  return {
    host,
    caPem,
    caFile: certs.ca,
    users,
    logFile,
    tokenRequests,
    push,
    pushTiny,
    async deleteManifest(repository, digest) {
      const r = await call(repository, "DELETE", `/v2/${repository}/manifests/${digest}`);
      if (r.status !== 202) throw new Error(`deleting ${digest}: HTTP ${r.status} ${r.text}`);
    },
    async stop() {
      if (!proc.hasExited()) process.kill(proc.pid, "SIGTERM");
      await Promise.race([proc.exited, sleep(5000)]);
      if (!proc.hasExited()) process.kill(proc.pid, "SIGKILL");
      await dispatcher.close();
      if (tokens) await new Promise<void>((resolve) => tokens.server.close(() => resolve()));
    },
  };
}

/** A tiny image (not runnable: one small layer) whose config names `label`: its blobs and manifest. */
export function tinyImage(label: string): {
  blobs: { digest: string; bytes: () => Promise<Uint8Array> }[];
  manifest: Buffer;
  mediaType: string;
} {
  const layer = Buffer.from(`krane test layer ${label}\n`);
  const config = Buffer.from(
    JSON.stringify({
      architecture: "amd64",
      os: "linux",
      config: { Labels: { "krane.test": label } },
      rootfs: { type: "layers", diff_ids: [sha256Digest(layer)] },
    }),
  );
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: {
        mediaType: "application/vnd.oci.image.config.v1+json",
        digest: sha256Digest(config),
        size: config.length,
      },
      layers: [
        { mediaType: "application/vnd.oci.image.layer.v1.tar", digest: sha256Digest(layer), size: layer.length },
      ],
    }),
  );
  const blobs = [config, layer].map((b) => ({ digest: sha256Digest(b), bytes: async () => b }));
  return { blobs, manifest, mediaType: OCI_MANIFEST };
}

const TOKEN_SERVICE = "krane-test-registry";
const TOKEN_ISSUER = "krane-test-token-service";

/**
 * The token service of `auth: "token"`: GET /token?service=…&scope=repository:NAME:ACTIONS with
 * a user's Basic credentials gets a token for those actions (signed ES256, its key in the JWKS
 * the registry trusts); without credentials an anonymous token that grants nothing; with wrong
 * ones 401.
 */
async function startTokenService(
  address: string,
  certs: { crt: string; key: string },
  users: readonly RegistryUser[],
  jwksFile: string,
  counts: { granted: number; refused: number },
): Promise<{ realm: string; jwks: string; server: Server }> {
  const { publicKey, privateKey } = await generateKeyPair("ES256");
  const kid = randomBytes(8).toString("hex");
  await writeFile(
    jwksFile,
    JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid, alg: "ES256", use: "sig" }] }),
  );
  const server = createHttpsServer({ cert: await readFile(certs.crt), key: await readFile(certs.key) }, (req, res) => {
    void (async () => {
      const url = new URL(req.url ?? "/", "https://x");
      const header = req.headers.authorization ?? "";
      let subject = "";
      if (header !== "") {
        const [name, ...rest] = Buffer.from(header.replace(/^Basic /, ""), "base64")
          .toString("utf8")
          .split(":");
        const user = users.find((u) => u.username === name && u.password === rest.join(":"));
        if (!header.startsWith("Basic ") || !user) {
          counts.refused++;
          res.writeHead(401, { "Content-Type": "application/json" }).end('{"details":"bad credentials"}');
          return;
        }
        subject = user.username;
      }
      const access = url.searchParams.getAll("scope").flatMap((s) => {
        const m = /^repository:([^:]+):(.+)$/.exec(s);
        return m && subject !== "" ? [{ type: "repository", name: m[1], actions: (m[2] ?? "").split(",") }] : [];
      });
      const token = await new SignJWT({ access })
        .setProtectedHeader({ alg: "ES256", kid })
        .setIssuer(TOKEN_ISSUER)
        .setAudience(url.searchParams.get("service") ?? "")
        .setSubject(subject)
        .setIssuedAt()
        .setNotBefore(Math.floor(Date.now() / 1000) - 10)
        .setExpirationTime("5m")
        .setJti(randomBytes(8).toString("hex"))
        .sign(privateKey);
      counts.granted++;
      res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ token }));
    })().catch(() => res.writeHead(500).end());
  });
  await new Promise<void>((resolve) => server.listen(0, address, resolve));
  const port = (server.address() as { port: number }).port;
  return { realm: `https://${address}:${port}/token`, jwks: jwksFile, server };
}
