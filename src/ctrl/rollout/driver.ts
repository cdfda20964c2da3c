// The rollout driver: ctrl's thin I/O shell around the engine, a reconciler on src/retry's
// WorkQueue. Its keys are (environment, region); whenever something relevant happens — a
// deployment created or deleted, scale, pause, resume, undo, restart, an environment update, an
// instance report — the key is added, and reconcile(key) runs passes (./pass.ts) until one
// changes nothing (bounded by maxPasses), then answers:
//   - done, or requeue after the pass's wake time (progress deadline, minReadySeconds, a
//     scale-up held for a scale-down report), or after 50 ms when still changing;
//   - retry (a thrown error): the key's own full-jitter backoff (PASS_RETRY), reset by success.
// The queue runs one reconcile per key at a time and coalesces adds while one waits; the API
// handlers wait for "their" run with addAndWait. A periodic sweep adds the keys whose wake time
// is stored in the database, so deadlines survive restarts and are honoured with several ctrl
// replicas, and the keys with a deployment no pass has seen yet.
import type { Logger } from "pino";
import { pino } from "pino";
import type { BackoffPolicy } from "../../retry/backoff.js";
import type { Runnable } from "../../base/lifecycle.js";
import { DueWork } from "../../retry/due.js";
import { Result } from "../../retry/queue.js";
import type { KindName } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { deploymentPayloads } from "../payloads/deployment.js";
import { runPass, type PassResult } from "./pass.js";
import { runProgressivePass, type ProgressiveOptions } from "./progressive.js";

/** Backoff of an (environment, region) whose pass failed. */
export const PASS_RETRY: BackoffPolicy = { baseMs: 500, capMs: 10_000, minMs: 100 };

/** How soon a key whose passes were still changing after maxPasses runs again. */
const CONTINUE_MS = 50;

/** What the driver reads and runs; the store's in production (storeRolloutSource), fakes in unit tests. */
export interface RolloutSource {
  runPass(environmentId: string, region: string): Promise<PassResult>;
  regionsOf(environmentId: string): Promise<string[]>;
  /** The deployment a report names (by id, else by Kubernetes name) and its environment. */
  deploymentOf(deploymentId: string, k8sName: string): Promise<{ id: string; environmentId: string } | undefined>;
  /** Keys whose stored wake-up time has come, and keys with a deployment no pass has seen yet. */
  due(now: number, limit: number): Promise<{ environmentId: string; region: string }[]>;
}

/**
 * The store's source. An environment with a progressive strategy (canary, blue-green, waves) runs
 * the progressive engine's decision (./progressive.ts) instead of the rolling pass.
 */
export function storeRolloutSource(store: Store, progressive: ProgressiveOptions = {}): RolloutSource {
  return {
    async runPass(environmentId, region) {
      const env = await store.db
        .selectFrom("environments")
        .select("progressive")
        .where("id", "=", environmentId)
        .executeTakeFirst();
      if (env?.progressive !== null && env?.progressive !== undefined)
        return runProgressivePass(store, environmentId, progressive);
      return runPass(store, environmentId, region);
    },
    async regionsOf(environmentId) {
      const rows = await store.db
        .selectFrom("environment_regions")
        .select("region")
        .where("environment_id", "=", environmentId)
        .execute();
      return rows.map((r) => r.region);
    },
    async deploymentOf(deploymentId, k8sName) {
      let q = store.db.selectFrom("deployments").select(["id", "environment_id"]);
      q = deploymentId !== "" ? q.where("id", "=", deploymentId) : q.where("k8s_name", "=", k8sName);
      const row = await q.executeTakeFirst();
      return row && { id: row.id, environmentId: row.environment_id };
    },
    async due(now, limit) {
      const due = await store.db
        .selectFrom("rollouts")
        .select(["environment_id", "region"])
        .where("requeue_at", "is not", null)
        .where("requeue_at", "<=", now)
        .limit(limit)
        .execute();
      // Deployments no pass has seen yet (the process that created one stopped before its pass).
      const unseen = await store.db
        .selectFrom("environment_regions as er")
        .innerJoin("environments as e", "e.id", "er.environment_id")
        .leftJoin("rollouts as r", (j) =>
          j.onRef("r.environment_id", "=", "er.environment_id").onRef("r.region", "=", "er.region"),
        )
        .select(["er.environment_id", "er.region"])
        .where("e.last_revision", ">", 0)
        .where((eb) =>
          eb.or([eb("r.environment_id", "is", null), eb("r.target_seen_revision", "<", eb.ref("e.last_revision"))]),
        )
        .limit(limit)
        .execute();
      return [...due, ...unseen].map((d) => ({ environmentId: d.environment_id, region: d.region }));
    },
  };
}

