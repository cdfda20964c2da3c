// Raw Kubernetes REST I/O for the agent: get, list (paginated), server-side apply, create,
// delete and watch, on plain JSON. Credentials come from a KubeConfigSource (kubeconfig.ts: a
// kubeconfig file or in-cluster service account; tests pass client-node KubeConfigs); connections are pooled
// in one keep-alive agent (client-node 1.4.0 makes a new agent per request), requests are
// rate-limited (QPS + burst) and counted per verb and resource.
import * as http from "node:http";
import * as https from "node:https";
import type { KubeConfigSource } from "./kubeconfig.js";
import { isKubeObject, isRecord, type KubeList, type KubeObject } from "./object.js";
import { TokenBucket } from "../retry/rate-limit.js";
import { retry } from "../retry/retry.js";
import { apiVersionOf, resourcePath, type ResourceType } from "./resources.js";

export const FIELD_MANAGER = "krane";

export type KubeVerb = "get" | "list" | "watch" | "apply" | "create" | "update" | "delete";

/** Thrown instead of writing when the write guard refuses (e.g. this replica no longer leads). */
export class WriteRefusedError extends Error {}

export interface KubeClientOptions {
  readonly qps?: number;
  readonly burst?: number;
  readonly requestTimeoutMs?: number;
  readonly fieldManager?: string;
  /** Called once per request with its outcome: the HTTP status, or 0 for a transport error. */
  readonly onRequest?: (verb: KubeVerb, resource: string, status: number) => void;
  /** Asked before every object write: a reason to refuse it, or undefined to go ahead. */
  readonly writeGuard?: () => string | undefined;
}

/** Sends of one request again after its reused connection turned out closed (see #send). */
const STALE_SOCKET_RETRIES = 3;

/**
 * Whether a request failed because the kept-alive connection it reused had been closed by the
 * server: the reset arrives as ECONNRESET when it comes while the client waits for the answer,
 * as EPIPE when it comes while the client still writes the request's body.
 */
export function isStaleSocket(reusedSocket: boolean, err: NodeJS.ErrnoException): boolean {
  return reusedSocket && (err.code === "ECONNRESET" || err.code === "EPIPE");
}

/** A request sent on a reused keep-alive connection that the server had closed (`cause`: the reset). */
class StaleSocketError extends Error {
  constructor(override readonly cause: Error) {
    super(cause.message);
  }
}

/** A non-2xx answer from the API server. */
export class KubeApiError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
    this.name = "KubeApiError";
  }
}

export function isNotFound(err: unknown): boolean {
  return err instanceof KubeApiError && err.status === 404;
}

export function isGone(err: unknown): boolean {
  return err instanceof KubeApiError && err.status === 410;
}

/**
 * True when the API server refused a request for a reason that retrying cannot fix: a malformed
 * or invalid object (400, 422) or a request the caller may not make (403: RBAC or the admission
 * fence). Timeouts, transport errors, 409 conflicts, 429 and 5xx are worth retrying; so are 401
 * (credentials rotate) and 404 (e.g. a namespace that is being created).
 */
export function isPermanentKubeError(err: unknown): boolean {
  return err instanceof KubeApiError && [400, 403, 422].includes(err.status);
}

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";

export interface WatchParams {
  /** Only this namespace (default: all namespaces). */
  readonly namespace?: string;
  readonly resourceVersion?: string;
  readonly labelSelector?: string;
  readonly timeoutSeconds?: number;
  readonly allowWatchBookmarks?: boolean;
}

interface RequestOptions {
  readonly query?: Record<string, string | number | boolean | undefined>;
  readonly body?: unknown;
  readonly contentType?: string;
  readonly signal?: AbortSignal;
}

export class KubeClient {
  readonly server: URL;
  readonly #kc: KubeConfigSource;
  readonly #opts: KubeClientOptions;
  readonly #limiter: TokenBucket;
  #agent: http.Agent | undefined;
  #watchAgent: http.Agent | undefined;

  constructor(kc: KubeConfigSource, opts: KubeClientOptions = {}) {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error("kubeconfig has no current cluster");
    this.server = new URL(cluster.server);
    this.#kc = kc;
    this.#opts = opts;
    this.#limiter = new TokenBucket(opts.qps ?? 0, opts.burst ?? Math.max(1, (opts.qps ?? 0) * 2));
  }

