// Environments: creation with their regions and sentinels (one per region, put into each
// region's desired state), listing, the regions and their replicas, the environment lock, and
// the sentinel's desired state as the environment's settings change. Changing an environment
// after creation is ./environment-update.ts.
import type { Kysely } from "kysely";
import type { WriteTx } from "../db/outbox.js";
import type { Database, EnvironmentRow, ProjectRow, SentinelRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { alreadyExists, failedPrecondition } from "../errors.js";
import { encodeApplySentinel, encodeDeleteSentinel, sentinelKind } from "../kinds/sentinel.js";
import type { NewEnvironment } from "../validate/types.js";
import { newId, sentinelK8sName } from "./ids.js";
import { readLimit, takePage, type Page, type PageQuery } from "./page.js";
import { findProject, type EnvironmentContext } from "./tenancy.js";

type Reader = Kysely<Database>;

export async function createEnvironment(store: Store, input: NewEnvironment): Promise<EnvironmentContext> {
  try {
    return await store.write(async (tx) => {
      const { workspace, project } = await findProject(tx.trx, input.workspace, input.project);
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
        created_at: tx.now,
        updated_at: tx.now,
        routing_mode: "instances",
        routing_weights: "[]",
        routing_version: 1,
        deleting_at: null,
        progressive: input.rollout.progressive === null ? null : JSON.stringify(input.rollout.progressive),
        routing_regions: null,
      };
      await tx.trx.insertInto("environments").values(environment).execute();
      if (input.regions.length > 0) {
        await tx.trx
          .insertInto("environment_regions")
          .values(
            input.regions.map((r) => ({ environment_id: environment.id, region: r.region, replicas: r.replicas })),
          )
          .execute();
      }
      if (s) {
        for (const region of regionNames) await createSentinel(tx, project, environment, region);
      }
      return { workspace, project, environment };
    });
  } catch (err) {
    if (store.isUniqueViolation(err)) throw alreadyExists(`environment "${input.slug}"`);
    throw err;
  }
}

/** Creates the environment's sentinel in a region and makes it desired there. */
export async function createSentinel(
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

/** Re-renders a sentinel's desired state from the environment's (changed) settings. */
export async function putSentinel(tx: WriteTx, environment: EnvironmentRow, sentinel: SentinelRow): Promise<void> {
  await tx.putDesired(
    sentinel.region,
    sentinelKind.name,
    sentinel.id,
    encodeApplySentinel(environment, sentinel),
    null,
    environment.id,
  );
}

/** Removes a sentinel: its region's agent is told to delete it, and its record goes. */
export async function dropSentinel(tx: WriteTx, sentinel: SentinelRow): Promise<void> {
  await tx.removeDesired(sentinel.region, sentinelKind.name, sentinel.id, encodeDeleteSentinel(sentinel));
  await tx.trx.deleteFrom("sentinels").where("id", "=", sentinel.id).execute();
}

/** By slug; a page's key is the slug of its last environment. */
export async function listEnvironments(
  db: Reader,
  workspaceRef: string,
  projectRef: string,
  page?: PageQuery<string>,
): Promise<Page<EnvironmentContext>> {
  const { workspace, project } = await findProject(db, workspaceRef, projectRef);
  let q = db.selectFrom("environments").selectAll().where("project_id", "=", project.id);
  if (page?.after !== undefined) q = q.where("slug", ">", page.after);
  const limit = readLimit(page);
  if (limit !== undefined) q = q.limit(limit);
  const rows = await q.orderBy("slug").execute();
  return takePage(
    rows.map((environment) => ({ workspace, project, environment })),
    page,
  );
}

/** The regions of several environments, by environment id (each list by region). */
export async function regionsOfEnvironments(
  db: Reader,
  environmentIds: readonly string[],
): Promise<Map<string, { region: string; replicas: number }[]>> {
  const out = new Map<string, { region: string; replicas: number }[]>(environmentIds.map((id) => [id, []]));
  if (environmentIds.length === 0) return out;
  const rows = await db
    .selectFrom("environment_regions")
    .select(["environment_id", "region", "replicas"])
    .where("environment_id", "in", [...environmentIds])
    .orderBy("environment_id")
    .orderBy("region")
    .execute();
  for (const r of rows) out.get(r.environment_id)?.push({ region: r.region, replicas: r.replicas });
  return out;
}

export async function environmentRegions(
  db: Reader,
  environmentId: string,
): Promise<{ region: string; replicas: number }[]> {
  return db
    .selectFrom("environment_regions")
    .select(["region", "replicas"])
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
