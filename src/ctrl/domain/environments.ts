// Environments (tables environments and environment_regions): creation with their regions and
// sentinels, the regions and their replicas, the row's columns other writes change (the revision
// counter, pause, the edge auth section, the routing, the settings of an update, a deletion's
// mark), and the environment lock. Every change of what an environment's sentinels render from
// goes through `saveEnvironment`, which re-renders them (./sentinels.ts); a routing change also
// gets a new routing version, which sentinels report back as served. The update of an
// environment as a whole (settings, policy, regions) is ./environment-update.ts. A region's own
// autoscaling policy lives on its environment_regions row.
import type { Kysely } from "kysely";
import { formatPolicy, parseStoredPolicy, type AutoscalePolicy } from "../../contracts/autoscaling.js";
import type { WriteTx } from "../db/outbox.js";
import type { Database, EnvironmentRow, ProjectRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { alreadyExists, failedPrecondition } from "../errors.js";
import { formatRegionRouting, regionRoutingOf, sameRegionRouting, type RegionRouting } from "../payloads/sentinel.js";
import type { NewEnvironment } from "../validate/types.js";
import { newId } from "./ids.js";
import { withinQuota } from "./quotas.js";
import { syncSentinels } from "./sentinels.js";
import { findProject, type EnvironmentContext } from "./tenancy.js";

type Reader = Kysely<Database>;

export async function createEnvironment(store: Store, input: NewEnvironment): Promise<EnvironmentContext> {
  try {
    return await store.write(async (tx) => {
      const { workspace, project } = await findProject(tx.trx, input.workspace, input.project);
      const environment = await withinQuota(tx, workspace.id, () =>
        insertEnvironment(tx, { workspace, project }, input),
      );
      return { workspace, project, environment };
    });
  } catch (err) {
    if (store.isUniqueViolation(err)) throw alreadyExists(`environment "${input.slug}"`);
    throw err;
  }
}

/**
 * Adds an environment to a project inside the caller's transaction (its regions, which must be
 * registered, and its sentinels). A taken slug fails the transaction with a unique violation.
 */
export async function insertEnvironment(
  tx: WriteTx,
  parent: Pick<EnvironmentContext, "workspace" | "project">,
  input: Omit<NewEnvironment, "workspace" | "project">,
): Promise<EnvironmentRow> {
  const { workspace, project } = parent;
  const regionNames = input.regions.map((r) => r.region);
  if (regionNames.length > 0) {
    const known = await tx.trx.selectFrom("regions").select("name").where("name", "in", regionNames).execute();
    const knownSet = new Set(known.map((r) => r.name));
    const missing = regionNames.filter((r) => !knownSet.has(r));
    if (missing.length > 0) {
      throw failedPrecondition(
        `region "${missing[0]}" is not registered (create it with \`krane region create ${missing[0]}\`)`,
      );
    }
  }
  const s = input.sentinel;
  const environment: EnvironmentRow = {
    id: newId("env"),
    workspace_id: workspace.id,
    project_id: project.id,
    slug: input.slug,
    sentinel_image: s ? s.image : null,
    sentinel_replicas: s ? s.replicas : 0,
    sentinel_cpu_millicores: s ? s.cpuMillicores : 0,
    sentinel_memory_mib: s ? s.memoryMib : 0,
    strategy: input.rollout.strategy,
    max_surge: input.rollout.maxSurge,
    max_unavailable: input.rollout.maxUnavailable,
    min_ready_seconds: input.rollout.minReadySeconds,
    progress_deadline_seconds: input.rollout.progressDeadlineSeconds,
    revision_history_limit: input.rollout.revisionHistoryLimit,
    paused: input.rollout.paused ? 1 : 0,
    last_revision: 0,
    edge_auth: null,
    edge_policies: null,
    edge_api_keys: null,
    created_at: tx.now,
    updated_at: tx.now,
    routing_version: 1,
    deleting_at: null,
    progressive: input.rollout.progressive === null ? null : JSON.stringify(input.rollout.progressive),
    routing_regions: null,
    autoscale: formatPolicy(input.autoscale ?? null),
    warm_window_seconds: input.rollout.warmWindowSeconds,
    pinned_deployment_id: null,
  };
  await tx.trx.insertInto("environments").values(environment).execute();
  tx.environmentChanged(environment.id);
  if (input.regions.length > 0) {
    await tx.trx
      .insertInto("environment_regions")
      .values(input.regions.map((r) => ({ environment_id: environment.id, region: r.region, replicas: r.replicas })))
      .execute();
  }
  await syncSentinels(tx, project, null, environment);
  return environment;
}

export async function environmentRegions(
  db: Reader,
  environmentId: string,
): Promise<{ region: string; replicas: number; autoscale: string | null }[]> {
  return db
    .selectFrom("environment_regions")
    .select(["region", "replicas", "autoscale"])
    .where("environment_id", "=", environmentId)
    .orderBy("region")
    .execute();
}

/**
 * Reads an environment row locked for the rest of the transaction (PostgreSQL; SQLite runs one
 * write transaction at a time anyway). Rollout passes take it shared, so passes of several
 * regions run side by side; whatever changes what a pass reads (its settings, regions or
 * revisions) takes it exclusively, so it waits for passes in flight and passes that start after
 * it see its commit. Undefined when the environment does not exist.
 */
export async function lockEnvironment(
  tx: WriteTx,
  id: string,
  mode: "share" | "update",
): Promise<EnvironmentRow | undefined> {
  return tx.dialect
    .lockRows(tx.trx.selectFrom("environments").selectAll().where("id", "=", id), mode)
    .executeTakeFirst();
}

/** Adds a region to the environment at `replicas` (its rollout record is ./rollouts.ts's). */
export async function addRegion(tx: WriteTx, environmentId: string, region: string, replicas: number): Promise<void> {
  tx.environmentChanged(environmentId);
  await tx.trx.insertInto("environment_regions").values({ environment_id: environmentId, region, replicas }).execute();
}

/** Takes a region out of the environment's regions. */
export async function removeRegion(tx: WriteTx, environmentId: string, region: string): Promise<void> {
  tx.environmentChanged(environmentId);
  await tx.trx
    .deleteFrom("environment_regions")
    .where("environment_id", "=", environmentId)
    .where("region", "=", region)
    .execute();
}

/** Takes the environment out of every region (a deletion: no rollout pass runs for it again). */
export async function leaveAllRegions(tx: WriteTx, environmentId: string): Promise<void> {
  tx.environmentChanged(environmentId);
  await tx.trx.deleteFrom("environment_regions").where("environment_id", "=", environmentId).execute();
}

/**
 * Sets the replicas the environment runs in one region (null: every region); returns how many
 * regions changed. The rollout driver acts on it after the commit.
 */
export async function setRegionReplicas(
  tx: WriteTx,
  environmentId: string,
  region: string | null,
  replicas: number,
): Promise<number> {
  tx.environmentChanged(environmentId);
  let q = tx.trx.updateTable("environment_regions").set({ replicas }).where("environment_id", "=", environmentId);
  if (region !== null) q = q.where("region", "=", region);
  const res = await q.executeTakeFirst();
  return Number(res.numUpdatedRows);
}

/**
 * The next revision number of the environment. Bumping last_revision locks the environment row,
 * so concurrent deploys of one environment get distinct, ordered revisions.
 */
export async function nextRevision(tx: WriteTx, environmentId: string): Promise<number> {
  tx.environmentChanged(environmentId);
  const bumped = await tx.trx
    .updateTable("environments")
    .set((eb) => ({ last_revision: eb("last_revision", "+", 1), updated_at: tx.now }))
    .where("id", "=", environmentId)
    .returning("last_revision")
    .executeTakeFirstOrThrow();
  return Number(bumped.last_revision);
}

/**
 * The regions with an autoscaling policy of their own: the policy, or null where autoscaling is
 * off in that region whatever the environment's policy.
 */
export async function regionAutoscaleOverrides(
  db: Reader,
  environmentId: string,
): Promise<Map<string, AutoscalePolicy | null>> {
  const rows = await db
    .selectFrom("environment_regions")
    .select(["region", "autoscale"])
    .where("environment_id", "=", environmentId)
    .where("autoscale", "is not", null)
    .execute();
  return new Map(rows.map((r) => [r.region, r.autoscale === "off" ? null : parseStoredPolicy(r.autoscale)]));
}

/** Sets a region's own autoscaling policy (JSON), "off", or null to follow the environment's. */
export async function setRegionAutoscale(
  tx: WriteTx,
  environmentId: string,
  region: string,
  autoscale: string | null,
): Promise<void> {
  await tx.trx
    .updateTable("environment_regions")
    .set({ autoscale })
    .where("environment_id", "=", environmentId)
    .where("region", "=", region)
    .execute();
}

/** Marks the environment changed now (its spec changed somewhere else, e.g. its regions' replicas). */
export async function touchEnvironment(tx: WriteTx, environmentId: string): Promise<void> {
  tx.environmentChanged(environmentId);
  await tx.trx.updateTable("environments").set({ updated_at: tx.now }).where("id", "=", environmentId).execute();
}

/** Pauses or resumes the environment's rolling updates. */
export async function setPaused(tx: WriteTx, environmentId: string, paused: boolean): Promise<void> {
  tx.environmentChanged(environmentId);
  await tx.trx
    .updateTable("environments")
    .set({ paused: paused ? 1 : 0, updated_at: tx.now })
    .where("id", "=", environmentId)
    .execute();
}

/**
 * Pins every region of the environment to one revision (`krane rollback`), or lifts the pin (null):
 * the rollout driver targets the pinned revision whatever is deployed after it (../rollout/pass.ts).
 */
export async function setPinned(tx: WriteTx, environmentId: string, deploymentId: string | null): Promise<void> {
  tx.environmentChanged(environmentId);
  await tx.trx
    .updateTable("environments")
    .set({ pinned_deployment_id: deploymentId, updated_at: tx.now })
    .where("id", "=", environmentId)
    .execute();
}

/** Marks the environment as being deleted (the API refuses changes to it from then on). */
export async function markEnvironmentDeleting(tx: WriteTx, environmentId: string, at: number): Promise<void> {
  tx.environmentChanged(environmentId);
  await tx.trx.updateTable("environments").set({ deleting_at: at }).where("id", "=", environmentId).execute();
}

/** Deletes the environment's rows (the end of its deletion: everything it owned is gone). */
export async function purgeEnvironmentRow(tx: WriteTx, environmentId: string): Promise<void> {
  tx.environmentChanged(environmentId);
  await leaveAllRegions(tx, environmentId);
  await tx.trx.deleteFrom("environments").where("id", "=", environmentId).execute();
}

/** The settings an environment update may change (sentinel and rollout policy). */
export const ENVIRONMENT_SETTINGS = [
  "sentinel_image",
  "sentinel_replicas",
  "sentinel_cpu_millicores",
  "sentinel_memory_mib",
  "strategy",
  "max_surge",
  "max_unavailable",
  "min_ready_seconds",
  "progress_deadline_seconds",
  "revision_history_limit",
  "paused",
  "progressive",
  "autoscale",
  "warm_window_seconds",
] as const satisfies readonly (keyof EnvironmentRow)[];

/** The columns saveEnvironment stores: the settings, and what exposure and rollouts change. */
const SAVED = [
  ...ENVIRONMENT_SETTINGS,
  "edge_auth",
  "edge_policies",
  "edge_api_keys",
  "routing_regions",
  "routing_version",
  "updated_at",
] as const satisfies readonly (keyof EnvironmentRow)[];

/**
 * Stores the environment's changed columns (of SAVED) in the caller's transaction, and makes its
 * sentinels follow (created, dropped, re-rendered: ./sentinels.ts). A routing, an edge policy
 * list or an API key list that differs from the stored one gets the next routing version. Returns the row as stored.
 */
export async function saveEnvironment(
  tx: WriteTx,
  project: ProjectRow,
  before: EnvironmentRow,
  after: EnvironmentRow,
): Promise<EnvironmentRow> {
  tx.environmentChanged(before.id);
  const stored: EnvironmentRow =
    after.routing_regions !== before.routing_regions ||
    after.edge_policies !== before.edge_policies ||
    after.edge_api_keys !== before.edge_api_keys
      ? { ...after, routing_version: Number(before.routing_version) + 1 }
      : { ...after, routing_version: before.routing_version };
  const patch: Partial<Record<(typeof SAVED)[number], unknown>> = {};
  for (const k of SAVED) if (stored[k] !== before[k]) patch[k] = stored[k];
  if (Object.keys(patch).length > 0)
    await tx.trx
      .updateTable("environments")
      .set(patch as Partial<EnvironmentRow>)
      .where("id", "=", before.id)
      .execute();
  await syncSentinels(tx, project, before, stored);
  return stored;
}

/**
 * Replaces the environment's routing: a new routing version, and every sentinel re-rendered to
 * serve it. Returns null when the routing is the one stored (nothing written).
 */
export async function setRouting(
  tx: WriteTx,
  project: ProjectRow,
  environment: EnvironmentRow,
  routing: ReadonlyMap<string, RegionRouting>,
): Promise<EnvironmentRow | null> {
  if (sameRegionRouting(routing, regionRoutingOf(environment))) return null;
  return saveEnvironment(tx, project, environment, { ...environment, routing_regions: formatRegionRouting(routing) });
}

/** Sets the edge auth section the environment's sentinels enforce (JSON, null: none); no-op when equal. */
export async function setEdgeAuth(
  tx: WriteTx,
  project: ProjectRow,
  environment: EnvironmentRow,
  edgeAuth: string | null,
): Promise<EnvironmentRow> {
  if (edgeAuth === environment.edge_auth) return environment;
  return saveEnvironment(tx, project, environment, { ...environment, edge_auth: edgeAuth });
}
