// Deployments (immutable revisions of an environment; tables deployments, instances and
// deployment_reports): creating and deleting revisions, the write path of their desired replica
// counts, and what agents report of them (each report replaces the instance set of a revision in
// a region; rejections).
//
// Replica policy: creating a deployment only records the revision; the rollout driver
// (src/ctrl/rollout) then calls `setDesiredReplicas` for each revision in each region as it steps
// through the rollout. That one function is the only place that turns "revision R should run N
// replicas in region X" into desired state: desired_objects.replicas = N (the source of truth)
// and the ApplyDeployment payload rendered from the rows with N, with its outbox row.
import type { Kysely } from "kysely";
import type { WriteTx } from "../db/outbox.js";
import { parseJsonList, type Database, type DeploymentRow, type InstanceRow } from "../db/schema.js";
import { DEFAULT_APP_PROTOCOL } from "../../contracts/protocols.js";
import type { Store } from "../db/store.js";
import { noteWriteSubject } from "../db/write-hook.js";
import { DomainError, notFound } from "../errors.js";
import {
  deploymentPayloads,
  encodeApplyDeployment,
  encodeDeleteDeployment,
  type DeploymentContext,
} from "../payloads/deployment.js";
import { deploymentFrom, type RevisionSpec } from "../validate/api.js";
import type { DeploymentAsk, NewDeployment, StoredEnvVar, StoredHealthCheck } from "../validate/types.js";
import { lockEnvironment, nextRevision, setPinned, setRegionReplicas } from "./environments.js";
import { retargetNewest } from "./rollouts.js";
import { purgeInstanceEvents, recordInstanceEvents, type ReportedEvent } from "./instance-events.js";
import { notify } from "./notifications.js";
import { guardQuota, limitsOf } from "./quotas.js";
import { pullSecretOf } from "./registries.js";
import { revisionSettings } from "./revision-settings.js";
import { deploymentK8sName, newId } from "./ids.js";
import { environmentContext, findEnvironment, type EnvironmentContext } from "./tenancy.js";

type Reader = Kysely<Database>;

export async function loadDeploymentContext(db: Reader, deploymentId: string): Promise<DeploymentContext> {
  const deployment = await db.selectFrom("deployments").selectAll().where("id", "=", deploymentId).executeTakeFirst();
  if (!deployment) throw notFound(`deployment "${deploymentId}"`);
  const environment = await db
    .selectFrom("environments")
    .selectAll()
    .where("id", "=", deployment.environment_id)
    .executeTakeFirstOrThrow();
  return { ...(await environmentContext(db, environment)), deployment };
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
  // The workspace's pull Secret as it is now: a credential change re-renders every desired
  // revision of the workspace (./workload-refresh.ts), so the payload never names a stale version.
  const pullSecret = await pullSecretOf(tx.trx, ctx.workspace.id);
  // Its quota as it is now, which the agent backs in the namespace; a change re-renders the same
  // way (./quota-settings.ts).
  const { limits } = await limitsOf(tx.trx, ctx.workspace.id);
  await tx.putDesired(
    region,
    deploymentPayloads.name,
    ctx.deployment.id,
    encodeApplyDeployment(ctx, region, replicas, pullSecret, limits),
    replicas,
    ctx.environment.id,
  );
}

/** Stops desiring a revision in a region; streams a DeleteDeployment if it was desired there. */
export async function removeFromRegion(tx: WriteTx, ctx: DeploymentContext, region: string): Promise<boolean> {
  tx.environmentChanged(ctx.environment.id);
  return tx.removeDesired(
    region,
    deploymentPayloads.name,
    ctx.deployment.id,
    encodeDeleteDeployment(ctx.workspace, ctx.deployment),
  );
}

/**
 * The revision whose settings an inheriting deploy carries over, read inside the deploy's
 * transaction: the rollout's current target (the caller's, ../rollout/actions.ts), or none.
 */
export type CurrentRevision = (db: Reader, environmentId: string) => Promise<DeploymentRow | undefined>;

/**
 * Adds the revision a CreateDeployment asks for. With inherit, the environment row is locked
 * before the current revision is read, so concurrent deploys of one environment take turns and
 * each carries over what the one before it wrote (a keyed repeat is answered from the first
 * write, ../server/idempotency.ts, never merged again).
 */
export async function createAskedDeployment(
  store: Store,
  ask: DeploymentAsk,
  current: CurrentRevision,
): Promise<DeploymentContext> {
  return store.write(async (tx) => {
    const envCtx: EnvironmentContext = await findEnvironment(tx.trx, ask);
    const quota = await guardQuota(tx, envCtx.workspace.id);
    let base: RevisionSpec | null = null;
    if (ask.inherit || ask.unpin === true) await lockEnvironment(tx, envCtx.environment.id, "update");
    if (ask.inherit) {
      const d = await current(tx.trx, envCtx.environment.id);
      if (d) base = revisionCopyOf(d);
    }
    if (ask.unpin === true) {
      // In the deploy's transaction, after inherit read what runs: the pin goes only with this revision.
      const pinned = await tx.trx
        .selectFrom("environments")
        .select("pinned_deployment_id")
        .where("id", "=", envCtx.environment.id)
        .executeTakeFirstOrThrow();
      if (pinned.pinned_deployment_id !== null) {
        await setPinned(tx, envCtx.environment.id, null);
        await retargetNewest(tx, envCtx.environment.id);
      }
    }
    const created = await insertDeployment(tx, envCtx, deploymentFrom(ask, base));
    await quota.check();
    return created;
  });
}

