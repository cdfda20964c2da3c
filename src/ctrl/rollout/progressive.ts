// The progressive rollout shell: ctrl's I/O around src/rollout/progressive for an environment
// whose rollout policy has a progressive strategy (canary, blue-green, region waves). One
// decision covers the whole environment (waves cross regions), so whichever (environment, region)
// key the driver runs, the pass:
//   1. outside the transaction, asks the engine whether an analysis check is due and, if so,
//      reads the samples through the injected MeasurementSource and judges them (no source:
//      the check fails closed, "no measurements available");
//   2. in one transaction holding the environment row for update: reads the state, the regions,
//      the revisions and their instance reports, runs decide(), and writes through the tables'
//      owners (../domain) the replica targets (setDesiredReplicas, through the outbox), the
//      routing per region (setRouting: a new routing version, every sentinel re-rendered), the
//      state and the pending command consumed, the events, and the wake-up time on every
//      region's rollout record (the driver's sweep reads those, so waits survive a restart).
// A verdict measured for a state that changed before the transaction is dropped by the engine.
import type { Logger } from "pino";
import type { MeasurementSource } from "../../contracts/analysis.js";
import {
  analysisRequest,
  decide,
  INITIAL_STATE,
  judge,
  parseStoredSpec,
  type Command,
  type ProgressiveSpec,
  type ProgressiveState,
  type RegionObservation,
  type RevisionCounts,
  type Verdict,
} from "../../rollout/progressive/index.js";
import type { Store } from "../db/store.js";
import type { EnvironmentRow } from "../db/schema.js";
import { desiredReplicasOf, removeFromRegion, setDesiredReplicas } from "../domain/deployments.js";
import { lockEnvironment, setRouting } from "../domain/environments.js";
import { environmentContext } from "../domain/tenancy.js";
import { notify } from "../domain/notifications.js";
import { appendEvents, saveProgressiveState, setDecidedTarget } from "../domain/rollouts.js";
import type { DeploymentContext } from "../payloads/deployment.js";
import type { RegionRouting } from "../payloads/sentinel.js";
import { progressiveNotices } from "./notices.js";
import type { PassResult } from "./pass.js";
import { revisionStatus } from "./plan.js";

export interface ProgressiveOptions {
  /** Where analysis samples come from; absent: analysis fails closed. */
  measurements?: MeasurementSource;
  /** Called once per aborted rollout (metrics). */
  onAbort?: (environmentId: string, reason: string) => void;
  logger?: Logger;
}

const NOTHING: PassResult = { ran: false, changed: false, wakeAt: null };

/** The spec of an environment row (its progress deadline from the rollout policy), or null. */
export function specOf(env: Pick<EnvironmentRow, "progressive" | "progress_deadline_seconds">): ProgressiveSpec | null {
  const spec = parseStoredSpec(env.progressive);
  return spec === null ? null : { ...spec, progressDeadlineSeconds: env.progress_deadline_seconds };
}

export function parseState(text: string | null | undefined): ProgressiveState {
  if (text === null || text === undefined || text === "") return INITIAL_STATE;
  return { ...INITIAL_STATE, ...(JSON.parse(text) as Partial<ProgressiveState>) };
}

/** Measures and judges a due analysis check, or null when none is due. Never throws. */
async function measure(
  store: Store,
  environmentId: string,
  opts: ProgressiveOptions,
  now: number,
): Promise<{ stateText: string; verdict: Verdict } | null> {
  const env = await store.db.selectFrom("environments").selectAll().where("id", "=", environmentId).executeTakeFirst();
  if (!env) return null;
  const spec = specOf(env);
  if (spec === null) return null;
  const row = await store.db
    .selectFrom("progressive_rollouts")
    .select("state")
    .where("environment_id", "=", environmentId)
    .executeTakeFirst();
  const state = parseState(row?.state);
  const regions = (
    await store.db
      .selectFrom("environment_regions")
      .select("region")
      .where("environment_id", "=", environmentId)
      .orderBy("region")
      .execute()
  ).map((r) => r.region);
  const req = analysisRequest(spec, state, regions, now);
  if (req === null) return null;
  const stateText = row?.state ?? "";
  if (opts.measurements === undefined)
    return { stateText, verdict: { result: "fail", reason: "no measurements available", at: now } };
  try {
    const ids = req.stable === null ? [req.canary] : [req.canary, req.stable];
    const samples = await opts.measurements.samples(environmentId, ids, req.sinceMs, req.regions);
    const j = judge(req.rules, samples.get(req.canary), req.stable === null ? undefined : samples.get(req.stable));
    return { stateText, verdict: { ...j, at: now } };
  } catch (err) {
    // Not a verdict on the revision: the next interval measures again.
    const reason = `measurements unavailable: ${err instanceof Error ? err.message : String(err)}`;
    opts.logger?.warn({ environmentId, err: reason }, "analysis check could not read measurements");
    return { stateText, verdict: { result: "inconclusive", reason, at: now } };
  }
}

