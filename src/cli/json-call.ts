// A light client for ctrl's read calls: the Connect protocol's unary calls in its JSON codec,
// over one HTTP/2 connection of node:http2, with nothing else on the path. `krane status` (in
// table form) uses it so it starts quickly: the Connect client and protobuf-es cost a command
// about 50 ms before its first byte (decoding the API's embedded descriptors, and loading
// Node's fetch implementation for Connect's Headers), where this costs loading node:http2
// (about 13 ms, node:tls with it). Requests and
// answers are typed with the generated JSON types (src/gen, `json_types=true`), which are types
// only: nothing generated is loaded. Every other command uses the Connect client
// (user-client.ts).
//
// The wire: `POST /<package>.<Service>/<Method>`, `content-type: application/json`,
// `connect-protocol-version: 1`, `connect-timeout-ms`; a success is 200 with the answer as
// JSON; an error is `{"code": "...", "message": "..."}` with an HTTP status, or, from something
// between the client and ctrl that is not ctrl, a status alone (mapped as Connect maps it).
// Outages are retried as the Connect client retries them (calls.ts).
import { connect, type ClientHttp2Session, type IncomingHttpHeaders } from "node:http2";
import { isOutageCode, parseDuration, repeatWhileDown } from "./calls.js";
import { commandBearer } from "./cli-config.js";
import type { ConnectionFlags } from "./user-client.js";

/** An error from a call: a Connect code's wire name ("not_found") and ctrl's message. */
export class CallError extends Error {
  constructor(
    readonly code: string,
    readonly rawMessage: string,
  ) {
    super(`${code}: ${rawMessage}`);
    this.name = "CallError";
  }
}

/** Connect's code for an error answer that carries no Connect error body (its HTTP status alone). */
export function codeFromHttpStatus(status: number): string {
  switch (status) {
    case 400:
      return "internal";
    case 401:
      return "unauthenticated";
    case 403:
      return "permission_denied";
    case 404:
      return "unimplemented";
    case 429:
    case 502:
    case 503:
    case 504:
      return "unavailable";
    default:
      return "unknown";
  }
}

/** The answer to one request: its HTTP status, content type and body. */
interface Answer {
  status: number;
  contentType: string;
  body: string;
}

/** A connection to ctrl for unary JSON calls; close() it when done. */
export class JsonCtrl {
  readonly #url: string;
  readonly #token: () => Promise<string>;
  readonly #retryForMs: number;
  readonly #timeoutMs: number;
  #session: ClientHttp2Session | undefined;

  constructor(flags: ConnectionFlags, opts: { timeoutMs?: number } = {}) {
    this.#url = flags.ctrlUrl || "http://127.0.0.1:7070";
    this.#token = commandBearer(flags.token, this.#url).token;
    this.#retryForMs = parseDuration(flags.retryFor ?? "10s");
    this.#timeoutMs = opts.timeoutMs ?? 30_000;
  }

  /**
   * Calls `service.method` (`service` in full: "krane.ctrl.v1.StatusService") with `req`, read
   * calls only: an outage is retried for --retry-for.
   */
  call<Res>(service: string, method: string, req: object): Promise<Res> {
    return repeatWhileDown<Res, CallError>(
      { windowMs: this.#retryForMs, ctrlUrl: this.#url, progress: (line) => process.stderr.write(`${line}\n`) },
      {
        method,
        safe: true,
        outage: (err) =>
          err instanceof CallError && isOutageCode(err.code, err.rawMessage)
            ? { code: err.code, message: err.rawMessage }
            : undefined,
        fail: (message, err) => new CallError(err.code, message),
      },
      async () => parse<Res>(await this.#request(`/${service}/${method}`, JSON.stringify(req), await this.#token())),
    );
  }

  close(): void {
    this.#session?.close();
    this.#session = undefined;
  }

  #connection(): ClientHttp2Session {
    const open = this.#session;
    if (open && !open.closed && !open.destroyed) return open;
    const session = connect(this.#url);
    // A failed connection fails its requests (below); the session's own error needs a listener.
    session.on("error", () => {});
    this.#session = session;
    return session;
  }

  #request(path: string, body: string, token: string): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const session = this.#connection();
      const stream = session.request({
        ":method": "POST",
        ":path": path,
        "content-type": "application/json",
        "connect-protocol-version": "1",
        "connect-timeout-ms": String(this.#timeoutMs),
        authorization: `Bearer ${token}`,
      });
      const timer = setTimeout(() => {
        stream.close();
        reject(new CallError("deadline_exceeded", `no answer from ctrl in ${this.#timeoutMs / 1000} s`));
      }, this.#timeoutMs);
      let headers: IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      stream.on("response", (h) => (headers = h));
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        clearTimeout(timer);
        resolve({
          status: Number(headers[":status"] ?? 0),
          contentType: String(headers["content-type"] ?? ""),
          body: Buffer.concat(chunks).toString("utf8"),
        });
      });
      stream.on("error", (err: Error) => {
        clearTimeout(timer);
        // Not reached, or the connection broke: the Connect client calls this unavailable too.
        this.close();
        reject(new CallError("unavailable", rootCause(err).message));
      });
      stream.end(body);
    });
  }
}

/** An answer's JSON, or its error as a CallError. */
export function parse<Res>(a: Answer): Res {
  const json = a.contentType.startsWith("application/json") ? tryJson(a.body) : undefined;
  if (a.status === 200) {
    if (typeof json !== "object" || json === null || Array.isArray(json))
      throw new CallError("internal", `ctrl's answer is not a JSON object (${a.contentType || "no content type"})`);
    return json as Res;
  }
  const err = json as { code?: unknown; message?: unknown } | undefined;
  if (err && typeof err === "object" && typeof err.code === "string")
    return fail(new CallError(err.code, typeof err.message === "string" ? err.message : ""));
  return fail(
    new CallError(codeFromHttpStatus(a.status), `HTTP ${a.status}${a.body ? `: ${a.body.slice(0, 200)}` : ""}`),
  );
}

/** A cancelled stream's cause ("connect ECONNREFUSED …"), not the cancellation. */
function rootCause(err: Error): Error {
  let e = err;
  while (e.cause instanceof Error) e = e.cause;
  return e;
}

function fail(err: CallError): never {
  throw err;
}

function tryJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