/** Adds a revision with exactly these settings (seeding, benches, tests). */
export async function createDeployment(store: Store, input: NewDeployment): Promise<DeploymentContext> {
  return store.write(async (tx) => insertDeployment(tx, await findEnvironment(tx.trx, input), input));
}

/** The settings of a stored revision as a new revision's, for a copy (restart, changed config). */
export function revisionCopyOf(d: DeploymentRow): RevisionSpec & { replicas: null } {
  return {
    image: d.image,
    // A copy (restart, changed config) runs the very bytes the revision ran.
    imageDigest: d.image_digest,
    command: parseJsonList<string>(d.command),
    args: parseJsonList<string>(d.args),
    port: d.port,
    env: parseJsonList<StoredEnvVar>(d.env),
    cpuMillicores: d.cpu_millicores,
    memoryMib: d.memory_mib,
    healthCheck: d.health_check === null ? null : (JSON.parse(d.health_check) as StoredHealthCheck),
    buildId: d.build_id,
    replicas: null,
    protocol: d.protocol,
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
  const revision = await nextRevision(tx, envCtx.environment.id);
  if (input.replicas !== null) await setRegionReplicas(tx, envCtx.environment.id, null, input.replicas);
  const deployment: DeploymentRow = {
    id: newId("dep"),
    workspace_id: envCtx.workspace.id,
    project_id: envCtx.project.id,
    environment_id: envCtx.environment.id,
    revision,
    k8s_name: deploymentK8sName(envCtx.project.slug, envCtx.environment.slug),
    image: input.image,
    image_digest: input.imageDigest ?? null,
    command: JSON.stringify(input.command),
    args: JSON.stringify(input.args),
    port: input.port,
    env: JSON.stringify(input.env),
    cpu_millicores: input.cpuMillicores,
    memory_mib: input.memoryMib,
    health_check: input.healthCheck ? JSON.stringify(input.healthCheck) : null,
    build_id: input.buildId,
    protocol: input.protocol ?? DEFAULT_APP_PROTOCOL,
    created_at: tx.now,
    ...(await revisionSettings(tx.trx, envCtx.environment.id)),
  };
  await tx.trx.insertInto("deployments").values(deployment).execute();
  // A keyed API call remembers the revision it made, with the change (server/idempotency.ts).
  await noteWriteSubject(tx, deployment.id);
  const ctx: DeploymentContext = { ...envCtx, deployment };
  await notify(tx, {
    type: "deploy.started",
    severity: "info",
    environmentId: envCtx.environment.id,
    summary: `revision ${revision} rolling out`,
    text: `Revision ${revision} (${deployment.image}) starts rolling out.`,
    deployment: { id: deployment.id, revision },
    details: { image: deployment.image },
  });
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
    if (owner) tx.environmentChanged(owner.environment_id);
    const ctx = await loadDeploymentContext(tx.trx, deploymentId);
    // The pin goes with the revision it pinned: the newest rolls out, as after an unpin.
    if (ctx.environment.pinned_deployment_id === deploymentId) await setPinned(tx, ctx.environment.id, null);
    const regions = await tx.trx
      .selectFrom("desired_objects")
      .select("region")
      .where("kind", "=", deploymentPayloads.name)
      .where("object_id", "=", deploymentId)
      .execute();
    for (const r of regions) await removeFromRegion(tx, ctx, r.region);
    await tx.trx.deleteFrom("instances").where("deployment_id", "=", deploymentId).execute();
    await tx.trx.deleteFrom("deployment_reports").where("deployment_id", "=", deploymentId).execute();
    await tx.trx.deleteFrom("deployments").where("id", "=", deploymentId).execute();
  });
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
    .where("kind", "=", deploymentPayloads.name)
    .where("object_id", "in", [...deploymentIds]);
  if (region !== undefined) q = q.where("region", "=", region);
  for (const r of await q.execute()) {
    let m = out.get(r.region);
    if (!m) out.set(r.region, (m = new Map()));
    m.set(r.object_id, r.replicas ?? 0);
  }
  return out;
}

