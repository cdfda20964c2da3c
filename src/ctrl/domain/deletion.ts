// Deleting environments, projects and workspaces, generically over the kind registry.
//
// Starting a deletion is one transaction: the environment is marked deleting (the API refuses
// changes to it from then on), it leaves its regions (no rollout pass runs for it again), and
// every object it has desired in any region — of every registered kind, found by
// desired_objects.environment_id (or, for rows stored without it, by the Apply payload's
// environment_id) — is removed from that region's desired state with its Delete message
// (../payloads/delete-payload.ts), each recorded as a pending deletion. A project or workspace
// deletion does this for each of its environments.
//
// Pending deletions end when the region's agent reports the object deleted (any kind's "delete"
// report), or when an operator forces past a region whose agent is gone for good (its objects
// are then its orphan GC's business when it returns: the outbox or a snapshot no longer names
// them). Regions without any registered cluster are not waited for: nothing could have applied
// there. Nor is a kind that no agent of the region runs (each agent's heartbeat names the kinds
// it runs; ./clusters.ts, kindsNotRun): an optional kind the agent was not configured for (the
// gateway kind without a Gateway, and any optional kind added later) can never confirm. Objects
// an agent applied while it still ran that kind stay in its cluster until the kind runs there
// again and its first snapshot's orphan collection deletes them; a region whose agents have not
// said which kinds they run (older agents) is waited for in full, as before. Once nothing is
// pending, `finishDeletions` purges the rows — the environment's revisions, sentinels, rollouts,
// configuration, secrets and their data key, releases, jobs, reports, measurements, kept log
// lines — and
// then the project or workspace once its last environment is gone, leaving one event per purge in
// the workspace's audit chain (./audit.ts; the call that asked for the deletion has its own event).
// Nothing waits on anything but confirmations and the operator: no finalizer can stick.
import { forgetAutoscaleDecisions } from "./autoscale.js";
import type { Kysely } from "kysely";
import { forgetDesiredOf, type WriteTx } from "../db/outbox.js";
import { parseJsonList, type Database, type EnvironmentRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { detachedFromCaller } from "../db/write-hook.js";
import { invalidArgument } from "../errors.js";
import { deletePayload, environmentOfPayload } from "../payloads/delete-payload.js";
import { payloadsOf } from "../payloads/registry.js";
import { kindsNotRun } from "./clusters.js";
import { purgeDataKeys } from "./data-keys.js";
import { purgeDeployments } from "./deployments.js";
import { leaveAllRegions, lockEnvironment, markEnvironmentDeleting, purgeEnvironmentRow } from "./environments.js";
import { appendAuditEvent } from "./audit.js";
import { purgeJobs } from "./jobs.js";
import { purgeMeasurements } from "./measurements.js";
import { purgeMetricHistory } from "../history/store.js";
import { purgeEnvironmentLogs, purgeWorkspaceLogs } from "../history/log-purge.js";
import { purgeAlertRules } from "./alerts.js";
import { purgeApiKeys } from "./api-keys.js";
import { purgeWorkspaceNotifications } from "./notifications.js";
import { purgePreviews } from "./previews.js";
import { purgeProjectRepository } from "./repositories.js";
import { purgeReleases } from "./releases.js";
import { purgeRollouts } from "./rollouts.js";
import { purgeSentinels } from "./sentinels.js";
import { purgeSettings } from "./settings.js";
import { findEnvironment, findProject, findWorkspace, markDeleting, purgeTenant } from "./tenancy.js";
import { purgeRegistryCredentials } from "./registries.js";
import { revokeWorkspaceTokens } from "./tokens.js";
import { removeWorkspaceAccess } from "./access.js";

type Reader = Kysely<Database>;

export type DeletionScope = "environment" | "project" | "workspace";

export interface RegionDeletionView {
  region: string;
  remaining: number;
  kinds: { kind: string; count: number }[];
  forced: boolean;
}

export interface DeletionView {
  scope: DeletionScope;
  id: string;
  done: boolean;
  requestedAt: number;
  regions: RegionDeletionView[];
  environmentIds: string[];
}

export interface DeleteRequest {
  /** The slug the caller repeated; must equal the target's. */
  confirm: string;
  /** Regions to stop waiting for ("*": all). */
  forceRegions: readonly string[];
}

function checkConfirm(field: string, req: DeleteRequest, slug: string, what: string): void {
  if (req.confirm !== slug)
    throw invalidArgument(
      field,
      `must repeat the ${what}'s slug "${slug}" to delete it (with everything it runs, in every region)`,
    );
}

/**
 * Starts deleting one environment inside the caller's transaction (a preview's deletion, say):
 * from then on it refuses changes and every object it has desired in any region is removed.
 * Idempotent; returns whether it was already being deleted.
 */
export function startEnvironmentDeletion(tx: WriteTx, env: EnvironmentRow): Promise<boolean> {
  return startEnvironment(tx, env, tx.now);
}

/** Starts deleting one environment (idempotent); returns whether it was already being deleted. */
async function startEnvironment(tx: WriteTx, env: EnvironmentRow, requestedAt: number): Promise<boolean> {
  const locked = await lockEnvironment(tx, env.id, "update");
  if (!locked) return true;
  if (locked.deleting_at !== null) return true;
  await markEnvironmentDeleting(tx, env.id, requestedAt);
  await recordDeletion(tx, env.id, "environment", requestedAt);
  const withClusters = new Set(
    (await tx.trx.selectFrom("clusters").select("region").distinct().execute()).map((r) => r.region),
  );
  const notRun = await kindsNotRun(tx.trx);
  const rows = await tx.trx
    .selectFrom("desired_objects")
    .select(["region", "kind", "object_id", "payload"])
    .where("environment_id", "=", env.id)
    .execute();
  // Rows written without an environment id (a kind that does not pass it): read their payloads.
  for (const r of await tx.trx
    .selectFrom("desired_objects")
    .select(["region", "kind", "object_id", "payload"])
    .where("environment_id", "is", null)
    .execute()) {
    const k = payloadsOf(r.kind);
    if (k && environmentOfPayload(k, r.payload) === env.id) rows.push(r);
  }
  for (const r of rows) {
    const k = payloadsOf(r.kind);
    if (!k) continue;
    await tx.removeDesired(r.region, r.kind, r.object_id, deletePayload(k, r.payload));
    if (!withClusters.has(r.region) || notRun.get(r.region)?.has(r.kind)) continue;
    await tx.trx
      .insertInto("pending_deletions")
      .values({
        environment_id: env.id,
        region: r.region,
        kind: r.kind,
        object_id: r.object_id,
        requested_at: requestedAt,
      })
      .onConflict((oc) => oc.columns(["environment_id", "region", "kind", "object_id"]).doNothing())
      .execute();
  }
  // Out of its regions: no rollout pass runs for it again (passes find no region row).
  await leaveAllRegions(tx, env.id);
  return false;
}

async function force(
  tx: WriteTx,
  deletionId: string,
  environmentIds: readonly string[],
  regions: readonly string[],
): Promise<void> {
  if (regions.length === 0) return;
  const row = await tx.trx
    .selectFrom("deletions")
    .select("forced_regions")
    .where("id", "=", deletionId)
    .executeTakeFirst();
  const forced = new Set(parseJsonList<string>(row?.forced_regions ?? "[]"));
  for (const r of regions) forced.add(r);
  await tx.trx
    .updateTable("deletions")
    .set({ forced_regions: JSON.stringify([...forced].sort()) })
    .where("id", "=", deletionId)
    .execute();
  if (environmentIds.length === 0) return;
  let q = tx.trx.deleteFrom("pending_deletions").where("environment_id", "in", [...environmentIds]);
  if (!forced.has("*")) q = q.where("region", "in", [...forced]);
  await q.execute();
}

/** The deletion record of an environment, project or workspace (kept until it is done). */
async function recordDeletion(tx: WriteTx, id: string, scope: DeletionScope, requestedAt: number): Promise<void> {
  await tx.trx
    .insertInto("deletions")
    .values({ id, scope, requested_at: requestedAt, forced_regions: "[]" })
    .onConflict((oc) => oc.column("id").doNothing())
    .execute();
}

/** The event of a purge: ctrl itself removed the rows of what was deleted. */
async function audit(
  tx: WriteTx,
  what: "Environment" | "Project" | "Workspace",
  workspaceId: string,
  targets: string[],
  slug: string,
): Promise<void> {
  await appendAuditEvent(tx, {
    workspaceId,
    actorKind: "system",
    actorId: "ctrl",
    actorName: "ctrl",
    method: `system/${what}Purged`,
    targets,
    requestId: "",
    clientIp: "",
    userAgent: "",
    idempotencyKey: "",
    code: "ok",
    message: "",
    changes: [{ field: `${what.toLowerCase()}.slug`, op: "removed", before: slug }],
  });
}

export async function deleteEnvironment(
  store: Store,
  ref: { workspace: string; project: string; environment: string },
  req: DeleteRequest,
): Promise<string> {
  return store.write(async (tx) => {
    const { environment } = await findEnvironment(tx.trx, ref, { includeDeleting: true });
    checkConfirm("confirm", req, environment.slug, "environment");
    await startEnvironment(tx, environment, tx.now);
    await force(tx, environment.id, [environment.id], req.forceRegions);
    return environment.id;
  });
}

export async function deleteProject(
  store: Store,
  ref: { workspace: string; project: string },
  req: DeleteRequest,
): Promise<string> {
  return store.write(async (tx) => {
    const { project } = await findProject(tx.trx, ref.workspace, ref.project, { includeDeleting: true });
    checkConfirm("confirm", req, project.slug, "project");
    if (project.deleting_at === null) {
      await markDeleting(tx, "project", project.id, tx.now);
      await recordDeletion(tx, project.id, "project", tx.now);
    }
    const envs = await tx.trx.selectFrom("environments").selectAll().where("project_id", "=", project.id).execute();
    for (const e of envs) await startEnvironment(tx, e, tx.now);
    await force(
      tx,
      project.id,
      envs.map((e) => e.id),
      req.forceRegions,
    );
    for (const e of envs) await force(tx, e.id, [e.id], req.forceRegions);
    return project.id;
  });
}

export async function deleteWorkspace(store: Store, ref: { workspace: string }, req: DeleteRequest): Promise<string> {
  return store.write(async (tx) => {
    const workspace = await findWorkspace(tx.trx, ref.workspace, { includeDeleting: true });
    checkConfirm("confirm", req, workspace.slug, "workspace");
    if (workspace.deleting_at === null) {
      await markDeleting(tx, "workspace", workspace.id, tx.now);
      await recordDeletion(tx, workspace.id, "workspace", tx.now);
    }
    const projects = await tx.trx.selectFrom("projects").selectAll().where("workspace_id", "=", workspace.id).execute();
    for (const p of projects) {
      if (p.deleting_at === null) {
        await markDeleting(tx, "project", p.id, tx.now);
        await recordDeletion(tx, p.id, "project", tx.now);
      }
    }
    const envs = await tx.trx.selectFrom("environments").selectAll().where("workspace_id", "=", workspace.id).execute();
    for (const e of envs) await startEnvironment(tx, e, tx.now);
    await force(
      tx,
      workspace.id,
      envs.map((e) => e.id),
      req.forceRegions,
    );
    for (const p of projects) await force(tx, p.id, [], req.forceRegions);
    for (const e of envs) await force(tx, e.id, [e.id], req.forceRegions);
    return workspace.id;
  });
}

/** An agent confirmed an object gone from its region: its pending deletion ends. Returns the environment, if one was waiting. */
export async function confirmDeletion(
  db: Reader,
  kind: string,
  region: string,
  objectId: string,
): Promise<string | undefined> {
  if (objectId === "") return undefined;
  const row = await db
    .selectFrom("pending_deletions")
    .select("environment_id")
    .where("kind", "=", kind)
    .where("object_id", "=", objectId)
    .where("region", "=", region)
    .executeTakeFirst();
  if (!row) return undefined;
  await db
    .deleteFrom("pending_deletions")
    .where("kind", "=", kind)
    .where("object_id", "=", objectId)
    .where("region", "=", region)
    .execute();
  return row.environment_id;
}

/** Deletes every row an environment owns (nothing is pending any more), each through its owner. */
async function purgeEnvironment(tx: WriteTx, env: EnvironmentRow): Promise<void> {
  const id = env.id;
  await purgeReleases(tx, id);
  await purgeJobs(tx, id);
  await purgeDeployments(tx, id);
  await purgeSentinels(tx, id);
  await forgetAutoscaleDecisions(tx, id);
  await purgeRollouts(tx, id);
  await purgeSettings(tx, id);
  await purgeDataKeys(tx, id);
  await forgetDesiredOf(tx, id);
  await tx.trx.deleteFrom("pending_deletions").where("environment_id", "=", id).execute();
  await purgeMeasurements(tx, id);
  await purgeMetricHistory(tx.trx, id);
  await purgeEnvironmentLogs(tx.trx, id);
  await purgeAlertRules(tx, id);
  await purgeApiKeys(tx, id);
  await purgePreviews(tx, id);
  await tx.trx.deleteFrom("deletions").where("id", "=", id).execute();
  await purgeEnvironmentRow(tx, id);
  await audit(tx, "Environment", env.workspace_id, [env.workspace_id, env.project_id, id], env.slug);
}

/**
 * Purges what has finished: environments with nothing pending, then projects and workspaces
 * being deleted whose last environment (project) is gone. Idempotent; returns how many scopes it
 * finished.
 */
export function finishDeletions(store: Store, only?: string): Promise<number> {
  // ctrl's own work, whoever's call triggered it: not part of that call's writes (its audit event).
  return detachedFromCaller(() => finish(store, only));
}

/**
 * Ends the pending deletions of kinds their region's agents no longer run (they said so in a
 * heartbeat after the deletion started): no confirmation could come. Returns how many ended.
 */
async function dropUnanswerable(store: Store): Promise<number> {
  const notRun = await kindsNotRun(store.db);
  let dropped = 0;
  for (const [region, kinds] of notRun) {
    const res = await store.db
      .deleteFrom("pending_deletions")
      .where("region", "=", region)
      .where("kind", "in", [...kinds])
      .executeTakeFirst();
    dropped += Number(res.numDeletedRows);
  }
  return dropped;
}

async function finish(store: Store, only: string | undefined): Promise<number> {
  await dropUnanswerable(store);
  let q = store.db.selectFrom("environments").select("id").where("deleting_at", "is not", null);
  if (only !== undefined) q = q.where("id", "=", only);
  const candidates = await q.execute();
  let finished = 0;
  for (const c of candidates) {
    finished += await store.write(async (tx) => {
      const env = await lockEnvironment(tx, c.id, "update");
      if (!env || env.deleting_at === null) return 0;
      const pending = await tx.trx
        .selectFrom("pending_deletions")
        .select("object_id")
        .where("environment_id", "=", env.id)
        .limit(1)
        .executeTakeFirst();
      if (pending) return 0;
      await purgeEnvironment(tx, env);
      return 1;
    });
  }
  const projects = await store.db
    .selectFrom("projects")
    .select(["id", "slug", "workspace_id"])
    .where("deleting_at", "is not", null)
    .execute();
  for (const p of projects) {
    finished += await store.write(async (tx) => {
      const left = await tx.trx
        .selectFrom("environments")
        .select("id")
        .where("project_id", "=", p.id)
        .limit(1)
        .executeTakeFirst();
      if (left) return 0;
      await tx.trx.deleteFrom("deletions").where("id", "=", p.id).execute();
      if (!(await purgeTenant(tx, "project", p.id))) return 0;
      await purgeProjectRepository(tx, p.id);
      await audit(tx, "Project", p.workspace_id, [p.workspace_id, p.id], p.slug);
      return 1;
    });
  }
  const workspaces = await store.db
    .selectFrom("workspaces")
    .select(["id", "slug"])
    .where("deleting_at", "is not", null)
    .execute();
  for (const w of workspaces) {
    finished += await store.write(async (tx) => {
      const left = await tx.trx
        .selectFrom("projects")
        .select("id")
        .where("workspace_id", "=", w.id)
        .limit(1)
        .executeTakeFirst();
      if (left) return 0;
      await tx.trx.deleteFrom("deletions").where("id", "=", w.id).execute();
      if (!(await purgeTenant(tx, "workspace", w.id))) return 0;
      // Its tokens, members and sessions end with it (a workspace created again under the slug
      // is not theirs).
      await revokeWorkspaceTokens(tx, w.id);
      // And its registry credentials (sealed, but nothing of a deleted workspace stays).
      await purgeRegistryCredentials(tx, w.id);
      await purgeWorkspaceNotifications(tx, w.id);
      await purgeWorkspaceLogs(tx.trx, w.id);
      await removeWorkspaceAccess(tx, w.id);
      await audit(tx, "Workspace", w.id, [w.id], w.slug);
      return 1;
    });
  }
  return finished;
}