export interface RolloutDriverOptions {
  logger?: Logger;
  /** Passes per run before letting other keys go first (each pass does one step). */
  maxPasses?: number;
  /** How often stored wake-ups are looked for (ms); 0 disables the sweep. */
  sweepIntervalMs?: number;
  /** Keys reconciled at the same time. */
  concurrency?: number;
  /** Backoff after a failed pass (default PASS_RETRY). */
  retry?: BackoffPolicy;
  /** Called after every pass that ran (tests, metrics). */
  onPass?: (environmentId: string, region: string, changed: boolean) => void;
  /**
   * Where a failed sweep goes (default: a warning per sweep). ctrl's server routes it through its
   * outage classification, so a database outage is logged once, not every sweep interval.
   */
  onSweepError?: (err: unknown) => void;
}

const SEP = "\u0000";

function keyOf(environmentId: string, region: string): string {
  return `${environmentId}${SEP}${region}`;
}

function parseKey(key: string): [environmentId: string, region: string] {
  const i = key.indexOf(SEP);
  return [key.slice(0, i), key.slice(i + 1)];
}

export class RolloutDriver implements Runnable {
  readonly name = "rollouts";
  private readonly work: DueWork;
  private readonly envOfDeployment = new Map<string, string>();
  private readonly log: Logger;
  private readonly maxPasses: number;

  constructor(
    private readonly source: RolloutSource,
    private readonly options: RolloutDriverOptions = {},
  ) {
    this.log = options.logger ?? pino({ level: "silent" });
    this.maxPasses = options.maxPasses ?? 50;
    this.work = new DueWork({
      name: this.name,
      due: async (limit) => (await source.due(Date.now(), limit)).map((d) => keyOf(d.environmentId, d.region)),
      reconcile: (key, signal) => this.reconcile(key, signal),
      sweepIntervalMs: options.sweepIntervalMs ?? 2000,
      sweepLimit: 500,
      // Callers of sweep() (tests, a replica's catch-up) see the passes it caused done.
      sweepWaitsForRuns: true,
      concurrency: options.concurrency ?? 16,
      retry: options.retry ?? PASS_RETRY,
      onSweepError: (err) => {
        if (options.onSweepError) options.onSweepError(err);
        else this.log.warn({ err: err instanceof Error ? err.message : String(err) }, "rollout sweep failed");
      },
      onResult: (key, result) => {
        if (result.type !== "retry") return;
        const [environmentId, region] = parseKey(key);
        const err = result.error instanceof Error ? result.error.message : String(result.error);
        this.log.warn({ environmentId, region, err }, "rollout pass failed; retrying with backoff");
      },
    });
  }

  /** Schedules the sweep of stored wake-ups. */
  start(): void {
    this.work.start();
  }

  /** Runs passes until one changes nothing; the answer says when to look again. */
  private async reconcile(key: string, signal: AbortSignal): Promise<Result> {
    const [environmentId, region] = parseKey(key);
    for (let n = 0; n < this.maxPasses; n++) {
      if (signal.aborted) return Result.done;
      const r = await this.source.runPass(environmentId, region);
      if (r.ran) this.options.onPass?.(environmentId, region, r.changed);
      if (!r.changed) return r.wakeAt === null ? Result.done : Result.requeueAfter(r.wakeAt - Date.now());
    }
    // Still changing after maxPasses: continue soon rather than hog the event loop.
    return Result.requeueAfter(CONTINUE_MS);
  }

  /** Runs passes in every region of the environment; resolves when they are done. */
  async environmentChanged(environmentId: string): Promise<void> {
    const regions = await this.source.regionsOf(environmentId);
    await Promise.all(regions.map((region) => this.kick(environmentId, region)));
  }

  /** An agent reported a deployment's instances in a region. */
  async deploymentReported(region: string, deploymentId: string, k8sName: string): Promise<void> {
    let env = deploymentId === "" ? undefined : this.envOfDeployment.get(deploymentId);
    if (env === undefined) {
      const d = await this.source.deploymentOf(deploymentId, k8sName);
      if (!d) return;
      env = d.environmentId;
      if (this.envOfDeployment.size > 100_000) this.envOfDeployment.clear();
      this.envOfDeployment.set(d.id, env);
    }
    await this.kick(env, region);
  }

  /** ClusterService's report listener: deployment reports may move a rollout. Never rejects. */
  reported(kind: KindName, region: string, subject: { id: string; k8sName: string }): void {
    if (kind !== deploymentPayloads.name) return;
    this.deploymentReported(region, subject.id, subject.k8sName).catch((err: unknown) => {
      this.log.warn(
        { region, err: err instanceof Error ? err.message : String(err) },
        "could not find the reported deployment's environment",
      );
    });
  }

  /** Runs passes for one (environment, region) until nothing changes; resolves after that run. Never rejects. */
  kick(environmentId: string, region: string): Promise<void> {
    return this.work.addAndWait(keyOf(environmentId, region));
  }

  /** Adds the keys whose stored wake-up time has come (any replica may have stored it). */
  sweep(): Promise<void> {
    return this.work.sweep();
  }

  /** Resolves when no key is queued, running or waiting for a retry. */
  idle(): Promise<void> {
    return this.work.idle();
  }

  /** Stops the sweep and the queue; waits for passes in flight. */
  stop(): Promise<void> {
    return this.work.stop();
  }
}
