// The sentinel's own answers to gRPC clients, pure. A gRPC client reads a call's outcome from
// `grpc-status` and `grpc-message`, not from the HTTP status or body, so an answer the sentinel
// makes itself (no instance, connect failure, upstream timeout, refused token) goes to a request
// whose content-type is application/grpc* as a "trailers-only" answer: HTTP 200, no body, the
// status in the (only) header block. Codes: https://grpc.github.io/grpc/core/md_doc_statuscodes.html
import type { ProxyErrorCause } from "./errors.js";

export const GRPC_STATUS = {
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  PERMISSION_DENIED: 7,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
  UNKNOWN: 2,
} as const;

/** Whether a request's content-type is one of gRPC's (application/grpc, +proto, +json, -web, …). */
export function isGrpcRequest(contentType: string | undefined): boolean {
  return contentType !== undefined && /^application\/grpc([+;-]|$)/i.test(contentType.trim());
}

const BY_CAUSE: Partial<Record<string, number>> = {
  "not-ready": GRPC_STATUS.UNAVAILABLE,
  "no-instance": GRPC_STATUS.UNAVAILABLE,
  "held-full": GRPC_STATUS.UNAVAILABLE,
  "held-timeout": GRPC_STATUS.UNAVAILABLE,
  "all-instances-failing": GRPC_STATUS.UNAVAILABLE,
  "upstream-reset": GRPC_STATUS.UNAVAILABLE,
  "upstream-timeout": GRPC_STATUS.DEADLINE_EXCEEDED,
  "instance-gone": GRPC_STATUS.UNAVAILABLE,
  "upstream-error": GRPC_STATUS.INTERNAL,
  "bad-request": GRPC_STATUS.INTERNAL,
  "invalid-host": GRPC_STATUS.INVALID_ARGUMENT,
  unauthorized: GRPC_STATUS.UNAUTHENTICATED,
  forbidden: GRPC_STATUS.PERMISSION_DENIED,
} satisfies Partial<Record<ProxyErrorCause | "unauthorized" | "forbidden", number>>;

/** The gRPC status of one of the sentinel's own answers: by its cause, else by HTTP status (gRPC's own mapping). */
export function grpcStatusOf(cause: string | undefined, httpStatus: number): number {
  const c = cause === undefined ? undefined : BY_CAUSE[cause];
  if (c !== undefined) return c;
  switch (httpStatus) {
    case 401:
      return GRPC_STATUS.UNAUTHENTICATED;
    case 403:
      return GRPC_STATUS.PERMISSION_DENIED;
    case 429:
    case 502:
    case 503:
    case 504:
      return GRPC_STATUS.UNAVAILABLE;
    case 400:
      return GRPC_STATUS.INTERNAL;
    default:
      return GRPC_STATUS.UNKNOWN;
  }
}

/** grpc-message: percent-encoded UTF-8, every byte outside printable ASCII and '%' itself encoded. */
export function encodeGrpcMessage(text: string): string {
  let out = "";
  for (const b of Buffer.from(text, "utf8")) {
    out +=
      b >= 0x20 && b <= 0x7e && b !== 0x25
        ? String.fromCharCode(b)
        : `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/**
 * The headers of a trailers-only gRPC answer standing for an HTTP answer the sentinel would make:
 * the cause and request id headers kept (and WWW-Authenticate for a refused token), the body's
 * text as grpc-message.
 */
export function grpcAnswerHeaders(
  status: number,
  headers: Readonly<Record<string, string>>,
  body: string,
  cause: string | undefined,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k in headers) {
    const lower = k.toLowerCase();
    if (lower === "content-type" || lower === "content-length") continue;
    out[lower] = headers[k] ?? "";
  }
  out["content-type"] = "application/grpc";
  out["grpc-status"] = String(grpcStatusOf(cause, status));
  out["grpc-message"] = encodeGrpcMessage(body.trim());
  return out;
}
