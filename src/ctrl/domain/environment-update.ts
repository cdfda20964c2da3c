// Changing an environment after creation (UpdateEnvironment): sentinel settings, rollout policy,
// the autoscaling policy (re-rendered into every sentinel, which carries it to the agents),
// replicas per region, and the regions themselves, in one write transaction.
//
// What each change does to desired state:
//   - sentinel settings: every sentinel of the environment is re-rendered (or created in each
//     region when one is added, or deleted everywhere when removed: ./sentinels.ts);
//   - min_ready_seconds: every desired deployment of the environment is re-rendered, since the
//     apply message carries it (the replica counts stay as the rollout engine left them);
//   - other policy fields and replicas: only the stored spec; the rollout driver, run by the
//     caller after the commit, acts on them as it does after `krane scale` or `rollout pause`;
//   - a region left: the environment's deployments and sentinel there are removed from that
//     region's desired state (its agent deletes them) and the region's rollout record goes;
//   - leaving a progressive strategy: its routing and state go, and the sentinels return to
//     routing by instances (a new routing version);
//   - a region joined: the environment's sentinel is created there, and the region's rollout
//     record starts on the revision the environment's other regions are on (so a region added
//     after a rollback runs the rolled-back revision, not the newest), which the driver then
//     scales up.
import {
  formatPolicy,
  mergePolicy,
  parseStoredPolicy,
  policyProblem,
  type AutoscalePolicy,
} from "../../contracts/autoscaling.js";
import { formatSpec, parseStoredSpec } from "../../rollout/progressive/index.js";
import type { WriteTx } from "../db/outbox.js";
import type { DeploymentRow, EnvironmentRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { failedPrecondition, invalidArgument, notFound } from "../errors.js";
import { deploymentPayloads } from "../payloads/deployment.js";
import { mergeRolloutPolicy, mergeSentinel } from "../validate/api.js";
import { LIMITS } from "../validate/rules.js";
import type { EnvironmentUpdate, RolloutPolicyInput, SentinelSettingsInput, StrategyName } from "../validate/types.js";
import { forgetAutoscaleDecisions } from "./autoscale.js";
import { removeFromRegion, setDesiredReplicas } from "./deployments.js";
import { syncEnvironmentObjects } from "./environment-objects.js";
import { refreshExposure } from "./exposure.js";
import {
  addRegion,
  ENVIRONMENT_SETTINGS,
  environmentRegions,
  lockEnvironment,
  removeRegion,
  saveEnvironment,
  setRegionAutoscale,
  setRegionReplicas,
} from "./environments.js";
import { guardQuota } from "./quotas.js";
import { refreshSentinel, sentinelsRenderedAnew } from "./sentinels.js";
import { dropProgressiveState, forgetRolloutRegion, startLikeSiblings } from "./rollouts.js";
import { findEnvironment, type EnvironmentContext } from "./tenancy.js";

export interface UpdatedEnvironment {
  context: EnvironmentContext;
  regions: { region: string; replicas: number }[];
  /** False when the request asked for nothing that differs from what is stored. */
  changed: boolean;
  removedRegions: string[];
}

/** The environment's sentinel settings as stored (null: none). */
export function sentinelOf(e: EnvironmentRow): SentinelSettingsInput | null {
  if (e.sentinel_image === null) return null;
  return {
    image: e.sentinel_image,
    replicas: e.sentinel_replicas,
    cpuMillicores: Number(e.sentinel_cpu_millicores),
    memoryMib: Number(e.sentinel_memory_mib),
  };
}

/** The environment's rollout policy as stored. */
export function policyOf(e: EnvironmentRow): RolloutPolicyInput {
  return {
    strategy: e.strategy === "Recreate" ? "Recreate" : ("RollingUpdate" satisfies StrategyName),
    maxSurge: e.max_surge,
    maxUnavailable: e.max_unavailable,
    minReadySeconds: e.min_ready_seconds,
    progressDeadlineSeconds: e.progress_deadline_seconds,
    revisionHistoryLimit: e.revision_history_limit,
    paused: e.paused === 1,
    progressive: parseStoredSpec(e.progressive),
    warmWindowSeconds: e.warm_window_seconds,
  };
}

/** The environment row with the new settings (timestamps untouched). */
function applySettings(e: EnvironmentRow, s: SentinelSettingsInput | null, p: RolloutPolicyInput): EnvironmentRow {
  return {
    ...e,
    sentinel_image: s ? s.image : null,
    sentinel_replicas: s ? s.replicas : 0,
    sentinel_cpu_millicores: s ? s.cpuMillicores : 0,
    sentinel_memory_mib: s ? s.memoryMib : 0,
    strategy: p.strategy,
    max_surge: p.maxSurge,
    max_unavailable: p.maxUnavailable,
    min_ready_seconds: p.minReadySeconds,
    progress_deadline_seconds: p.progressDeadlineSeconds,
    revision_history_limit: p.revisionHistoryLimit,
    paused: p.paused ? 1 : 0,
    progressive: formatSpec(p.progressive),
    warm_window_seconds: p.warmWindowSeconds,
  };
}

type Setting = (typeof ENVIRONMENT_SETTINGS)[number];

function changedSettings(a: EnvironmentRow, b: EnvironmentRow): Set<Setting> {
  return new Set(ENVIRONMENT_SETTINGS.filter((k) => a[k] !== b[k]));
}

/** Deployments of the environment that are desired somewhere, with where and at how many replicas. */
async function desiredDeployments(
  tx: WriteTx,
  environmentId: string,
  region?: string,
): Promise<{ deployment: DeploymentRow; region: string; replicas: number }[]> {
  let q = tx.trx
    .selectFrom("desired_objects as o")
    .innerJoin("deployments as d", "d.id", "o.object_id")
    .selectAll("d")
    .select(["o.region as desired_region", "o.replicas as desired_count"])
    .where("o.kind", "=", deploymentPayloads.name)
    .where("d.environment_id", "=", environmentId);
  if (region !== undefined) q = q.where("o.region", "=", region);
  const rows = await q.orderBy("o.region").orderBy("d.revision").execute();
  return rows.map(({ desired_region, desired_count, ...deployment }) => ({
    deployment,
    region: desired_region,
    replicas: desired_count ?? 0,
  }));
}

/**
 * Takes the environment out of a region: its deployments there and its rollout state (its
 * sentinel there follows when the environment is saved).
 */
async function leaveRegion(tx: WriteTx, ctx: EnvironmentContext, region: string): Promise<void> {
  const envId = ctx.environment.id;
  for (const d of await desiredDeployments(tx, envId, region))
    await removeFromRegion(tx, { ...ctx, deployment: d.deployment }, region);
  // Reported instances stay until the region's agent reports the deletions, as when the rollout
  // engine retires a revision: they are what still runs there.
  await forgetRolloutRegion(tx, envId, region);
  await removeRegion(tx, envId, region);
}

/** Puts the environment into a region; its rollout there starts on the revision its siblings target. */
async function joinRegion(tx: WriteTx, environmentId: string, region: string, replicas: number): Promise<void> {
  await addRegion(tx, environmentId, region, replicas);
  await startLikeSiblings(tx, environmentId, region);
}

/**
 * The policy after an update: the change laid over the stored one, refused naming the field. A
 * new policy without a max keeps `count` (the replicas the region, or the largest of the
 * environment's regions, has now) as its max: starting to autoscale, or scale-to-zero alone,
 * never takes a region below what it runs.
 */
function mergeAutoscale(
  stored: AutoscalePolicy | null,
  change: EnvironmentUpdate["autoscale"],
  count: number,
  field = "autoscale",
): AutoscalePolicy | null {
  if (change === "remove") return null;
  if (change === null) return stored;
  if ("replace" in change) {
    const problem = policyProblem(change.replace, LIMITS.replicasMax, field);
    if (problem) throw invalidArgument(problem.field, problem.problem);
    return change.replace;
  }
  const spec =
    stored === null && change.spec.maxReplicas === undefined
      ? { ...change.spec, maxReplicas: Math.max(1, count, change.spec.minReplicas ?? 0) }
      : change.spec;
  const merged = mergePolicy(stored, spec, change.zero);
  const problem = policyProblem(merged, LIMITS.replicasMax, field);
  if (problem) throw invalidArgument(problem.field, problem.problem);
  return merged;
}

/** A region's stored autoscale column: its own policy (JSON), "off", or null (the environment's). */
type RegionColumn = string | null;

/** The policy in force with a region's column. */
function inForce(environment: AutoscalePolicy | null, column: RegionColumn): AutoscalePolicy | null {
  if (column === null) return environment;
  return column === "off" ? null : parseStoredPolicy(column);
}

/** The lowest count a policy lets a region have (0 only with scale-to-zero). */
function floorOf(p: AutoscalePolicy): number {
  return p.scaleToZero === null ? Math.max(1, p.minReplicas) : 0;
}

export async function updateEnvironment(store: Store, input: EnvironmentUpdate): Promise<UpdatedEnvironment> {
  return store.write((tx) => updateEnvironmentIn(tx, input));
}

/** updateEnvironment as a step of the caller's transaction. */
export async function updateEnvironmentIn(tx: WriteTx, input: EnvironmentUpdate): Promise<UpdatedEnvironment> {
  const found = await findEnvironment(tx.trx, input);
  // Replicas, regions and autoscaling bounds are what the workspace's quotas count.
  const quota = await guardQuota(tx, found.workspace.id);
  const before = await lockEnvironment(tx, found.environment.id, "update");
  if (!before) throw notFound(`environment "${found.environment.slug}"`);
  const envId = before.id;
  const regionsBefore = await environmentRegions(tx.trx, envId);
  const replicasOf = new Map(regionsBefore.map((r) => [r.region, r.replicas]));

  // Everything that can be refused is checked before the first write.
  for (const rm of input.removeRegions) {
    if (!replicasOf.has(rm.region))
      throw failedPrecondition(
        `remove_regions[${rm.index}]: environment "${before.slug}" is not in region "${rm.region}"`,
      );
  }
  const joining = input.regions.filter((r) => !replicasOf.has(r.region));
  if (joining.length > 0) {
    const known = new Set(
      (
        await tx.trx
          .selectFrom("regions")
          .select("name")
          .where(
            "name",
            "in",
            joining.map((r) => r.region),
          )
          .execute()
      ).map((r) => r.name),
    );
    const missing = joining.find((r) => !known.has(r.region));
    if (missing) {
      throw failedPrecondition(
        `regions[${missing.index}].region: region "${missing.region}" is not registered (create it with \`krane region create ${missing.region}\`)`,
      );
    }
  }
  const regionCount = replicasOf.size - input.removeRegions.length + joining.length;
  if (regionCount > LIMITS.regionsMax)
    throw failedPrecondition(
      `regions: the environment would be in ${regionCount} regions, more than ${LIMITS.regionsMax}`,
    );
  const sentinel = mergeSentinel(sentinelOf(before), input.sentinel, input.removeSentinel);
  const regionsAfter = [...replicasOf.keys(), ...joining.map((r) => r.region)].filter(
    (r) => !input.removeRegions.some((rm) => rm.region === r),
  );
  const policy = mergeRolloutPolicy(policyOf(before), input.rollout, regionsAfter);
  // The counts the regions will have (this update's where it sets one).
  const countAfter = (region: string): number =>
    input.regions.find((r) => r.region === region)?.replicas ?? replicasOf.get(region) ?? 0;
  const autoscale = mergeAutoscale(
    parseStoredPolicy(before.autoscale),
    input.autoscale,
    Math.max(0, ...regionsAfter.map(countAfter)),
  );
  // The sentinels measure what the autoscaler decides on and hold requests at zero.
  if (autoscale !== null && sentinel === null)
    throw failedPrecondition(
      input.removeSentinel
        ? "remove_sentinel: the environment autoscales, which needs its sentinel (remove autoscaling first: --no-autoscale)"
        : `autoscale: environment "${before.slug}" has no sentinel, which measures the load autoscaling decides on (add one: --sentinel-image "")`,
    );

  // Regions' own policies, laid over what they have (their own, else the environment's new one).
  const columnOf = new Map<string, RegionColumn>(regionsBefore.map((r) => [r.region, r.autoscale]));
  const columns = new Map<string, RegionColumn>();
  for (const ra of input.regionAutoscale) {
    if (!replicasOf.has(ra.region) && !joining.some((j) => j.region === ra.region))
      throw failedPrecondition(
        `region_autoscale[${ra.index}].region: environment "${before.slug}" is not in region "${ra.region}"`,
      );
    const own = columnOf.get(ra.region) ?? null;
    let column: RegionColumn;
    if (ra.change === "off") column = "off";
    else if (ra.change === "inherit") column = null;
    else {
      const base = own !== null && own !== "off" ? parseStoredPolicy(own) : autoscale;
      column = formatPolicy(
        mergeAutoscale(base, ra.change, countAfter(ra.region), `region_autoscale[${ra.index}].policy`),
      );
    }
    if (column !== own) columns.set(ra.region, column);
    if (column !== null && column !== "off" && sentinel === null)
      throw failedPrecondition(
        `region_autoscale[${ra.index}]: environment "${before.slug}" has no sentinel, which measures the load autoscaling decides on`,
      );
  }
  const policyAfter = (region: string): AutoscalePolicy | null =>
    inForce(autoscale, columns.has(region) ? (columns.get(region) ?? null) : (columnOf.get(region) ?? null));
  // One writer per number: an autoscaled region's count is the autoscaler's; a person sets its bounds.
  for (const r of input.regions) {
    if (replicasOf.has(r.region) && replicasOf.get(r.region) !== r.replicas && policyAfter(r.region) !== null)
      throw failedPrecondition(
        `regions[${r.index}].replicas: environment "${before.slug}" autoscales in region "${r.region}" (set its bounds with --autoscale, or stop autoscaling there)`,
      );
  }

  const settings = { ...applySettings(before, sentinel, policy), autoscale: formatPolicy(autoscale) };
  const changed = changedSettings(before, settings);
  const rescaled = input.regions.filter((r) => replicasOf.has(r.region) && replicasOf.get(r.region) !== r.replicas);
  // A count outside a region's new bounds is brought within them at once (the agent would do
  // the same at its next decision; this holds while it is away too).
  const clamped: { region: string; replicas: number }[] = [];
  for (const [region, replicas] of replicasOf) {
    const p = policyAfter(region);
    if (p === null || input.removeRegions.some((rm) => rm.region === region)) continue;
    const within = Math.min(p.maxReplicas, Math.max(floorOf(p), replicas));
    if (within !== replicas) clamped.push({ region, replicas: within });
  }
  if (
    changed.size === 0 &&
    rescaled.length === 0 &&
    joining.length === 0 &&
    input.removeRegions.length === 0 &&
    columns.size === 0 &&
    clamped.length === 0
  ) {
    return { context: { ...found, environment: before }, regions: regionsBefore, changed: false, removedRegions: [] };
  }

  // Back from a progressive strategy: its routing and state go, and the sentinels return to
  // routing by instances.
  const leftProgressive = changed.has("progressive") && settings.progressive === null;
  const wanted: EnvironmentRow = {
    ...settings,
    updated_at: tx.now,
    routing_regions: leftProgressive ? null : before.routing_regions,
  };
  const unsaved: EnvironmentContext = { ...found, environment: wanted };
  for (const rm of input.removeRegions) await leaveRegion(tx, unsaved, rm.region);
  for (const r of rescaled) await setRegionReplicas(tx, envId, r.region, r.replicas);
  for (const r of joining) await joinRegion(tx, envId, r.region, r.replicas);
  for (const [region, column] of columns) await setRegionAutoscale(tx, envId, region, column);
  for (const c of clamped) await setRegionReplicas(tx, envId, c.region, c.replicas);
  // One sentinel per region while the environment has sentinel settings, none otherwise.
  const after = await saveEnvironment(tx, found.project, before, wanted);
  // Sentinels whose region's policy or count changed while the environment's columns did not.
  if (!sentinelsRenderedAnew(before, after))
    for (const region of new Set([...columns.keys(), ...clamped.map((c) => c.region)]))
      await refreshSentinel(tx, after, region);
  if (leftProgressive) await dropProgressiveState(tx, envId);
  if (after.autoscale === null && before.autoscale !== null) await forgetAutoscaleDecisions(tx, envId);
  const ctx: EnvironmentContext = { ...found, environment: after };
  const regions = await environmentRegions(tx.trx, envId);

  // The environment's exposure follows its regions (gateway objects in joined regions, none in left ones).
  if (joining.length > 0 || input.removeRegions.length > 0) await refreshExposure(tx, envId);

  if (changed.has("min_ready_seconds")) {
    for (const d of await desiredDeployments(tx, envId))
      await setDesiredReplicas(tx, { ...ctx, deployment: d.deployment }, d.region, d.replicas);
  }
  // Releases and jobs follow the environment into the regions it joined and out of those it left.
  if (joining.length > 0 || input.removeRegions.length > 0) await syncEnvironmentObjects(tx, after, ctx.workspace);
  await quota.check();
  return { context: ctx, regions, changed: true, removedRegions: input.removeRegions.map((r) => r.region) };
}