  get fieldManager(): string {
    return this.#opts.fieldManager ?? FIELD_MANAGER;
  }

  close(): void {
    this.#agent?.destroy();
    this.#watchAgent?.destroy();
  }

  async get(
    r: ResourceType,
    namespace: string | undefined,
    name: string,
    signal?: AbortSignal,
  ): Promise<KubeObject | undefined> {
    try {
      const body = await this.#request("get", r, "GET", resourcePath(r, namespace, name), { signal });
      return isKubeObject(body) ? body : undefined;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** One page of a list. */
  async listPage(
    r: ResourceType,
    opts: { namespace?: string; labelSelector?: string; limit?: number; continue?: string; signal?: AbortSignal },
  ): Promise<KubeList> {
    const body = await this.#request("list", r, "GET", resourcePath(r, opts.namespace), {
      query: {
        labelSelector: opts.labelSelector,
        fieldSelector: r.fieldSelector,
        limit: opts.limit,
        continue: opts.continue,
      },
      signal: opts.signal,
    });
    if (!isRecord(body) || !Array.isArray(body.items)) throw new Error(`unexpected list answer for ${r.plural}`);
    const meta = isRecord(body.metadata) ? body.metadata : {};
    const items = (body.items as unknown[]).filter(isKubeObject).map((o) => {
      // Lists omit apiVersion/kind on items; put them back so cached objects are complete.
      o.apiVersion ??= apiVersionOf(r);
      o.kind ??= r.kind;
      return o;
    });
    return {
      metadata: {
        resourceVersion: typeof meta.resourceVersion === "string" ? meta.resourceVersion : undefined,
        continue: typeof meta.continue === "string" && meta.continue !== "" ? meta.continue : undefined,
      },
      items,
    };
  }

  /** All pages of a list, and the resourceVersion to watch from. */
  async list(
    r: ResourceType,
    opts: { namespace?: string; labelSelector?: string; pageSize?: number; signal?: AbortSignal } = {},
  ): Promise<{ items: KubeObject[]; resourceVersion: string }> {
    const items: KubeObject[] = [];
    let cont: string | undefined;
    let rv = "";
    do {
      const page = await this.listPage(r, { ...opts, limit: opts.pageSize ?? 500, continue: cont });
      items.push(...page.items);
      cont = page.metadata.continue;
      rv = page.metadata.resourceVersion ?? rv;
    } while (cont);
    return { items, resourceVersion: rv };
  }