export async function runProgressivePass(
  store: Store,
  environmentId: string,
  opts: ProgressiveOptions = {},
): Promise<PassResult> {
  const measured = await measure(store, environmentId, opts, Date.now());
  const result = await store.write(async (tx) => {
    const environment = await lockEnvironment(tx, environmentId, "update");
    if (!environment) return { pass: NOTHING, abortReason: null };
    const spec = specOf(environment);
    if (spec === null) return { pass: NOTHING, abortReason: null };
    const now = tx.now;
    const regionRows = await tx.trx
      .selectFrom("environment_regions")
      .select(["region", "replicas"])
      .where("environment_id", "=", environmentId)
      .orderBy("region")
      .execute();
    const row = await tx.trx
      .selectFrom("progressive_rollouts")
      .selectAll()
      .where("environment_id", "=", environmentId)
      .executeTakeFirst();
    const state = parseState(row?.state);
    const deployments = await tx.trx
      .selectFrom("deployments")
      .selectAll()
      .where("environment_id", "=", environmentId)
      .execute();
    let newest: (typeof deployments)[number] | undefined;
    for (const d of deployments) if (newest === undefined || Number(d.revision) > Number(newest.revision)) newest = d;
    const ids = deployments.map((d) => d.id);
    const desired = await desiredReplicasOf(tx.trx, ids);
    const instances = ids.length
      ? await tx.trx
          .selectFrom("instances")
          .select(["deployment_id", "region", "status", "ready_since"])
          .where("deployment_id", "in", ids)
          .execute()
      : [];
    const observations: RegionObservation[] = regionRows.map(({ region, replicas }) => {
      const revisions = new Map<string, RevisionCounts>();
      for (const id of ids) {
        const counts = revisionStatus(
          instances
            .filter((i) => i.deployment_id === id && i.region === region)
            .map((i) => ({ status: i.status, readySince: Number(i.ready_since) })),
          environment.min_ready_seconds,
          now,
        );
        if (counts.replicas > 0)
          revisions.set(id, {
            available: counts.availableReplicas,
            ready: counts.readyReplicas,
            current: counts.replicas,
          });
      }
      return { region, replicas, revisions };
    });
    const command = row?.command === "promote" || row?.command === "abort" ? (row.command as Command) : null;
    const verdict = measured !== null && measured.stateText === (row?.state ?? "") ? measured.verdict : null;
    const d = decide({ spec, state, newest: newest?.id ?? null, regions: observations, command, verdict, now });

    // Replica targets.
    let changed = false;
    const { workspace, project } = await environmentContext(tx.trx, environment);
    const ctxOf = (id: string): DeploymentContext => {
      const deployment = deployments.find((x) => x.id === id);
      if (deployment === undefined) throw new Error(`deployment ${id} vanished during the pass`);
      return { workspace, project, environment, deployment };
    };
    const keep = new Set([d.state.stable, d.state.canary, d.state.previous].filter((x): x is string => x !== null));
    for (const r of d.regions) {
      const have = desired.get(r.region) ?? new Map<string, number>();
      for (const id of ids) {
        const want = r.replicas[id] ?? 0;
        const current = have.get(id);
        if (current === undefined && want === 0) continue;
        if (current !== want) {
          await setDesiredReplicas(tx, ctxOf(id), r.region, want);
          changed = true;
        } else if (
          want === 0 &&
          !keep.has(id) &&
          !instances.some((i) => i.deployment_id === id && i.region === r.region)
        ) {
          // Scaled down, no pod left, not needed for a rollback: out of the region.
          await removeFromRegion(tx, ctxOf(id), r.region);
        }
      }
    }

    // Routing per region.
    const routing = new Map<string, RegionRouting>(
      d.regions.filter((r) => r.weights.length > 0).map((r) => [r.region, { weights: r.weights, preview: r.preview }]),
    );
    if ((await setRouting(tx, project, environment, routing)) !== null) changed = true;

    // State, command, events, wake-ups.
    const stateText = JSON.stringify(d.state);
    if (stateText !== (row?.state ?? "") || command !== null || row === undefined) {
      await saveProgressiveState(tx, environmentId, stateText, d.wakeAt);
      if (stateText !== (row?.state ?? "")) changed = true;
    }
    for (const { region } of regionRows) {
      await setDecidedTarget(tx, environmentId, region, {
        deploymentId: d.state.canary !== null && !d.state.aborted ? d.state.canary : d.state.stable,
        seenRevision: Number(environment.last_revision),
        requeueAt: changed ? null : d.wakeAt,
      });
      if (d.events.length > 0) await appendEvents(tx, environmentId, region, [...d.events]);
    }
    for (const n of progressiveNotices(state, d, deployments)) await notify(tx, { ...n, environmentId });
    return {
      pass: { ran: true, changed, wakeAt: changed ? null : d.wakeAt },
      abortReason: d.aborted ? d.state.reason : null,
    };
  });
  if (result.abortReason !== null) opts.onAbort?.(environmentId, result.abortReason);
  return result.pass;
}
