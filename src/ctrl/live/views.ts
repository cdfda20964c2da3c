// What the live streams send: an environment's whole view (the answers of GetEnvironmentStatus
// and GetRolloutStatus, each current instance's newest event, configuration and secret names,
// where the measurements and events have got to, and the measurements behind the last analysis
// verdict), and the overview's summaries and clusters. Read with the same read model as the
// unary calls, so a page shows what the CLI would.
import { create } from "@bufbuild/protobuf";
import {
  EnvironmentSummarySchema,
  EnvironmentViewSchema,
  VerdictMeasurementSchema,
  type EnvironmentSummary,
  type EnvironmentView,
  type VerdictMeasurement,
} from "../../gen/krane/ctrl/v1/live_pb.js";
import { ConfigEntrySchema, SecretEntrySchema } from "../../gen/krane/ctrl/v1/config_pb.js";
import type { Cluster } from "../../gen/krane/ctrl/v1/api_pb.js";
import type { MeasurementSource } from "../../contracts/analysis.js";
import {
  wavesOf,
  type AnalysisRules,
  type ProgressiveSpec,
  type ProgressiveState,
} from "../../rollout/progressive/index.js";
import { p99Ms, successRate } from "../../rollout/progressive/judge.js";
import { clusterMsg } from "../api/convert.js";
import { environmentStatusMsg, type ApiDeps } from "../api/handlers.js";
import { eventMsg } from "../api/instance-events.js";
import { rolloutStatusMsg } from "../api/rollout.js";
import type { Store } from "../db/store.js";
import { clusterLag, listClusters } from "../read/clusters.js";
import { listConfig, listSecrets } from "../read/environment-objects.js";
import { latestInstanceEvents } from "../read/instance-events.js";
import { measuredThrough, quantileMs } from "../read/metrics.js";
import { environmentSummaries, type EnvironmentSummaryView } from "../read/overview.js";
import { rolloutStatus, type ProgressiveView } from "../read/rollout.js";
import type { EnvironmentRef } from "../validate/types.js";
import { DomainError, notFound } from "../errors.js";
import { FinalError } from "./follower.js";
import type { LiveSource } from "./hub.js";

export interface ViewDeps extends Pick<ApiDeps, "store" | "exposure"> {
  /** Where the analysis verdicts' measurements are read (ctrl's stored reports). */
  measurements: MeasurementSource;
}

/** The rules of the analysis that gave the last verdict: the current step's, else the last analysis step before it, else the wave gate's. */
export function verdictRules(spec: ProgressiveSpec, st: ProgressiveState): AnalysisRules | null {
  if (st.gate && spec.waves?.gate.type === "analysis") return spec.waves.gate.rules;
  if (spec.strategy.type === "canary") {
    const steps = spec.strategy.steps;
    for (let i = Math.min(st.step, steps.length - 1); i >= 0; i--) {
      const s = steps[i];
      if (s?.type === "analysis") return s.rules;
    }
  }
  return spec.waves?.gate.type === "analysis" ? spec.waves.gate.rules : null;
}

/**
 * The measurements of the canary and the stable revision over the check's interval before the
 * last verdict, in the regions of the wave it judged: what the verdict was made from (the window
 * is the rules' interval, which is the check's as long as no check was late).
 */
async function verdictMeasurements(
  source: MeasurementSource,
  environmentId: string,
  p: ProgressiveView,
  regions: readonly string[],
): Promise<VerdictMeasurement[]> {
  const st = p.state;
  const v = st.lastVerdict;
  if (v === null || st.canary === null) return [];
  const rules = verdictRules(p.spec, st);
  const interval = (rules?.intervalSeconds ?? 30) * 1000;
  const since = v.at - interval;
  const wave = wavesOf(p.spec, regions)[st.wave];
  const ids = st.stable === null ? [st.canary] : [st.canary, st.stable];
  const samples = await source.samples(environmentId, ids, since, wave);
  return ids.flatMap((id) => {
    const s = samples.get(id);
    if (!s) return [];
    const rate = successRate(s);
    const p99 = p99Ms(s);
    return [
      create(VerdictMeasurementSchema, {
        deploymentId: id,
        role: id === st.canary ? "canary" : "stable",
        fromUnixMs: BigInt(s.fromMs),
        toUnixMs: BigInt(s.toMs),
        requests: BigInt(s.requests),
        responses5xx: BigInt(s.byClass["5xx"]),
        successRatePercent: rate ?? undefined,
        p50Ms: quantileMs(s.latencyBuckets, 0.5) ?? undefined,
        p99Ms: p99 === null ? undefined : p99 === Infinity ? -1 : p99,
      }),
    ];
  });
}

