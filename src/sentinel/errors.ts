// What went wrong with an upstream attempt, and what the client is told. Pure: error objects
// (undici's codes, Node's errno codes) in, a class out; a class in, status and short body out.
// Every answer the sentinel makes itself names its cause in the body and in
// X-Krane-Sentinel-Error, so "no instance" is never confused with "your app said 503".

export type UpstreamFailure =
  /** No connection could be made: refused, unreachable, connect timeout. Nothing was sent. */
  | "connect"
  /** The connection broke before a response began (reset, closed). The request may have arrived. */
  | "reset"
  /** No response headers within the timeout. */
  | "timeout"
  /**
   * The instance left the routing table and stopped answering (new connections unanswered): its
   * requests in flight were cut. The request may have arrived.
   */
  | "gone"
  /** The client went away or the request body failed. */
  | "client"
  | "other";

const CONNECT_CODES = new Set([
  "ECONNREFUSED",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EHOSTDOWN",
  "EADDRNOTAVAIL",
  "ENOTFOUND",
  "EAI_AGAIN",
  "UND_ERR_CONNECT_TIMEOUT",
]);
/** The error an instance's requests in flight are cut with once it is gone (./upstreams.ts). */
export const INSTANCE_GONE_CODE = "KRANE_INSTANCE_GONE";

const RESET_CODES = new Set(["ECONNRESET", "EPIPE", "ECONNABORTED", "UND_ERR_SOCKET", "UND_ERR_CLOSED"]);

function codeOf(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === "string" ? code : undefined;
}

export function classifyUpstreamError(err: unknown): UpstreamFailure {
  const code = codeOf(err);
  const cause = codeOf((err as { cause?: unknown } | null)?.cause);
  if (code === INSTANCE_GONE_CODE || cause === INSTANCE_GONE_CODE) return "gone";
  if ((code && CONNECT_CODES.has(code)) || (cause && CONNECT_CODES.has(cause))) return "connect";
  if (code === "UND_ERR_HEADERS_TIMEOUT") return "timeout";
  if (
    code === "UND_ERR_ABORTED" ||
    code === "UND_ERR_REQ_CONTENT_LENGTH_MISMATCH" ||
    code === "ERR_STREAM_PREMATURE_CLOSE"
  )
    return "client";
  if ((code && RESET_CODES.has(code)) || (cause && RESET_CODES.has(cause))) return "reset";
  return "other";
}

export type ProxyErrorCause =
  | "not-ready"
  | "no-instance"
  | "held-full"
  | "held-timeout"
  | "all-instances-failing"
  | "upstream-reset"
  | "upstream-timeout"
  | "instance-gone"
  | "upstream-error"
  | "bad-request"
  | "invalid-host";

export const ERROR_HEADER = "x-krane-sentinel-error";

const answers: Record<ProxyErrorCause, { status: number; body: string }> = {
  "not-ready": { status: 503, body: "krane sentinel: no routing table yet\n" },
  "no-instance": { status: 503, body: "krane sentinel: no running instance of this environment\n" },
  "held-full": {
    status: 503,
    body: "krane sentinel: the environment is starting and already holds as many requests as it may; retry\n",
  },
  "held-timeout": { status: 503, body: "krane sentinel: the environment did not start in time; retry\n" },
  "all-instances-failing": {
    status: 502,
    body: "krane sentinel: all instances tried are failing (connection refused or unreachable)\n",
  },
  "upstream-reset": { status: 502, body: "krane sentinel: the instance closed the connection before answering\n" },
  "upstream-timeout": { status: 504, body: "krane sentinel: the instance did not answer in time\n" },
  "instance-gone": {
    status: 502,
    body: "krane sentinel: the instance left the routing table and stopped answering\n",
  },
  "upstream-error": { status: 502, body: "krane sentinel: the instance's answer could not be read\n" },
  "bad-request": { status: 400, body: "krane sentinel: malformed request\n" },
  "invalid-host": { status: 400, body: "krane sentinel: invalid or missing Host header\n" },
};

export function errorAnswer(cause: ProxyErrorCause): { status: number; body: string } {
  return answers[cause];
}

/** The client's answer after the last attempt failed this way. */
export function causeOf(failure: UpstreamFailure): ProxyErrorCause {
  switch (failure) {
    case "connect":
      return "all-instances-failing";
    case "reset":
      return "upstream-reset";
    case "timeout":
      return "upstream-timeout";
    case "gone":
      return "instance-gone";
    case "client":
      return "bad-request";
    default:
      return "upstream-error";
  }
}

/** Whether the instance should count a failure for passive health. */
export function countsAgainstInstance(f: UpstreamFailure): boolean {
  return f === "connect" || f === "reset";
}