  /** Server-side apply with krane's field manager (or `fieldManager`); `force` takes over fields others set. */
  async apply(
    r: ResourceType,
    obj: KubeObject,
    opts: { force?: boolean; signal?: AbortSignal; fieldManager?: string } = {},
  ): Promise<KubeObject> {
    this.#guard();
    const name = obj.metadata.name;
    if (!name) throw new Error("apply: object has no name");
    const body = await this.#request("apply", r, "PATCH", resourcePath(r, obj.metadata.namespace, name), {
      query: { fieldManager: opts.fieldManager ?? this.fieldManager, force: opts.force ?? true },
      body: { ...obj, apiVersion: apiVersionOf(r), kind: r.kind },
      contentType: "application/apply-patch+yaml",
      signal: opts.signal,
    });
    if (!isKubeObject(body)) throw new Error(`unexpected apply answer for ${r.plural}/${name}`);
    return body;
  }

  /** Creates the object; an existing one is left alone. */
  async create(r: ResourceType, obj: KubeObject, signal?: AbortSignal): Promise<"created" | "exists"> {
    this.#guard();
    try {
      await this.#request("create", r, "POST", resourcePath(r, obj.metadata.namespace), {
        query: { fieldManager: this.fieldManager },
        body: { ...obj, apiVersion: apiVersionOf(r), kind: r.kind },
        contentType: "application/json",
        signal,
      });
      return "created";
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 409) return "exists";
      throw err;
    }
  }

  /** Deletes with background propagation; a missing object counts as deleted. */
  async delete(
    r: ResourceType,
    namespace: string | undefined,
    name: string,
    signal?: AbortSignal,
  ): Promise<"deleted" | "not-found"> {
    this.#guard();
    try {
      await this.#request("delete", r, "DELETE", resourcePath(r, namespace, name), {
        body: { apiVersion: "v1", kind: "DeleteOptions", propagationPolicy: "Background" },
        contentType: "application/json",
        signal,
      });
      return "deleted";
    } catch (err) {
      if (isNotFound(err)) return "not-found";
      throw err;
    }
  }

  /**
   * Deletes every object of a collection in one namespace that matches a label selector
   * (background propagation); for kinds the caller may delete but not list (Secrets).
   */
  async deleteCollection(
    r: ResourceType,
    namespace: string,
    labelSelector: string,
    signal?: AbortSignal,
  ): Promise<void> {
    this.#guard();
    await this.#request("delete", r, "DELETE", resourcePath(r, namespace), {
      query: { labelSelector },
      body: { apiVersion: "v1", kind: "DeleteOptions", propagationPolicy: "Background" },
      contentType: "application/json",
      signal,
    });
  }

  /** A JSON patch of an object's subresource (pods/resize), a write like apply (fenced by the write guard). */
  async patchSubresource(
    r: ResourceType,
    namespace: string,
    name: string,
    subresource: string,
    patch: unknown[],
    signal?: AbortSignal,
  ): Promise<void> {
    this.#guard();
    await this.#request("apply", r, "PATCH", `${resourcePath(r, namespace, name)}/${subresource}`, {
      query: { fieldManager: this.fieldManager },
      body: patch,
      contentType: "application/json-patch+json",
      signal,
    });
  }

  /** A raw JSON request (subresources such as serviceaccounts/token); counted under `resource`. */
  async raw(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<unknown> {
    const r: ResourceType = { group: "", version: "", kind: "", plural: resourceLabel(path), namespaced: false };
    const verb: KubeVerb =
      method === "GET"
        ? "get"
        : method === "DELETE"
          ? "delete"
          : method === "PATCH"
            ? "apply"
            : method === "PUT"
              ? "update"
              : "create";
    return await this.#request(verb, r, method, path, { body, contentType: "application/json", signal });
  }

  /**
   * Watches a collection. Resolves when the server ends the stream (or `signal` aborts);
   * rejects with KubeApiError on a non-200 answer and with the transport error otherwise.
   * `onEvent` runs synchronously for every decoded line.
   */
  async watch(
    r: ResourceType,
    params: WatchParams,
    onEvent: (type: WatchEventType, object: unknown) => void,
    signal: AbortSignal,
  ): Promise<void> {
    const query: Record<string, string | number | boolean | undefined> = {
      watch: true,
      resourceVersion: params.resourceVersion,
      labelSelector: params.labelSelector,
      fieldSelector: r.fieldSelector,
      timeoutSeconds: params.timeoutSeconds,
      allowWatchBookmarks: params.allowWatchBookmarks,
    };
    const res = await this.#send("watch", r, "GET", resourcePath(r, params.namespace), { query, signal }, true);
    if (res.statusCode !== 200) {
      const text = await readAll(res);
      this.#count("watch", r, res.statusCode ?? 0);
      throw apiError(res.statusCode ?? 0, text);
    }
    this.#count("watch", r, 200);
    await new Promise<void>((resolve, reject) => {
      // One event per line; only the unfinished tail of a chunk is kept.
      let buf = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        buf = takeLines(buf === "" ? chunk : buf + chunk, (line) => {
          let ev: unknown;
          try {
            ev = JSON.parse(line);
          } catch {
            return true;
          }
          if (isRecord(ev) && typeof ev.type === "string") {
            try {
              onEvent(ev.type as WatchEventType, ev.object);
            } catch (err) {
              res.destroy();
              reject(err);
              return false;
            }
          }
          return true;
        });
      });
      res.on("end", () => resolve());
      res.on("close", () => resolve());
      res.on("error", (err) => (signal.aborted ? resolve() : reject(err)));
    });
  }

  /**
   * Reads a streamed answer (a pod's log, `pods/log` with follow): `onData` gets each chunk as it
   * arrives, as bytes (the caller decides whether to decode). Resolves when the server ends the
   * answer or `signal` aborts; rejects with KubeApiError on a non-200 answer. Rate-limited like
   * any request, counted as a get.
   */
  async streamBytes(
    path: string,
    query: Record<string, string | number | boolean | undefined>,
    onData: (chunk: Buffer) => void,
    signal: AbortSignal,
  ): Promise<void> {
    const r: ResourceType = { group: "", version: "", kind: "", plural: resourceLabel(path), namespaced: true };
    await this.#limiter.take();
    const res = await this.#send("get", r, "GET", path, { query, signal }, true);
    const status = res.statusCode ?? 0;
    this.#count("get", r, status);
    if (status !== 200) throw apiError(status, await readAll(res));
    await new Promise<void>((resolve, reject) => {
      res.on("data", (chunk: Buffer) => {
        try {
          onData(chunk);
        } catch (err) {
          res.destroy();
          reject(err);
        }
      });
      res.on("end", () => resolve());
      res.on("close", () => resolve());
      res.on("error", (err) => (signal.aborted ? resolve() : reject(err)));
    });
  }

  async #request(
    verb: KubeVerb,
    r: ResourceType,
    method: string,
    path: string,
    opts: RequestOptions,
  ): Promise<unknown> {
    await this.#limiter.take();
    let res: http.IncomingMessage;
    try {
      res = await this.#send(verb, r, method, path, opts, false);
    } catch (err) {
      this.#count(verb, r, 0);
      throw err;
    }
    const text = await readAll(res);
    const status = res.statusCode ?? 0;
    this.#count(verb, r, status);
    if (status < 200 || status >= 300) throw apiError(status, text);
    if (text === "") return undefined;
    return JSON.parse(text) as unknown;
  }

  /** Writes of objects (apply, create, delete) ask the guard first; raw requests do not. */
  #guard(): void {
    const reason = this.#opts.writeGuard?.();
    if (reason !== undefined) throw new WriteRefusedError(`write refused: ${reason}`);
  }

  #count(verb: KubeVerb, r: ResourceType, status: number): void {
    this.#opts.onRequest?.(verb, r.plural, status);
  }

  async #send(
    _verb: KubeVerb,
    _r: ResourceType,
    method: string,
    path: string,
    opts: RequestOptions,
    streaming: boolean,
  ): Promise<http.IncomingMessage> {
    const tls = await this.#tlsAndHeaders();
    const url = new URL(path, this.server);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const headers: Record<string, string> = { ...tls.headers, accept: "application/json" };
    if (body !== undefined) {
      headers["content-type"] = opts.contentType ?? "application/json";
      headers["content-length"] = String(Buffer.byteLength(body));
    }
    const isHttps = url.protocol === "https:";
    const agent = streaming
      ? this.#getWatchAgent(tls.agentOptions, isHttps)
      : this.#getAgent(tls.agentOptions, isHttps);
    const timeoutMs = streaming ? 0 : (this.#opts.requestTimeoutMs ?? 30_000);
    const once = (): Promise<http.IncomingMessage> =>
      new Promise<http.IncomingMessage>((resolve, reject) => {
        const req = (isHttps ? https : http).request(url, { method, headers, agent, signal: opts.signal }, resolve);
        if (timeoutMs > 0) {
          req.setTimeout(timeoutMs, () =>
            req.destroy(new Error(`kubernetes ${method} ${url.pathname} timed out after ${timeoutMs} ms`)),
          );
        }
        req.on("error", (err: NodeJS.ErrnoException) =>
          reject(isStaleSocket(req.reusedSocket, err) ? new StaleSocketError(err) : err),
        );
        if (streaming) req.once("socket", guardSocket);
        if (body !== undefined) req.write(body);
        req.end();
      });
    // A kept-alive connection the server closed just as it was reused (the server closes idle
    // connections, and a pool's sockets go idle together): the request almost surely never
    // reached the server, and every method here but POST is idempotent (get, list, apply,
    // delete), so it goes again at once on a new connection — at most STALE_SOCKET_RETRIES
    // times. A create (POST) does not: the caller's own retry decides for it.
    try {
      return await retry(() => once(), {
        policy: { baseMs: 0, capMs: 0 },
        maxAttempts: STALE_SOCKET_RETRIES + 1,
        signal: opts.signal,
        retryable: (err) => err instanceof StaleSocketError && method !== "POST",
      });
    } catch (err) {
      throw err instanceof StaleSocketError ? err.cause : err;
    }
  }

  #auth: { at: number; value: { headers: Record<string, string>; agentOptions: https.AgentOptions } } | undefined;

  /** Credentials from the KubeConfig, re-read every 10 s (tokens and in-cluster files rotate). */
  async #tlsAndHeaders(): Promise<{ headers: Record<string, string>; agentOptions: https.AgentOptions }> {
    const now = Date.now();
    if (this.#auth && now - this.#auth.at < 10_000) return this.#auth.value;
    const value = await this.#readCredentials();
    this.#auth = { at: now, value };
    return value;
  }

  async #readCredentials(): Promise<{ headers: Record<string, string>; agentOptions: https.AgentOptions }> {
    const opts: https.RequestOptions = {};
    await this.#kc.applyToHTTPSOptions(opts);
    (opts.agent as http.Agent | undefined)?.destroy?.();
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(opts.headers ?? {})) {
      if (typeof v === "string" || typeof v === "number") headers[k.toLowerCase()] = String(v);
    }
    if (opts.auth) headers.authorization = `Basic ${Buffer.from(opts.auth).toString("base64")}`;
    return {
      headers,
      agentOptions: {
        ca: opts.ca,
        cert: opts.cert,
        key: opts.key,
        rejectUnauthorized: opts.rejectUnauthorized,
        servername: opts.servername,
      },
    };
  }

  #getAgent(o: https.AgentOptions, isHttps: boolean): http.Agent {
    this.#agent ??= isHttps
      ? new https.Agent({ ...o, keepAlive: true, maxSockets: 64 })
      : new http.Agent({ keepAlive: true, maxSockets: 64 });
    return this.#agent;
  }

  #getWatchAgent(o: https.AgentOptions, isHttps: boolean): http.Agent {
    this.#watchAgent ??= isHttps ? new https.Agent({ ...o, keepAlive: true }) : new http.Agent({ keepAlive: true });
    return this.#watchAgent;
  }
}

