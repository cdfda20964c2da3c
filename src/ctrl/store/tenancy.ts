// Workspaces, projects and environments: creation and lookup by slug or id. Creating an
// environment also creates its sentinels (one per region) and puts them in the regions' outboxes.
// Changing an environment afterwards is environment-update.ts.
import type { Kysely } from "kysely";
import { alreadyExists, failedPrecondition, notFound } from "../errors.js";
import { newId, sentinelK8sName, workspaceNamespace } from "./ids.js";
import type { WriteTx } from "./outbox.js";
import { encodeApplySentinel, encodeDeleteSentinel, renderApplySentinel } from "./render.js";
import type { Database, EnvironmentRow, ProjectRow, SentinelRow, WorkspaceRow } from "./schema.js";
import { isUniqueViolation, type Store } from "./store.js";
import type { EnvironmentRef, NewEnvironment, NewProject, NewWorkspace } from "./types.js";

type Reader = Kysely<Database>;

export async function findWorkspace(db: Reader, ref: string): Promise<WorkspaceRow> {
  const row = await db
    .selectFrom("workspaces")
    .selectAll()
    .where(ref.startsWith("ws_") ? "id" : "slug", "=", ref)
    .executeTakeFirst();
  if (!row) throw notFound(`workspace "${ref}"`);
  return row;
}

export async function findProject(db: Reader, workspaceRef: string, ref: string): Promise<{ workspace: WorkspaceRow; project: ProjectRow }> {
  const workspace = await findWorkspace(db, workspaceRef);
  const project = await db
    .selectFrom("projects")
    .selectAll()
    .where("workspace_id", "=", workspace.id)
    .where(ref.startsWith("prj_") ? "id" : "slug", "=", ref)
    .executeTakeFirst();
  if (!project) throw notFound(`project "${ref}" in workspace "${workspace.slug}"`);
  return { workspace, project };
}

export interface EnvironmentContext {
  workspace: WorkspaceRow;
  project: ProjectRow;
  environment: EnvironmentRow;
}

export async function findEnvironment(db: Reader, ref: EnvironmentRef): Promise<EnvironmentContext> {
  const { workspace, project } = await findProject(db, ref.workspace, ref.project);
  const environment = await db
    .selectFrom("environments")
    .selectAll()
    .where("project_id", "=", project.id)
    .where(ref.environment.startsWith("env_") ? "id" : "slug", "=", ref.environment)
    .executeTakeFirst();
  if (!environment) throw notFound(`environment "${ref.environment}" in project "${project.slug}"`);
  return { workspace, project, environment };
}

export async function createWorkspace(store: Store, input: NewWorkspace): Promise<WorkspaceRow> {
  const row: WorkspaceRow = {
    id: newId("ws"),
    slug: input.slug,
    name: input.name,
    k8s_namespace: workspaceNamespace(input.slug),
    created_at: store.clock(),
  };
  try {
    await store.write(async (tx) => {
      await tx.trx.insertInto("workspaces").values(row).execute();
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw alreadyExists(`workspace "${input.slug}"`);
    throw err;
  }
  return row;
}

export async function listWorkspaces(db: Reader): Promise<WorkspaceRow[]> {
  return db.selectFrom("workspaces").selectAll().orderBy("slug").execute();
}

export async function createProject(store: Store, input: NewProject): Promise<ProjectRow> {
  try {
    return await store.write(async (tx) => {
      const workspace = await findWorkspace(tx.trx, input.workspace);
      const row: ProjectRow = {
        id: newId("prj"),
        workspace_id: workspace.id,
        slug: input.slug,
        name: input.name,
        created_at: tx.now,
      };
      await tx.trx.insertInto("projects").values(row).execute();
      return row;
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw alreadyExists(`project "${input.slug}"`);
    throw err;
  }
}

export async function listProjects(db: Reader, workspaceRef: string): Promise<ProjectRow[]> {
  const workspace = await findWorkspace(db, workspaceRef);
  return db.selectFrom("projects").selectAll().where("workspace_id", "=", workspace.id).orderBy("slug").execute();
}

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
          throw failedPrecondition(`region "${missing[0]}" is not registered (create it with \`krane region create ${missing[0]}\`)`);
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
        created_at: tx.now,
        updated_at: tx.now,
      };
      await tx.trx.insertInto("environments").values(environment).execute();
      if (input.regions.length > 0) {
        await tx.trx
          .insertInto("environment_regions")
          .values(input.regions.map((r) => ({ environment_id: environment.id, region: r.region, replicas: r.replicas })))
          .execute();
      }
      if (s) {
        for (const region of regionNames) await createSentinel(tx, project, environment, region);
      }
      return { workspace, project, environment };
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw alreadyExists(`environment "${input.slug}"`);
    throw err;
  }
}

/** Creates the environment's sentinel in a region and makes it desired there. */
export async function createSentinel(tx: WriteTx, project: ProjectRow, environment: EnvironmentRow, region: string): Promise<void> {
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
    reported_at: null,
  };
  await tx.trx.insertInto("sentinels").values(sentinel).execute();
  await putSentinel(tx, environment, sentinel);
}

/** Re-renders a sentinel's desired state from the environment's (changed) settings. */
export async function putSentinel(tx: WriteTx, environment: EnvironmentRow, sentinel: SentinelRow): Promise<void> {
  await tx.putDesired(sentinel.region, "sentinel", sentinel.id, encodeApplySentinel(renderApplySentinel(environment, sentinel)));
}

/** Removes a sentinel: its region's agent is told to delete it, and its record goes. */
export async function dropSentinel(tx: WriteTx, sentinel: SentinelRow): Promise<void> {
  await tx.removeDesired(sentinel.region, "sentinel", sentinel.id, encodeDeleteSentinel(sentinel));
  await tx.trx.deleteFrom("sentinels").where("id", "=", sentinel.id).execute();
}

export async function listEnvironments(db: Reader, workspaceRef: string, projectRef: string): Promise<EnvironmentContext[]> {
  const { workspace, project } = await findProject(db, workspaceRef, projectRef);
  const rows = await db.selectFrom("environments").selectAll().where("project_id", "=", project.id).orderBy("slug").execute();
  return rows.map((environment) => ({ workspace, project, environment }));
}

export async function environmentRegions(db: Reader, environmentId: string): Promise<{ region: string; replicas: number }[]> {
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
export async function lockEnvironment(tx: WriteTx, id: string, mode: "share" | "update"): Promise<EnvironmentRow | undefined> {
  const q = tx.trx.selectFrom("environments").selectAll().where("id", "=", id);
  if (tx.dialect !== "postgres") return q.executeTakeFirst();
  return (mode === "share" ? q.forShare() : q.forUpdate()).executeTakeFirst();
}
