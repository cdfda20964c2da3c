// A real local cluster for a node:test file: started once in `before`, stopped in `after`.
// If the test process dies, the cluster's reaper stops it anyway.
import { after, before } from "node:test";
import { randomBytes } from "node:crypto";
import { startCluster, type LocalCluster, type StartOptions } from "../../src/cluster/index.js";

export interface ClusterHandle {
  /** The running cluster; valid inside tests (after `before` ran). */
  readonly cluster: LocalCluster;
  /**
   * Resolves with the cluster once started. Node 20 runs a file's top-level `before` hooks
   * concurrently, so a file's own `before` awaits this rather than reading `cluster`.
   */
  ready(): Promise<LocalCluster>;
}

type ClusterOptions = Omit<StartOptions, "name" | "detached">;

/** A cluster for this file; `opts` may be computed first (real nodes: the images are built then). */
export function useCluster(opts: ClusterOptions | (() => Promise<ClusterOptions>) = {}): ClusterHandle {
  let cluster: LocalCluster | undefined;
  let started: Promise<LocalCluster> | undefined;
  const start = (): Promise<LocalCluster> =>
    (started ??= (typeof opts === "function" ? opts() : Promise.resolve(opts))
      .then((o) => startCluster({ ...o, name: `t-${randomBytes(3).toString("hex")}` }))
      .then((c) => (cluster = c)));
  before(() => start().then(() => undefined), { timeout: 15 * 60_000 });
  after(async () => {
    await cluster?.stop();
  });
  return {
    ready: start,
    get cluster(): LocalCluster {
      if (!cluster) throw new Error("the test cluster is not running (used outside a test?)");
      return cluster;
    },
  };
}

/** Polls until `check` returns a value (not undefined), or fails after timeoutMs. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what}${last ? `: ${String(last)}` : ""}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