/**
 * A watch aborted from its own event callback once the whole answer has arrived (the informer
 * does so on a 410 ERROR event, which kube-apiserver sends as a complete answer) makes Node
 * destroy the kept-alive socket with an AbortError no request listens for any more: without a
 * listener that is an uncaught exception, which would end the agent. The request and its answer
 * still see every error; this only keeps the socket's from escaping. Once per socket.
 */
const guardedSockets = new WeakSet<object>();
function guardSocket(socket: { on(event: "error", listener: () => void): unknown }): void {
  if (guardedSockets.has(socket)) return;
  guardedSockets.add(socket);
  socket.on("error", () => undefined);
}

/**
 * The resource a raw request is counted under: the collection after `namespaces/<ns>/` (with a
 * subresource, e.g. "serviceaccounts/token"), else the last segment before a name.
 */
export function resourceLabel(path: string): string {
  const parts = path.split("?")[0]?.split("/").filter(Boolean) ?? [];
  const ns = parts.indexOf("namespaces");
  const rest = ns >= 0 && parts.length > ns + 2 ? parts.slice(ns + 2) : parts.slice(-1);
  return rest.length >= 3 ? `${rest[0]}/${rest[2]}` : (rest[0] ?? "");
}

/**
 * Hands each complete, non-blank line of `buf` to `onLine` (until it answers false) and returns
 * the unfinished rest. Lines are cut out by index: re-slicing the remainder after every line
 * would copy a big chunk once per line.
 */
export function takeLines(buf: string, onLine: (line: string) => boolean): string {
  let start = 0;
  let nl: number;
  while ((nl = buf.indexOf("\n", start)) >= 0) {
    const line = buf.slice(start, nl);
    start = nl + 1;
    if (line.trim() === "") continue;
    if (!onLine(line)) return "";
  }
  return start === 0 ? buf : buf.slice(start);
}

function readAll(res: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on("data", (c: Buffer) => chunks.push(c));
    res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    res.on("error", reject);
  });
}

function apiError(status: number, text: string): KubeApiError {
  let reason = "";
  let message = text.slice(0, 500);
  try {
    const body: unknown = JSON.parse(text);
    if (isRecord(body)) {
      if (typeof body.reason === "string") reason = body.reason;
      if (typeof body.message === "string") message = body.message;
    }
  } catch {
    // not JSON
  }
  return new KubeApiError(status, reason, `kubernetes answered ${status}${reason ? ` ${reason}` : ""}: ${message}`);
}
