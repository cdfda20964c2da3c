// Sentinels (table sentinels): an environment's routing proxy, one per region it is in while it
// has sentinel settings. `syncSentinels` is the one rule that keeps them so: whenever the
// environment's row or regions change, it creates the missing ones, drops those of regions left
// (or all of them when the settings went), and re-renders every other one whose payload changed
// (sentinel settings, routing, edge auth, autoscaling policy: each sentinel's desired state is
// rendered from the environment's row and its region's). Reports of a sentinel's health, address and the routing version it serves
// are recorded here too.
import type { Kysely } from "kysely";
import { parseStoredPolicy, type AutoscalePolicy } from "../../contracts/autoscaling.js";
import type { WriteTx } from "../db/outbox.js";
import type { Database, EnvironmentRow, ProjectRow, SentinelRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { DomainError, notFound } from "../errors.js";
import { encodeApplySentinel, encodeDeleteSentinel, sentinelPayloads } from "../payloads/sentinel.js";
import { newId, sentinelK8sName } from "./ids.js";

type Reader = Kysely<Database>;

/** The environment columns a sentinel's payload is rendered from. */
const RENDERED_FROM = [
  "sentinel_image",
  "sentinel_replicas",
  "sentinel_cpu_millicores",
  "sentinel_memory_mib",
  "routing_regions",
  "routing_version",
  "edge_auth",
  "autoscale",
] as const satisfies readonly (keyof EnvironmentRow)[];

/** A region's own autoscaling policy (null: off there), undefined when it follows the environment's. */
async function regionAutoscale(
  db: Reader,
  environmentId: string,
  region: string,
): Promise<AutoscalePolicy | null | undefined> {
  const row = await db
    .selectFrom("environment_regions")
    .select("autoscale")
    .where("environment_id", "=", environmentId)
    .where("region", "=", region)
    .executeTakeFirst();
  if (row === undefined || row.autoscale === null) return undefined;
  return row.autoscale === "off" ? null : parseStoredPolicy(row.autoscale);
}

/** Writes the sentinel's desired state, rendered from the environment and its region. */
async function putSentinel(tx: WriteTx, environment: EnvironmentRow, sentinel: SentinelRow): Promise<void> {
  await tx.putDesired(
    sentinel.region,
    sentinelPayloads.name,
    sentinel.id,
    encodeApplySentinel(environment, sentinel, await regionAutoscale(tx.trx, environment.id, sentinel.region)),
    null,
    environment.id,
  );
}

async function createSentinel(
  tx: WriteTx,
  project: ProjectRow,
  environment: EnvironmentRow,
  region: string,
): Promise<void> {
  const sentinel: SentinelRow = {
    id: newId("snt"),
    workspace_id: environment.workspace_id,
    project_id: project.id,
    environment_id: environment.id,
    region,
    k8s_name: sentinelK8sName(project.slug, environment.slug),
    health: "unknown",
    available_replicas: 0,
    rejected_reason: null,
    address: null,
    served_routing_version: null,
    reported_at: null,
  };
  await tx.trx.insertInto("sentinels").values(sentinel).execute();
  await putSentinel(tx, environment, sentinel);
}

/** Removes a sentinel: its region's agent is told to delete it, and its record goes. */
async function dropSentinel(tx: WriteTx, sentinel: SentinelRow): Promise<void> {
  await tx.removeDesired(sentinel.region, sentinelPayloads.name, sentinel.id, encodeDeleteSentinel(sentinel));
  await tx.trx.deleteFrom("sentinels").where("id", "=", sentinel.id).execute();
}

/**
 * Makes the environment's sentinels follow it, in the caller's transaction: one per region of the
 * environment while it has sentinel settings (created where missing, dropped from regions it
 * left), none without; the others re-rendered when `before` (null: unknown) differs from `after`
 * in what their payload is rendered from. An environment being deleted is left alone: its
 * deletion removes its sentinels.
 */
export async function syncSentinels(
  tx: WriteTx,
  project: ProjectRow,
  before: EnvironmentRow | null,
  after: EnvironmentRow,
): Promise<void> {
  tx.environmentChanged(after.id);
  if (after.deleting_at !== null) return;
  const sentinels = await sentinelsOf(tx.trx, after.id);
  const regions =
    after.sentinel_image === null
      ? new Set<string>()
      : new Set(
          (
            await tx.trx
              .selectFrom("environment_regions")
              .select("region")
              .where("environment_id", "=", after.id)
              .orderBy("region")
              .execute()
          ).map((r) => r.region),
        );
  const changed = before === null || RENDERED_FROM.some((k) => before[k] !== after[k]);
  for (const s of sentinels) {
    if (!regions.has(s.region)) await dropSentinel(tx, s);
    else if (changed) await putSentinel(tx, after, s);
  }
  for (const region of regions)
    if (!sentinels.some((s) => s.region === region)) await createSentinel(tx, project, after, region);
}

/** An environment's sentinels, by region. */
export async function sentinelsOf(db: Reader, environmentId: string): Promise<SentinelRow[]> {
  return db.selectFrom("sentinels").selectAll().where("environment_id", "=", environmentId).orderBy("region").execute();
}

/** Deletes an environment's sentinel records (its deletion, once nothing is desired). */
export async function purgeSentinels(tx: WriteTx, environmentId: string): Promise<void> {
  await tx.trx.deleteFrom("sentinels").where("environment_id", "=", environmentId).execute();
}

// ---------------------------------------------------------------- reports

export type HealthName = "unknown" | "healthy" | "unhealthy" | "paused";

/** A validated report of a sentinel (../kinds/sentinel.ts). `id` may be empty: the agent then names it by `k8sName`. */
export type SentinelReport =
  | {
      type: "update";
      id: string;
      k8sName: string;
      availableReplicas: number;
      health: HealthName;
      address: string;
      routingVersion: number;
    }
  | { type: "delete"; id: string; k8sName: string }
  | { type: "rejected"; id: string; k8sName: string; reason: string };

export async function recordSentinelReport(store: Store, region: string, report: SentinelReport): Promise<void> {
  await store.write(async (tx) => {
    const q = tx.trx.selectFrom("sentinels").selectAll();
    const s = await (
      report.id !== "" ? q.where("id", "=", report.id) : q.where("k8s_name", "=", report.k8sName)
    ).executeTakeFirst();
    if (!s) {
      if (report.type === "delete") return;
      throw notFound(`sentinel "${report.id || report.k8sName}"`);
    }
    if (s.region !== region) throw new DomainError("permission_denied", `sentinel ${s.id} belongs to another region`);
    tx.environmentChanged(s.environment_id);
    const patch =
      report.type === "update"
        ? {
            health: report.health,
            available_replicas: report.availableReplicas,
            rejected_reason: null,
            reported_at: tx.now,
            address: report.address === "" ? null : report.address,
            served_routing_version: report.routingVersion === 0 ? null : report.routingVersion,
          }
        : report.type === "delete"
          ? { health: "unknown", available_replicas: 0, reported_at: tx.now }
          : { rejected_reason: report.reason, reported_at: tx.now };
    await tx.trx.updateTable("sentinels").set(patch).where("id", "=", s.id).execute();
  });
}