/** The environment's whole view (ids or slugs in `ref`). */
export async function environmentView(d: ViewDeps, ref: EnvironmentRef): Promise<EnvironmentView> {
  const db = d.store.db;
  const status = await environmentStatusMsg(d, ref);
  const rollout = await rolloutStatus(db, ref, Date.now());
  const envId = rollout.environment.environment.id;
  const latest = await latestInstanceEvents(db, { environmentId: envId });
  const config = await listConfig(db, ref);
  const secrets = await listSecrets(db, ref);
  const newestEvent = await db
    .selectFrom("instance_events")
    .select((eb) => eb.fn.max("seq").as("seq"))
    .where("environment_id", "=", envId)
    .executeTakeFirst();
  const regions = rollout.regions.map((r) => r.region);
  return create(EnvironmentViewSchema, {
    status,
    rollout: rolloutStatusMsg(rollout),
    latestEvents: latest.map(eventMsg),
    config: config.map((c) =>
      create(ConfigEntrySchema, { key: c.key, value: c.value, updatedAtUnixMs: BigInt(c.updated_at) }),
    ),
    secrets: secrets.map((s) =>
      create(SecretEntrySchema, {
        key: s.key,
        source: s.source,
        externalPath: s.externalPath,
        updatedAtUnixMs: BigInt(s.updatedAt),
      }),
    ),
    measuredThroughUnixMs: BigInt(await measuredThrough(db, envId)),
    eventsCursor: `e${Number(newestEvent?.seq ?? 0)}`,
    verdictMeasurements:
      rollout.progressive === null
        ? []
        : await verdictMeasurements(d.measurements, envId, rollout.progressive, regions),
  });
}

export function summaryMsg(s: EnvironmentSummaryView): EnvironmentSummary {
  return create(EnvironmentSummarySchema, {
    environmentId: s.environmentId,
    workspaceId: s.workspaceId,
    workspace: s.workspace,
    project: s.project,
    environment: s.environment,
    regions: s.regions,
    updatedAtUnixMs: BigInt(s.updatedAt),
    revision: BigInt(s.revision),
    image: s.image,
    running: s.running,
    desired: s.desired,
    state: s.state,
  });
}

/** Summaries of the given environments (all when absent), as messages. */
export async function summaries(store: Store, ids?: readonly string[]): Promise<EnvironmentSummary[]> {
  return (await environmentSummaries(store.db, ids)).map(summaryMsg);
}

/** Every cluster with its backlog, as ListClusters answers (clusters are few: one read). */
export async function clusters(store: Store): Promise<Cluster[]> {
  const rows = (await listClusters(store.db)).items;
  const lag = await clusterLag(store.db, rows);
  return rows.map((c) => clusterMsg(c, lag.get(c.id)));
}

/** The live hub's source: these views, read by id; an environment gone ends its streams. */
export function liveSource(d: ViewDeps): LiveSource {
  return {
    async environment(id) {
      const row = await d.store.db
        .selectFrom("environments")
        .select(["workspace_id", "project_id", "deleting_at"])
        .where("id", "=", id)
        .executeTakeFirst();
      if (!row) throw new FinalError(notFound(`environment ${id}`));
      try {
        return await environmentView(d, { workspace: row.workspace_id, project: row.project_id, environment: id });
      } catch (err) {
        // Deleted, or being deleted, since: no retry brings it back.
        if (err instanceof DomainError) throw new FinalError(err);
        throw err;
      }
    },
    summaries: (ids) => summaries(d.store, ids),
    clusters: () => clusters(d.store),
  };
}
