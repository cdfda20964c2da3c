// Where the agent's (and sentinel's) Kubernetes credentials come from: a kubeconfig file, the
// in-cluster service-account files, or the usual lookup ($KUBECONFIG, ~/.kube/config).
//
// Why not @kubernetes/client-node's KubeConfig for everything: loading that package costs a
// process about 120 MiB of resident memory and 32 MiB of heap (measured: 80 → 201 MiB RSS), more
// than everything the agent caches for 1,000 deployments. This loader reads the common forms
// itself — bearer tokens (inline or a file, re-read so rotated tokens work), client
// certificates, basic auth, CA bundles, in-cluster config — and hands the rest (exec credential
// plugins, auth-provider plugins) to client-node, imported only then, so those work exactly as
// kubectl's do.
//
// KubeClient needs only the two methods of KubeConfigSource, which client-node's KubeConfig
// also has; tests and the local-cluster harness keep passing client-node objects.
import { readFileSync } from "node:fs";
import type * as https from "node:https";
import { homedir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { parse } from "yaml";
import { isRecord } from "./object.js";

/** What KubeClient needs from a kubeconfig (client-node's KubeConfig has the same methods). */
export interface KubeConfigSource {
  getCurrentCluster(): { readonly server: string } | null;
  applyToHTTPSOptions(opts: https.RequestOptions): Promise<void>;
}

/** The default service-account directory of a pod. */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

interface Cluster {
  server: string;
  ca?: Buffer;
  caFile?: string;
  insecure: boolean;
  tlsServerName?: string;
}

interface User {
  token?: string;
  tokenFile?: string;
  cert?: Buffer;
  certFile?: string;
  key?: Buffer;
  keyFile?: string;
  username?: string;
  password?: string;
  /** An exec or auth-provider plugin: delegated to client-node. */
  plugin: boolean;
}

export class KubeConfigError extends Error {}

/** A kubeconfig reduced to its current context. */
export class KubeAccess implements KubeConfigSource {
  #delegate: Promise<KubeConfigSource> | undefined;

  private constructor(
    private readonly cluster: Cluster,
    private readonly user: User,
    /** For plugins: how client-node loads the same configuration. */
    private readonly reload: (kc: ClientNodeConfig) => void,
  ) {}

  /** A kubeconfig file (the first of several KUBECONFIG paths takes precedence per entry). */
  static fromFiles(paths: readonly string[], context?: string): KubeAccess {
    const docs = paths.map((p) => ({ path: resolve(p), doc: parseDoc(readFileSync(p, "utf8"), p) }));
    return KubeAccess.#fromDocs(docs, context, (kc) => {
      if (paths.length === 1) kc.loadFromFile(paths[0] as string);
      else kc.loadFromDefault();
    });
  }

  static fromFile(path: string, context?: string): KubeAccess {
    return KubeAccess.fromFiles([path], context);
  }

  /** $KUBECONFIG (colon-separated), else ~/.kube/config. */
  static fromDefault(): KubeAccess {
    const env = process.env.KUBECONFIG;
    const paths = env ? env.split(":").filter((p) => p !== "") : [join(homedir(), ".kube", "config")];
    if (paths.length === 0) throw new KubeConfigError("no kubeconfig: set KUBECONFIG or --kubeconfig");
    return KubeAccess.fromFiles(paths);
  }

  /**
   * In-cluster config, as a pod has it: KUBERNETES_SERVICE_HOST/PORT and the service-account
   * token and CA under `dir` (the token file is re-read, so projected tokens rotate).
   */
  static inCluster(dir: string = SERVICE_ACCOUNT_DIR, env: NodeJS.ProcessEnv = process.env): KubeAccess {
    const host = env.KUBERNETES_SERVICE_HOST;
    const port = env.KUBERNETES_SERVICE_PORT;
    if (!host || !port)
      throw new KubeConfigError(
        "in-cluster config needs KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (is this a pod?)",
      );
    const server = `https://${host.includes(":") ? `[${host}]` : host}:${port}`;
    return new KubeAccess(
      { server, caFile: join(dir, "ca.crt"), insecure: false },
      { tokenFile: join(dir, "token"), plugin: false },
      (kc) =>
        kc.loadFromCluster(dir.endsWith(SERVICE_ACCOUNT_DIR) ? dir.slice(0, -SERVICE_ACCOUNT_DIR.length) : undefined),
    );
  }

  static #fromDocs(
    docs: readonly { path: string; doc: Record<string, unknown> }[],
    context: string | undefined,
    reload: (kc: ClientNodeConfig) => void,
  ): KubeAccess {
    const current = context ?? docs.map((d) => str(d.doc, "current-context")).find((c) => c !== undefined);
    if (!current) throw new KubeConfigError("kubeconfig has no current-context");
    const ctx = named(docs, "contexts", "context").get(current);
    if (!ctx) throw new KubeConfigError(`kubeconfig: context "${current}" not found`);
    const clusterName = str(ctx.value, "cluster");
    const userName = str(ctx.value, "user");
    const cl = clusterName === undefined ? undefined : named(docs, "clusters", "cluster").get(clusterName);
    if (!cl) throw new KubeConfigError(`kubeconfig: cluster "${clusterName ?? ""}" of context "${current}" not found`);
    const server = str(cl.value, "server");
    if (!server) throw new KubeConfigError(`kubeconfig: cluster "${clusterName ?? ""}" has no server`);
    const us = userName === undefined ? { value: {}, dir: cl.dir } : named(docs, "users", "user").get(userName);
    if (!us) throw new KubeConfigError(`kubeconfig: user "${userName ?? ""}" of context "${current}" not found`);
    const u = us.value;
    const cluster: Cluster = {
      server,
      ca: b64(cl.value, "certificate-authority-data"),
      caFile: fileIn(cl.dir, str(cl.value, "certificate-authority")),
      insecure: cl.value["insecure-skip-tls-verify"] === true,
      tlsServerName: str(cl.value, "tls-server-name"),
    };
    const user: User = {
      token: str(u, "token"),
      tokenFile: fileIn(us.dir, str(u, "tokenFile")),
      cert: b64(u, "client-certificate-data"),
      certFile: fileIn(us.dir, str(u, "client-certificate")),
      key: b64(u, "client-key-data"),
      keyFile: fileIn(us.dir, str(u, "client-key")),
      username: str(u, "username"),
      password: str(u, "password"),
      plugin: isRecord(u.exec) || isRecord(u["auth-provider"]),
    };
    return new KubeAccess(cluster, user, reload);
  }

  getCurrentCluster(): { readonly server: string } {
    return { server: this.cluster.server };
  }

  async applyToHTTPSOptions(opts: https.RequestOptions): Promise<void> {
    if (this.user.plugin) {
      this.#delegate ??= loadDelegate(this.reload);
      return (await this.#delegate).applyToHTTPSOptions(opts);
    }
    const c = this.cluster;
    const u = this.user;
    const headers: Record<string, string> = {};
    if (c.ca ?? c.caFile) opts.ca = c.ca ?? readFileSync(c.caFile as string);
    if (c.insecure) opts.rejectUnauthorized = false;
    if (c.tlsServerName) opts.servername = c.tlsServerName;
    if (u.cert ?? u.certFile) opts.cert = u.cert ?? readFileSync(u.certFile as string);
    if (u.key ?? u.keyFile) opts.key = u.key ?? readFileSync(u.keyFile as string);
    const token = u.token ?? (u.tokenFile ? readFileSync(u.tokenFile, "utf8").trim() : undefined);
    if (token) headers.authorization = `Bearer ${token}`;
    else if (u.username !== undefined) opts.auth = `${u.username}:${u.password ?? ""}`;
    opts.headers = { ...(opts.headers ?? {}), ...headers };
  }
}