/** Deletes an environment's revisions and what agents reported of them (the end of its deletion). */
export async function purgeDeployments(tx: WriteTx, environmentId: string): Promise<void> {
  const ids = (
    await tx.trx.selectFrom("deployments").select("id").where("environment_id", "=", environmentId).execute()
  ).map((d) => d.id);
  for (let i = 0; i < ids.length; i += 500) {
    const chunk = ids.slice(i, i + 500);
    await tx.trx.deleteFrom("instances").where("deployment_id", "in", chunk).execute();
    await tx.trx.deleteFrom("deployment_reports").where("deployment_id", "in", chunk).execute();
  }
  await tx.trx.deleteFrom("deployments").where("environment_id", "=", environmentId).execute();
  await purgeInstanceEvents(tx, environmentId);
}

// ---------------------------------------------------------------- reports

export type InstanceStatusName = "pending" | "running" | "failed" | "terminating" | "unknown";

export interface ReportedInstance {
  k8sName: string;
  address: string;
  status: InstanceStatusName;
  cpuMillicores: number;
  memoryMib: number;
  nodeName: string;
  zone: string;
  readySince: number;
}

/** A validated report of a deployment (../kinds/deployment.ts). `id` may be empty: the agent then names it by `k8sName`. */
export type DeploymentReport =
  | { type: "update"; id: string; k8sName: string; instances: ReportedInstance[]; events: ReportedEvent[] }
  | { type: "delete"; id: string; k8sName: string }
  | { type: "rejected"; id: string; k8sName: string; reason: string };

async function reportableIn(db: Reader, deploymentId: string, region: string): Promise<boolean> {
  const desired = await db
    .selectFrom("desired_objects")
    .select("object_id")
    .where("region", "=", region)
    .where("kind", "=", deploymentPayloads.name)
    .where("object_id", "=", deploymentId)
    .executeTakeFirst();
  if (desired) return true;
  const reported = await db
    .selectFrom("deployment_reports")
    .select("deployment_id")
    .where("deployment_id", "=", deploymentId)
    .where("region", "=", region)
    .executeTakeFirst();
  return reported !== undefined;
}

async function findDeploymentForReport(db: Reader, id: string, name: string): Promise<DeploymentRow | undefined> {
  if (id !== "") return db.selectFrom("deployments").selectAll().where("id", "=", id).executeTakeFirst();
  return db.selectFrom("deployments").selectAll().where("k8s_name", "=", name).executeTakeFirst();
}

/** Records a report: the revision's instance set in the region replaced by the reported one, or its rejection. */
export async function recordDeploymentReport(store: Store, region: string, report: DeploymentReport): Promise<void> {
  await store.write(async (tx) => {
    const d = await findDeploymentForReport(tx.trx, report.id, report.k8sName);
    if (!d) {
      // A delete of something already gone is the agent confirming what we want.
      if (report.type === "delete") return;
      throw notFound(`deployment "${report.id || report.k8sName}"`);
    }
    tx.environmentChanged(d.environment_id);
    if (report.k8sName !== "" && report.k8sName !== d.k8s_name) {
      throw new DomainError("invalid_argument", `k8s_name: does not match deployment ${d.id}`, "k8s_name");
    }
    if (report.type === "rejected") {
      await tx.trx
        .insertInto("deployment_reports")
        .values({ deployment_id: d.id, region, rejected_reason: report.reason, reported_at: tx.now })
        .onConflict((oc) =>
          oc.columns(["deployment_id", "region"]).doUpdateSet({ rejected_reason: report.reason, reported_at: tx.now }),
        )
        .execute();
      return;
    }
    if (report.type === "update" && !(await reportableIn(tx.trx, d.id, region))) {
      // An agent reports only what its region runs: a revision desired there now, or one it
      // reported before (its pods outlive the desired state while they shut down).
      throw new DomainError("permission_denied", `deployment ${d.id} does not run in region "${region}"`);
    }
    await tx.trx.deleteFrom("instances").where("deployment_id", "=", d.id).where("region", "=", region).execute();
    await tx.trx
      .insertInto("deployment_reports")
      .values({ deployment_id: d.id, region, rejected_reason: null, reported_at: tx.now })
      .onConflict((oc) =>
        oc.columns(["deployment_id", "region"]).doUpdateSet({ rejected_reason: null, reported_at: tx.now }),
      )
      .execute();
    if (report.type === "update" && report.instances.length > 0) {
      const seen = new Set<string>();
      const rows: InstanceRow[] = [];
      for (const i of report.instances) {
        if (seen.has(i.k8sName)) continue; // the last word on a duplicated pod name is ignored
        seen.add(i.k8sName);
        rows.push({
          deployment_id: d.id,
          region,
          k8s_name: i.k8sName,
          address: i.address,
          status: i.status,
          cpu_millicores: i.cpuMillicores,
          memory_mib: i.memoryMib,
          node_name: i.nodeName,
          zone: i.zone,
          ready_since: i.readySince,
          reported_at: tx.now,
        });
      }
      for (let k = 0; k < rows.length; k += 200)
        await tx.trx
          .insertInto("instances")
          .values(rows.slice(k, k + 200))
          .execute();
    }
    if (report.type === "update") await recordInstanceEvents(tx, d, region, report.events);
  });
}
