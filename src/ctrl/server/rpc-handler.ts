// ctrl's RPC request handler: Connect's router behind Node's HTTP/2 server, as
// @connectrpc/connect-node's connectNodeAdapter does, plus three things that adapter lacks:
//
//  - A request whose body cannot be decoded (not protobuf, not JSON, no message, two messages)
//    is answered `invalid_argument`, naming the message type and the problem. Connect decodes a
//    unary request before any interceptor runs and answers an undecodable body `internal`
//    ("parse binary: premature EOF"), which tells a client the server is broken. Here, a call
//    that failed before krane's interceptors ever saw it failed on its request by construction
//    (routing is done, nothing of krane ran), so `internal` from that stage, and `unimplemented`
//    for a body with no message or several, become `invalid_argument`, on the wire of each protocol (Connect's error JSON, gRPC's
//    trailers, gRPC-Web's trailer frame). Streaming calls are decoded inside the interceptors
//    (interceptors.ts does the same there).
//  - Calls refused at that stage are counted in krane_ctrl_rpc_total like every other call.
//  - Calls come as POST only (Connect would take a read declared NO_SIDE_EFFECTS over GET).
//  - A response that could not be written (usually a peer gone mid-answer) is logged through the
//    logger, not console.error: logs stay JSON.
import type * as http from "node:http";
import type * as http2 from "node:http2";
import type { DescMethod } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createConnectRouter,
  createContextKey,
  createContextValues,
  type ConnectRouter,
  type ContextValues,
  type Interceptor,
} from "@connectrpc/connect";
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from "@connectrpc/connect-node";
import {
  createAsyncIterable,
  encodeEnvelope,
  type UniversalServerRequest,
  type UniversalServerResponse,
} from "@connectrpc/connect/protocol";
import { codeToHttpStatus, errorFromJsonBytes, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import { CLIENT_ADDRESS } from "../audit/recorder.js";
import { FRAME_SINK, nodeFrameSink } from "../cluster-service/frame-sink.js";
import { undecodableRequest } from "./errors.js";

/** Set by the first interceptor: the call reached krane's code. */
const REACHED_INTERCEPTORS = createContextKey(false, { description: "krane: the call reached the interceptors" });

/** The first interceptor: marks the call as having reached krane's code. */
export const markReached: Interceptor = (next) => (req) => {
  req.contextValues.set(REACHED_INTERCEPTORS, true);
  return next(req);
};

export interface RpcHandlerOptions {
  readonly routes: (router: ConnectRouter) => void;
  readonly interceptors: Interceptor[];
  readonly readMaxBytes: number;
  readonly shutdownSignal?: AbortSignal;
  /** A call that ended before the interceptors saw it, with its final code. */
  readonly onEarlyEnd: (method: DescMethod, code: Code) => void;
  readonly onHandlerError: (method: DescMethod, err: unknown) => void;
  /** Requests for paths that are no RPC (the dashboard); absent: 404. */
  readonly fallback?: (req: NodeRequest, res: NodeResponse) => void;
}

export type NodeRequest = http.IncomingMessage | http2.Http2ServerRequest;
export type NodeResponse = http.ServerResponse | http2.Http2ServerResponse;

export function createRpcHandler(opts: RpcHandlerOptions): (req: NodeRequest, res: NodeResponse) => void {
  const router = createConnectRouter({
    interceptors: [markReached, ...opts.interceptors],
    readMaxBytes: opts.readMaxBytes,
    shutdownSignal: opts.shutdownSignal,
    acceptCompression: [compressionGzip, compressionBrotli],
  });
  opts.routes(router);
  const paths = new Map(router.handlers.map((h) => [h.requestPath, h]));
  return (req, res) => {
    const handler = paths.get((req.url ?? "").split("?", 1)[0] ?? "");
    if (!handler) {
      if (opts.fallback) return opts.fallback(req, res);
      res.writeHead(404);
      res.end();
      return;
    }
    // POST only, as before reads declared NO_SIDE_EFFECTS (proto/krane/ctrl/v1/policy.proto):
    // Connect would answer those over GET too, a way in that nothing of ctrl needs or audits.
    if (req.method !== "POST") {
      res.writeHead(405, { allow: "POST" });
      res.end();
      return;
    }
    const contextValues = createContextValues();
    // The peer of the connection (the audit log's client address; a proxy's, behind one).
    contextValues.set(CLIENT_ADDRESS, req.socket?.remoteAddress ?? "");
    if (handler.method.methodKind === "server_streaming") contextValues.set(FRAME_SINK, nodeFrameSink(res));
    const uReq = universalRequestFromNodeRequest(req, res, undefined, contextValues);
    handler(uReq)
      .then((uRes) => earlyFailuresAsInvalidArgument(uReq, uRes, handler.method, contextValues, opts.onEarlyEnd))
      .then((uRes) => universalResponseToNodeResponse(uRes, res))
      .catch((err: unknown) => {
        if (ConnectError.from(err).code !== Code.Aborted) opts.onHandlerError(handler.method, err);
      });
  };
}

type Protocol = "connect" | "connect-stream" | "grpc" | "grpc-web" | "other";

function protocolOf(req: UniversalServerRequest): Protocol {
  const type = (req.header.get("content-type") ?? "").toLowerCase();
  if (type.startsWith("application/grpc-web")) return "grpc-web";
  if (type.startsWith("application/grpc")) return "grpc";
  if (type.startsWith("application/connect+")) return "connect-stream";
  if (req.method === "GET" || type.startsWith("application/json") || type.startsWith("application/proto"))
    return "connect";
  return "other";
}

function reached(values: ContextValues): boolean {
  return values.get(REACHED_INTERCEPTORS);
}

async function earlyFailuresAsInvalidArgument(
  req: UniversalServerRequest,
  res: UniversalServerResponse,
  method: DescMethod,
  values: ContextValues,
  onEarlyEnd: (method: DescMethod, code: Code) => void,
): Promise<UniversalServerResponse> {
  const body = res.body;
  if (body === undefined) return res;
  switch (protocolOf(req)) {
    case "connect":
      // A unary answer, complete once the handler resolved (one small chunk in memory).
      if (reached(values) || res.status === 200) return res;
      return connectUnaryError(res, body, method, onEarlyEnd);
    case "grpc":
      return { ...res, body: grpcBody(res, body, method, values, onEarlyEnd) };
    case "grpc-web":
      return { ...res, body: grpcWebBody(body, method, values, onEarlyEnd) };
    default:
      return res;
  }
}

/** Connect unary: the error is a JSON body with an HTTP status; rewrite both. */
async function connectUnaryError(
  res: UniversalServerResponse,
  body: AsyncIterable<Uint8Array>,
  method: DescMethod,
  onEarlyEnd: (m: DescMethod, c: Code) => void,
): Promise<UniversalServerResponse> {
  const chunks: Uint8Array[] = [];
  for await (const c of body) chunks.push(c);
  const bytes = Buffer.concat(chunks);
  const unchanged = { ...res, body: createAsyncIterable([bytes]) };
  if (res.header?.get("content-encoding") || !(res.header?.get("content-type") ?? "").startsWith("application/json"))
    return unchanged;
  let error: ConnectError;
  try {
    error = errorFromJsonBytes(bytes, undefined, new ConnectError("unreadable error", Code.Unknown));
  } catch {
    return unchanged;
  }
  const fixed = undecodableRequest(error.code, error.rawMessage, method);
  onEarlyEnd(method, fixed?.code ?? error.code);
  if (!fixed) return unchanged;
  const out = errorToJsonBytes(fixed, {});
  const header = new Headers(res.header);
  header.set("content-length", String(out.byteLength));
  return { ...res, status: codeToHttpStatus(fixed.code), header, body: createAsyncIterable([out]) };
}

/** gRPC: the status is in the HTTP trailers, known once the body ended. */
function grpcBody(
  res: UniversalServerResponse,
  body: AsyncIterable<Uint8Array>,
  method: DescMethod,
  values: ContextValues,
  onEarlyEnd: (m: DescMethod, c: Code) => void,
): AsyncIterable<Uint8Array> {
  return (async function* () {
    yield* body;
    const trailer = res.trailer;
    if (reached(values) || !trailer) return;
    const status = Number(trailer.get("grpc-status") ?? "0");
    if (status === 0) return;
    const code = status as Code;
    const fixed = undecodableRequest(code, decodeURIComponent(trailer.get("grpc-message") ?? ""), method);
    onEarlyEnd(method, fixed?.code ?? code);
    if (fixed) setTrailerStatus(trailer, fixed);
  })();
}

/** gRPC-Web: the status is in the last frame of the body (flag 0x80, uncompressed when it is ours). */
function grpcWebBody(
  body: AsyncIterable<Uint8Array>,
  method: DescMethod,
  values: ContextValues,
  onEarlyEnd: (m: DescMethod, c: Code) => void,
): AsyncIterable<Uint8Array> {
  return (async function* () {
    for await (const chunk of body) {
      const flags = chunk[0] ?? 0;
      if (reached(values) || chunk.byteLength < 5 || flags !== trailerFlag) {
        yield chunk;
        continue;
      }
      const trailer = trailerParse(chunk.subarray(5));
      const status = Number(trailer.get("grpc-status") ?? "0");
      const fixed =
        status === 0
          ? undefined
          : undecodableRequest(status as Code, decodeURIComponent(trailer.get("grpc-message") ?? ""), method);
      if (status !== 0) onEarlyEnd(method, fixed?.code ?? (status as Code));
      if (!fixed) {
        yield chunk;
        continue;
      }
      yield encodeEnvelope(trailerFlag, trailerSerialize(setTrailerStatus(trailer, fixed)));
    }
  })();
}