/** The part of client-node's KubeConfig used for plugin credentials. */
interface ClientNodeConfig extends KubeConfigSource {
  loadFromFile(path: string): void;
  loadFromDefault(): void;
  loadFromCluster(pathPrefix?: string): void;
}

async function loadDelegate(reload: (kc: ClientNodeConfig) => void): Promise<KubeConfigSource> {
  const { KubeConfig } = await import("@kubernetes/client-node");
  const kc = new KubeConfig();
  reload(kc);
  return kc;
}

function parseDoc(text: string, path: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = parse(text);
  } catch (err) {
    throw new KubeConfigError(`${path}: not YAML: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (!isRecord(v)) throw new KubeConfigError(`${path}: not a kubeconfig`);
  return v;
}

/** Named entries of a kubeconfig list (`clusters`, `users`, `contexts`), first file wins. */
function named(
  docs: readonly { path: string; doc: Record<string, unknown> }[],
  list: string,
  inner: string,
): Map<string, { value: Record<string, unknown>; dir: string }> {
  const out = new Map<string, { value: Record<string, unknown>; dir: string }>();
  for (const { path, doc } of docs) {
    const items = doc[list];
    if (!Array.isArray(items)) continue;
    for (const it of items) {
      if (!isRecord(it) || typeof it.name !== "string" || out.has(it.name)) continue;
      out.set(it.name, { value: isRecord(it[inner]) ? it[inner] : {}, dir: dirname(path) });
    }
  }
  return out;
}

function str(o: Record<string, unknown>, k: string): string | undefined {
  const v = o[k];
  return typeof v === "string" && v !== "" ? v : undefined;
}

function fileIn(dir: string, p: string | undefined): string | undefined {
  return p === undefined ? undefined : isAbsolute(p) ? p : join(dir, p);
}

function b64(o: Record<string, unknown>, k: string): Buffer | undefined {
  const v = str(o, k);
  return v === undefined ? undefined : Buffer.from(v, "base64");
}

/** A kubeconfig path, "in-cluster", an already loaded config, or (undefined) the usual lookup. */
export function loadKubeConfig(source: string | KubeConfigSource | undefined): KubeConfigSource {
  if (typeof source === "object") return source;
  if (source === "in-cluster") return KubeAccess.inCluster();
  if (source) return KubeAccess.fromFile(source);
  return KubeAccess.fromDefault();
}
