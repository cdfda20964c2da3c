// The rollout driver: ctrl's thin I/O shell around the engine. Runs passes for an (environment,
// region) whenever something relevant happens — a deployment created or deleted, scale, pause,
// resume, undo, restart, an instance report — and when a pass asked to be woken (progress
// deadline, minReadySeconds). Passes of one key never interleave (CoalescingQueue), loop while
// they change something (bounded), and a periodic sweep runs the passes whose wake-up time is
// stored in the database, so deadlines survive restarts and are honoured with several replicas.
import type { Logger } from "pino";
import { pino } from "pino";
import type { Store } from "../store/store.js";
import { runPass } from "./pass.js";
import { CoalescingQueue } from "./serial.js";

export interface RolloutDriverOptions {
  logger?: Logger;
  /** Passes per trigger before giving up for a moment (each pass does one step). */
  maxPasses?: number;
  /** How often stored wake-ups are looked for (ms); 0 disables the sweep. */
  sweepIntervalMs?: number;
  /** Called after every pass that ran (tests, metrics). */
  onPass?: (environmentId: string, region: string, changed: boolean) => void;
}

const RETRY_MS = 1000;

export class RolloutDriver {
  private readonly queue = new CoalescingQueue();
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly envOfDeployment = new Map<string, string>();
  private readonly log: Logger;
  private readonly maxPasses: number;
  private readonly sweepTimer: NodeJS.Timeout | null;
  private closed = false;

  constructor(
    private readonly store: Store,
    private readonly options: RolloutDriverOptions = {},
  ) {
    this.log = options.logger ?? pino({ level: "silent" });
    this.maxPasses = options.maxPasses ?? 50;
    const sweepMs = options.sweepIntervalMs ?? 2000;
    this.sweepTimer = sweepMs > 0 ? setInterval(() => void this.sweep(), sweepMs) : null;
    this.sweepTimer?.unref();
  }

  /** Runs passes in every region of the environment; resolves when they are done. */
  async environmentChanged(environmentId: string): Promise<void> {
    const regions = await this.store.db.selectFrom("environment_regions").select("region").where("environment_id", "=", environmentId).execute();
    await Promise.all(regions.map((r) => this.kick(environmentId, r.region)));
  }

  /** An agent reported a deployment's instances in a region. */
  async deploymentReported(region: string, deploymentId: string, k8sName: string): Promise<void> {
    let env = deploymentId === "" ? undefined : this.envOfDeployment.get(deploymentId);
    if (env === undefined) {
      let q = this.store.db.selectFrom("deployments").select(["id", "environment_id"]);
      q = deploymentId !== "" ? q.where("id", "=", deploymentId) : q.where("k8s_name", "=", k8sName);
      const row = await q.executeTakeFirst();
      if (!row) return;
      env = row.environment_id;
      if (this.envOfDeployment.size > 100_000) this.envOfDeployment.clear();
      this.envOfDeployment.set(row.id, env);
    }
    await this.kick(env, region);
  }

  /** Runs passes for one (environment, region) until nothing changes; never rejects. */
  kick(environmentId: string, region: string): Promise<void> {
    if (this.closed) return Promise.resolve();
    const key = `${environmentId}\u0000${region}`;
    return this.queue.run(key, async () => {
      try {
        await this.passes(environmentId, region, key);
      } catch (err) {
        this.log.warn({ environmentId, region, err: err instanceof Error ? err.message : String(err) }, "rollout pass failed; retrying");
        this.wakeAt(key, environmentId, region, Date.now() + RETRY_MS);
      }
    });
  }

  private async passes(environmentId: string, region: string, key: string): Promise<void> {
    for (let n = 0; n < this.maxPasses && !this.closed; n++) {
      const r = await runPass(this.store, environmentId, region);
      if (r.ran) this.options.onPass?.(environmentId, region, r.changed);
      if (!r.changed) {
        if (r.wakeAt !== null) this.wakeAt(key, environmentId, region, r.wakeAt);
        return;
      }
    }
    // Still changing after maxPasses: continue soon rather than hog the event loop.
    this.wakeAt(key, environmentId, region, Date.now() + 50);
  }

  private wakeAt(key: string, environmentId: string, region: string, at: number): void {
    if (this.closed) return;
    const existing = this.timers.get(key);
    if (existing !== undefined && existing.at <= at) return;
    if (existing !== undefined) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      void this.kick(environmentId, region);
    }, Math.max(0, at - Date.now()));
    timer.unref();
    this.timers.set(key, { at, timer });
  }

  /** Runs the passes whose stored wake-up time has come (any replica may have stored it). */
  async sweep(): Promise<void> {
    if (this.closed) return;
    try {
      const due = await this.store.db
        .selectFrom("rollouts")
        .select(["environment_id", "region"])
        .where("requeue_at", "is not", null)
        .where("requeue_at", "<=", Date.now())
        .limit(500)
        .execute();
      // Deployments no pass has seen yet (the process that created one stopped before its pass).
      const unseen = await this.store.db
        .selectFrom("environment_regions as er")
        .innerJoin("environments as e", "e.id", "er.environment_id")
        .leftJoin("rollouts as r", (j) => j.onRef("r.environment_id", "=", "er.environment_id").onRef("r.region", "=", "er.region"))
        .select(["er.environment_id", "er.region"])
        .where("e.last_revision", ">", 0)
        .where((eb) => eb.or([eb("r.environment_id", "is", null), eb("r.target_seen_revision", "<", eb.ref("e.last_revision"))]))
        .limit(500)
        .execute();
      await Promise.all([...due, ...unseen].map((d) => this.kick(d.environment_id, d.region)));
    } catch (err) {
      this.log.warn({ err: err instanceof Error ? err.message : String(err) }, "rollout sweep failed");
    }
  }

  /** Resolves when no pass is running or queued. */
  idle(): Promise<void> {
    return this.queue.idle();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    for (const t of this.timers.values()) clearTimeout(t.timer);
    this.timers.clear();
    await this.queue.idle();
  }
}
