// The raw response of a server-streaming call, for writing a watch stream's frames directly.
//
// Connect sends each message of a stream through its own pipeline (serialize, envelope, one
// awaited write), per message and per watcher. A watch stream to binary watchers already holds
// every change as enveloped bytes built once per process (../kinds/wire.ts, streamFrame), so its
// handler writes each batch of them to the response in one write instead, once Connect has sent
// the response headers with the stream's first message. Connect still owns the call: protocol
// negotiation, the interceptors, errors and the end of the stream (gRPC trailers, Connect's
// end-of-stream message); the frames written here are the bytes it would have written for the
// same messages, uncompressed (a per-message flag every protocol allows).
import type * as http from "node:http";
import type * as http2 from "node:http2";
import { createContextKey } from "@connectrpc/connect";

export interface FrameSink {
  /** True once the response headers are out and the response is still open. */
  ready(): boolean;
  /** Writes enveloped frames; false: wait for `drained` before writing more. */
  write(frames: Uint8Array): boolean;
  /** Resolves when the response can take more, or has closed, or `signal` aborted. */
  drained(signal: AbortSignal): Promise<void>;
}

/** Set by the RPC handler (../server/rpc-handler.ts) on every server-streaming call. */
export const FRAME_SINK = createContextKey<FrameSink | undefined>(undefined, {
  description: "krane: the raw response of a streaming call",
});

export function nodeFrameSink(res: http.ServerResponse | http2.Http2ServerResponse): FrameSink {
  const out: { write(chunk: Uint8Array): boolean } = res;
  return {
    ready: () => res.headersSent && !res.writableEnded && !res.destroyed,
    write: (frames) => out.write(frames),
    drained(signal) {
      if (signal.aborted || res.destroyed) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const done = (): void => {
          res.off("drain", done);
          res.off("close", done);
          signal.removeEventListener("abort", done);
          resolve();
        };
        res.on("drain", done);
        res.on("close", done);
        signal.addEventListener("abort", done, { once: true });
      });
    },
  };
}

/** Several frames as one buffer (one write, one HTTP/2 DATA frame when they fit). */
export function joinFrames(frames: readonly Uint8Array[]): Uint8Array {
  if (frames.length === 1 && frames[0]) return frames[0];
  return Buffer.concat(frames);
}
