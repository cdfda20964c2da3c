// What the regions' agents decided for their environments' replica counts (table
// autoscale_status): the count, the reason and when, one row per environment and region, kept
// for `krane status`. The count itself is applied by the agent within the policy ctrl streamed to
// it; ctrl records it and, where the region's replica count differs, takes it as the region's
// desired count (environment_regions.replicas, through ./environments.ts).
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.js";
import type { WriteTx } from "../db/outbox.js";

type Reader = Kysely<Database>;

export interface AutoscaleDecision {
  readonly environmentId: string;
  readonly region: string;
  readonly replicas: number;
  readonly reason: string;
  readonly decidedAtMs: number;
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
  }));
}

/** Forgets an environment's decisions (its deletion, or autoscaling switched off). */
export async function forgetAutoscaleDecisions(tx: WriteTx, environmentId: string): Promise<void> {
  await tx.trx.deleteFrom("autoscale_status").where("environment_id", "=", environmentId).execute();
}
