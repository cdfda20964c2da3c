// A server shell: what serves the proxy port on one runtime, around the runtime-neutral request
// path (./request-path.ts). Node.js: node:http and node:http2 with undici upstreams
// (./server.ts); Bun: Bun.serve with fetch (./bun-server.ts). `krane sentinel` takes the shell
// of the runtime it runs on (./sentinel.ts); each shell is loaded only there (Bun replaces
// undici with its own module, which lacks the dispatch API the Node shell streams through).
import type { AddressInfo } from "node:net";
import type { Logger } from "../base/log.js";
import type { EdgeAuth } from "./auth.js";
import type { Balancer } from "./balancer.js";
import type { SentinelSettings } from "./config.js";
import type { SentinelMetrics } from "./metrics.js";
import type { RequestPath } from "./request-path.js";
import type { EdgePolicies } from "./policies.js";
import type { Endpoint } from "./table.js";

export interface ShellOptions {
  readonly path: RequestPath;
  readonly balancer: Balancer;
  readonly metrics: SentinelMetrics;
  readonly log: Logger;
  readonly auth: EdgeAuth;
  readonly policies?: EdgePolicies;
  readonly settings: SentinelSettings;
  readonly hasTable: () => boolean;
}

export interface ProxyShell {
  /** The runtime serving the proxy port ("node" or "bun"), for /status and logs. */
  readonly runtime: string;
  listen(port: number, host: string | undefined): Promise<AddressInfo>;
  /** Endpoints left the table: their upstream connections close once idle. */
  release(endpoints: readonly Endpoint[]): void;
  /** SIGTERM: stop accepting, let in-flight work finish until `deadline` (ms since epoch), close the rest. */
  drain(deadline: number): Promise<void>;
  /** Closes everything at once. */
  close(): Promise<void>;
}

export function runningOnBun(): boolean {
  return typeof process.versions.bun === "string";
}
