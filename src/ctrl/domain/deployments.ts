// Deployments (immutable revisions of an environment) and the write path of their desired
// replica counts.
//
// Replica policy: creating a deployment only records the revision; the rollout driver
// (src/ctrl/rollout) then calls `setDesiredReplicas` for each revision in each region as it steps
// through the rollout. That one function is the only place that turns "revision R should run N
// replicas in region X" into desired state: desired_objects.replicas = N (the source of truth)
// and the ApplyDeployment payload rendered from the rows with N, with its outbox row.
import type { Kysely } from "kysely";
import type { WriteTx } from "../db/outbox.js";
import { parseJsonList, type Database, type DeploymentRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { noteWriteSubject } from "../db/write-hook.js";
import { notFound } from "../errors.js";
import {
  deploymentKind,
  encodeApplyDeployment,
  encodeDeleteDeployment,
  type DeploymentContext,
} from "../kinds/deployment.js";
import type { NewDeployment, StoredEnvVar, StoredHealthCheck } from "../validate/types.js";
import { lockEnvironment } from "./environments.js";
import { revisionSettings } from "./revision-settings.js";
import { deploymentK8sName, newId } from "./ids.js";
import { readLimit, takePage, type Page, type PageQuery } from "./page.js";
import { findEnvironment, findProject, findWorkspace, type EnvironmentContext } from "./tenancy.js";

type Reader = Kysely<Database>;

export async function loadDeploymentContext(db: Reader, deploymentId: string): Promise<DeploymentContext> {
  const deployment = await db.selectFrom("deployments").selectAll().where("id", "=", deploymentId).executeTakeFirst();
  if (!deployment) throw notFound(`deployment "${deploymentId}"`);
  const environment = await db
    .selectFrom("environments")
    .selectAll()
    .where("id", "=", deployment.environment_id)
    .executeTakeFirstOrThrow();
  const project = await db
    .selectFrom("projects")
    .selectAll()
    .where("id", "=", deployment.project_id)
    .executeTakeFirstOrThrow();
  const workspace = await db
    .selectFrom("workspaces")
    .selectAll()
    .where("id", "=", deployment.workspace_id)
    .executeTakeFirstOrThrow();
  return { workspace, project, environment, deployment };
}

/**
 * Sets how many replicas of one revision should run in one region: writes the full desired
 * ApplyDeployment for the region and its outbox row. Zero replicas keeps the (scaled-down)
 * ReplicaSet; removing the revision from the region is `removeFromRegion`.
 */
export async function setDesiredReplicas(
  tx: WriteTx,
  ctx: DeploymentContext,
  region: string,
  replicas: number,
): Promise<void> {
  await tx.putDesired(
    region,
    deploymentKind.name,
    ctx.deployment.id,
    encodeApplyDeployment(ctx, region, replicas),
    replicas,
    ctx.environment.id,
  );
}

/** Stops desiring a revision in a region; streams a DeleteDeployment if it was desired there. */
export async function removeFromRegion(tx: WriteTx, ctx: DeploymentContext, region: string): Promise<boolean> {
  return tx.removeDesired(
    region,
    deploymentKind.name,
    ctx.deployment.id,
    encodeDeleteDeployment(ctx.workspace, ctx.deployment),
  );
}

export async function createDeployment(store: Store, input: NewDeployment): Promise<DeploymentContext> {
  return store.write(async (tx) => {
    const envCtx: EnvironmentContext = await findEnvironment(tx.trx, input);
    return insertDeployment(tx, envCtx, input);
  });
}

/** The settings of a stored revision as a new revision's, for a copy (restart, changed config). */
export function revisionCopyOf(d: DeploymentRow): Omit<NewDeployment, "workspace" | "project" | "environment"> {
  return {
    image: d.image,
    command: parseJsonList<string>(d.command),
    args: parseJsonList<string>(d.args),
    port: d.port,
    env: parseJsonList<StoredEnvVar>(d.env),
    cpuMillicores: d.cpu_millicores,
    memoryMib: d.memory_mib,
    healthCheck: d.health_check === null ? null : (JSON.parse(d.health_check) as StoredHealthCheck),
    buildId: d.build_id,
    replicas: null,
  };
}

/**
 * Adds a revision to an environment inside the caller's transaction: the next revision number,
 * and a copy of the environment's current configuration and secrets (./settings.ts), which the
 * revision keeps whatever changes later.
 */
export async function insertDeployment(
  tx: WriteTx,
  envCtx: EnvironmentContext,
  input: Omit<NewDeployment, "workspace" | "project" | "environment">,
): Promise<DeploymentContext> {
  // Bumping last_revision locks the environment row, so concurrent deploys of one environment
  // get distinct, ordered revisions.
  const bumped = await tx.trx
    .updateTable("environments")
    .set((eb) => ({ last_revision: eb("last_revision", "+", 1), updated_at: tx.now }))
    .where("id", "=", envCtx.environment.id)
    .returning("last_revision")
    .executeTakeFirstOrThrow();
  const revision = Number(bumped.last_revision);
  if (input.replicas !== null) {
    await tx.trx
      .updateTable("environment_regions")
      .set({ replicas: input.replicas })
      .where("environment_id", "=", envCtx.environment.id)
      .execute();
  }
  const deployment: DeploymentRow = {
    id: newId("dep"),
    workspace_id: envCtx.workspace.id,
    project_id: envCtx.project.id,
    environment_id: envCtx.environment.id,
    revision,
    k8s_name: deploymentK8sName(envCtx.project.slug, envCtx.environment.slug),
    image: input.image,
    command: JSON.stringify(input.command),
    args: JSON.stringify(input.args),
    port: input.port,
    env: JSON.stringify(input.env),
    cpu_millicores: input.cpuMillicores,
    memory_mib: input.memoryMib,
    health_check: input.healthCheck ? JSON.stringify(input.healthCheck) : null,
    build_id: input.buildId,
    created_at: tx.now,
    ...(await revisionSettings(tx.trx, envCtx.environment.id)),
  };
  await tx.trx.insertInto("deployments").values(deployment).execute();
  // A keyed API call remembers the revision it made, with the change (server/idempotency.ts).
  await noteWriteSubject(tx, deployment.id);
  const ctx: DeploymentContext = { ...envCtx, deployment };
  // No desired state yet: the rollout driver (src/ctrl/rollout) puts the new revision into each
  // region and sizes it and the older revisions step by step.
  return ctx;
}

/** Deletes a revision: removed from every region's desired state, then from the store. */
export async function deleteDeployment(store: Store, deploymentId: string): Promise<void> {
  await store.write(async (tx) => {
    // Wait for rollout passes of the environment in flight, which may be about to size this
    // revision: otherwise one could desire it again after it is gone.
    const owner = await tx.trx
      .selectFrom("deployments")
      .select("environment_id")
      .where("id", "=", deploymentId)
      .executeTakeFirst();
    if (owner) await lockEnvironment(tx, owner.environment_id, "update");
    const ctx = await loadDeploymentContext(tx.trx, deploymentId);
    const regions = await tx.trx
      .selectFrom("desired_objects")
      .select("region")
      .where("kind", "=", deploymentKind.name)
      .where("object_id", "=", deploymentId)
      .execute();
    for (const r of regions) await removeFromRegion(tx, ctx, r.region);
    await tx.trx.deleteFrom("instances").where("deployment_id", "=", deploymentId).execute();
    await tx.trx.deleteFrom("deployment_reports").where("deployment_id", "=", deploymentId).execute();
    await tx.trx.deleteFrom("deployments").where("id", "=", deploymentId).execute();
  });
}

export async function getDeployment(db: Reader, deploymentId: string): Promise<DeploymentContext> {
  return loadDeploymentContext(db, deploymentId);
}

export interface DeploymentFilter {
  workspace: string;
  project?: string;
  environment?: string;
}

/** Where a page of deployments ends: its last deployment's (created_at, revision, id). */
export type DeploymentKey = readonly [createdAt: number, revision: number, id: string];

/** Newest first: by created_at, then revision, then id, all descending (a total order, so pages never overlap or skip). */
export async function listDeployments(
  db: Reader,
  filter: DeploymentFilter,
  page?: PageQuery<DeploymentKey>,
): Promise<Page<DeploymentContext>> {
  let q = db.selectFrom("deployments").selectAll();
  if (filter.project !== undefined && filter.environment !== undefined) {
    const { environment } = await findEnvironment(db, {
      workspace: filter.workspace,
      project: filter.project,
      environment: filter.environment,
    });
    q = q.where("environment_id", "=", environment.id);
  } else if (filter.project !== undefined) {
    const { project } = await findProject(db, filter.workspace, filter.project);
    q = q.where("project_id", "=", project.id);
  } else {
    const workspace = await findWorkspace(db, filter.workspace);
    q = q.where("workspace_id", "=", workspace.id);
  }
  if (page?.after !== undefined) {
    const [createdAt, revision, id] = page.after;
    q = q.where((eb) => eb(eb.refTuple("created_at", "revision", "id"), "<", eb.tuple(createdAt, revision, id)));
  }
  const limit = readLimit(page);
  if (limit !== undefined) q = q.limit(limit);
  const rows = await q.orderBy("created_at", "desc").orderBy("revision", "desc").orderBy("id", "desc").execute();
  if (rows.length === 0) return takePage([], page);
  // The rows' environments, projects and workspaces in one query each (a page of a workspace's
  // deployments can span as many environments as it has rows).
  const byId = <T extends { id: string }>(list: T[]): Map<string, T> => new Map(list.map((x) => [x.id, x]));
  const ids = (f: (d: DeploymentRow) => string): string[] => [...new Set(rows.map(f))];
  const environments = byId(
    await db
      .selectFrom("environments")
      .selectAll()
      .where(
        "id",
        "in",
        ids((d) => d.environment_id),
      )
      .execute(),
  );
  const projects = byId(
    await db
      .selectFrom("projects")
      .selectAll()
      .where(
        "id",
        "in",
        ids((d) => d.project_id),
      )
      .execute(),
  );
  const workspaces = byId(
    await db
      .selectFrom("workspaces")
      .selectAll()
      .where(
        "id",
        "in",
        ids((d) => d.workspace_id),
      )
      .execute(),
  );
  const out = rows.map((deployment): DeploymentContext => {
    const environment = environments.get(deployment.environment_id);
    const project = projects.get(deployment.project_id);
    const workspace = workspaces.get(deployment.workspace_id);
    if (!environment || !project || !workspace)
      throw new Error(`deployment ${deployment.id}: its environment, project or workspace is missing`);
    return { workspace, project, environment, deployment };
  });
  return takePage(out, page);
}

/** Desired replica count of a deployment per region (regions where it is not desired are absent). */
export async function desiredReplicasByRegion(
  db: Reader,
  deploymentId: string,
): Promise<{ region: string; replicas: number }[]> {
  const rows = await db
    .selectFrom("desired_objects")
    .select(["region", "replicas"])
    .where("kind", "=", deploymentKind.name)
    .where("object_id", "=", deploymentId)
    .orderBy("region")
    .execute();
  return rows.map((r) => ({ region: r.region, replicas: r.replicas ?? 0 }));
}

/** Desired replicas of deployments by region then deployment id (absent: not desired there). */
export async function desiredReplicasOf(
  db: Reader,
  deploymentIds: readonly string[],
  region?: string,
): Promise<Map<string, Map<string, number>>> {
  const out = new Map<string, Map<string, number>>();
  if (deploymentIds.length === 0) return out;
  let q = db
    .selectFrom("desired_objects")
    .select(["region", "object_id", "replicas"])
    .where("kind", "=", deploymentKind.name)
    .where("object_id", "in", [...deploymentIds]);
  if (region !== undefined) q = q.where("region", "=", region);
  for (const r of await q.execute()) {
    let m = out.get(r.region);
    if (!m) out.set(r.region, (m = new Map()));
    m.set(r.object_id, r.replicas ?? 0);
  }
  return out;
}
