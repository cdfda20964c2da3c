// What the regions' agents decided for their environments' replica counts (table
// autoscale_status): the count, the reason and when, one row per environment and region, kept
// for `krane status`. The count itself is applied by the agent within the policy ctrl streamed to
// it; ctrl records it and, where the region's replica count differs, takes it as the region's
// desired count (environment_regions.replicas, through ./environments.ts), and streams the new
// count with the decision's time back to the agent with the sentinel (./sentinels.ts), which is
// how the agent learns that ctrl took it.
//
// One writer per number: an autoscaled region's count is written only here (a person's scale is
// refused there: ../rollout/actions.ts), each revision's size only by the rollout engine.
import type { Kysely } from "kysely";
import { regionPolicy, type AutoscalePolicy } from "../../contracts/autoscaling.js";
import type { Database, EnvironmentRow } from "../db/schema.js";
import type { WriteTx } from "../db/outbox.js";
import type { Store } from "../db/store.js";
import { failedPrecondition, invalidArgument } from "../errors.js";
import { lockEnvironment, regionAutoscaleOverrides, setRegionReplicas } from "./environments.js";
import { parseStoredPolicy } from "../../contracts/autoscaling.js";
import { refreshSentinel } from "./sentinels.js";

type Reader = Kysely<Database>;

export interface AutoscaleDecision {
  readonly environmentId: string;
  readonly region: string;
  readonly replicas: number;
  readonly reason: string;
  readonly decidedAtMs: number;
  /** When ctrl recorded it (absent on the way in). */
  readonly reportedAtMs?: number;
}

/** Records a region's decision (the newer of two decisions wins; an older one is ignored). */
export async function recordAutoscaleDecision(tx: WriteTx, d: AutoscaleDecision): Promise<boolean> {
  tx.environmentChanged(d.environmentId);
  const row = await tx.trx
    .selectFrom("autoscale_status")
    .select("decided_at")
    .where("environment_id", "=", d.environmentId)
    .where("region", "=", d.region)
    .executeTakeFirst();
  if (row !== undefined && Number(row.decided_at) > d.decidedAtMs) return false;
  const values = {
    replicas: d.replicas,
    reason: d.reason,
    decided_at: d.decidedAtMs,
    reported_at: tx.now,
  };
  if (row === undefined)
    await tx.trx
      .insertInto("autoscale_status")
      .values({ environment_id: d.environmentId, region: d.region, ...values })
      .execute();
  else
    await tx.trx
      .updateTable("autoscale_status")
      .set(values)
      .where("environment_id", "=", d.environmentId)
      .where("region", "=", d.region)
      .execute();
  return true;
}

/** The last decision per region of an environment. */
export async function autoscaleDecisions(db: Reader, environmentId: string): Promise<AutoscaleDecision[]> {
  const rows = await db
    .selectFrom("autoscale_status")
    .selectAll()
    .where("environment_id", "=", environmentId)
    .orderBy("region")
    .execute();
  return rows.map((r) => ({
    environmentId: r.environment_id,
    region: r.region,
    replicas: Number(r.replicas),
    reason: r.reason,
    decidedAtMs: Number(r.decided_at),
    reportedAtMs: Number(r.reported_at),
  }));
}

/** Forgets an environment's decisions (its deletion, or autoscaling switched off). */
export async function forgetAutoscaleDecisions(tx: WriteTx, environmentId: string): Promise<void> {
  await tx.trx.deleteFrom("autoscale_status").where("environment_id", "=", environmentId).execute();
}

/** The policy in force for an environment in a region (null: it does not autoscale there). */
export async function policyInRegion(
  db: Reader,
  environment: Pick<EnvironmentRow, "id" | "autoscale">,
  region: string,
): Promise<AutoscalePolicy | null> {
  return regionPolicy(
    parseStoredPolicy(environment.autoscale),
    await regionAutoscaleOverrides(db, environment.id),
    region,
  );
}

/** How far ahead of ctrl's clock an agent's decision may be dated (clock skew), in ms. */
const FUTURE_SLACK_MS = 5 * 60_000;

export interface TakenDecision {
  /** False: ctrl already holds a newer decision for the region. */
  readonly recorded: boolean;
  /** The region's count afterwards. */
  readonly replicas: number;
  /** True when the region's count changed (the rollout engine must run). */
  readonly changed: boolean;
}

/**
 * A region's agent decided `d.replicas` for the environment: recorded for `krane status` and, when
 * newer than the decision ctrl holds, taken as the region's count. Refused (nothing written) when
 * the environment does not autoscale in the region or the count is outside its policy: a
 * compromised agent can move a region only within the bounds its users set.
 */
export async function takeAutoscaleDecision(store: Store, d: AutoscaleDecision): Promise<TakenDecision> {
  if (d.decidedAtMs > store.clock() + FUTURE_SLACK_MS)
    throw invalidArgument("decided_at_unix_ms", "is in the future by more than 5 minutes (check the agent's clock)");
  return store.write(async (tx) => {
    const environment = await lockEnvironment(tx, d.environmentId, "update");
    if (!environment || environment.deleting_at !== null)
      throw failedPrecondition(`environment ${d.environmentId} does not exist`);
    const region = await tx.trx
      .selectFrom("environment_regions")
      .select("replicas")
      .where("environment_id", "=", environment.id)
      .where("region", "=", d.region)
      .executeTakeFirst();
    if (region === undefined) throw failedPrecondition(`environment ${d.environmentId} is not in region ${d.region}`);
    const policy = await policyInRegion(tx.trx, environment, d.region);
    if (policy === null)
      throw failedPrecondition(`environment ${d.environmentId} does not autoscale in region ${d.region}`);
    const floor = policy.scaleToZero === null ? Math.max(1, policy.minReplicas) : 0;
    if (d.replicas < floor || d.replicas > policy.maxReplicas)
      throw invalidArgument("replicas", `must be within the region's policy (${floor} to ${policy.maxReplicas})`);
    const current = Number(region.replicas);
    if (!(await recordAutoscaleDecision(tx, d))) return { recorded: false, replicas: current, changed: false };
    if (d.replicas === current) return { recorded: true, replicas: current, changed: false };
    await setRegionReplicas(tx, environment.id, d.region, d.replicas);
    // The agent learns from its sentinel's payload that ctrl took the count.
    await refreshSentinel(tx, environment, d.region);
    return { recorded: true, replicas: d.replicas, changed: true };
  });
}
