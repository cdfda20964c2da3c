// RolloutService (proto/krane/ctrl/v1/rollout.proto): validate (→ InvalidArgument naming the
// field), change the spec in the store, run the driver's passes, and answer with the rollout
// status as it stands after them.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  RegionRolloutSchema,
  RolloutConditionSchema,
  RolloutEventSchema,
  RolloutRevisionSchema,
  RolloutService,
  RolloutStatusSchema,
  ProgressiveStatusSchema,
  ProgressiveWeightSchema,
  RegionWeightsSchema,
  WarmRevisionSchema,
  type ProgressiveStatus,
  type RolloutStatus,
} from "../../gen/krane/ctrl/v1/rollout_pb.js";
import { PREVIEW_HEADER, PREVIEW_HEADER_VALUE } from "../../contracts/routing.js";
import type { Store } from "../db/store.js";
import { invalidArgument } from "../errors.js";
import { findEnvironment } from "../read/tenancy.js";
import { rolloutStatus, type ProgressiveView, type RolloutView } from "../read/rollout.js";
import { regionName, validateEnvironmentRef } from "../validate/api.js";
import * as rules from "../validate/rules.js";
import type { EnvironmentRef } from "../validate/types.js";
import {
  restartRollout,
  rollbackEnvironment,
  scaleEnvironment,
  setPaused,
  setProgressiveCommand,
  undoRollout,
  unpinEnvironment,
} from "../rollout/actions.js";
import type { RolloutDriver } from "../rollout/driver.js";

export interface RolloutServiceDeps {
  store: Store;
  driver: RolloutDriver;
}

function ms(iso: string): bigint {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? 0n : BigInt(t);
}

export function rolloutStatusMsg(v: RolloutView): RolloutStatus {
  return create(RolloutStatusSchema, {
    environmentId: v.environment.environment.id,
    strategy: v.environment.environment.strategy,
    regions: v.regions.map((r) =>
      create(RegionRolloutSchema, {
        region: r.region,
        replicas: r.replicas,
        paused: r.paused,
        targetDeploymentId: r.targetDeploymentId ?? "",
        currentReplicas: r.status.replicas,
        updatedReplicas: r.status.updatedReplicas,
        readyReplicas: r.status.readyReplicas,
        availableReplicas: r.status.availableReplicas,
        unavailableReplicas: r.status.unavailableReplicas,
        conditions: r.conditions.map((c) =>
          create(RolloutConditionSchema, {
            type: c.type,
            status: c.status,
            reason: c.reason,
            message: c.message,
            lastUpdateUnixMs: ms(c.lastUpdateTime),
            lastTransitionUnixMs: ms(c.lastTransitionTime),
          }),
        ),
        revisions: r.revisions.map((x) =>
          create(RolloutRevisionSchema, {
            deploymentId: x.deployment.id,
            revision: BigInt(x.revision ?? 0),
            deploymentRevision: BigInt(x.deployment.revision),
            image: x.deployment.image,
            createdAtUnixMs: BigInt(x.deployment.created_at),
            desiredReplicas: x.desiredReplicas,
            currentReplicas: x.currentReplicas,
            readyReplicas: x.readyReplicas,
            availableReplicas: x.availableReplicas,
            target: x.target,
            warm: x.warm,
          }),
        ),
        events: r.events.map((e) =>
          create(RolloutEventSchema, { atUnixMs: BigInt(e.at), type: e.type, reason: e.reason, message: e.message }),
        ),
        observed: r.observed,
        complete: r.complete,
        deadlineExceeded: r.failed,
        message: r.message,
        ...(r.warm !== null
          ? {
              warm: create(WarmRevisionSchema, {
                deploymentId: r.warm.deploymentId,
                deploymentRevision: BigInt(r.warm.revision),
                replicas: r.warm.replicas,
                untilUnixMs: BigInt(r.warm.until ?? 0),
              }),
            }
          : {}),
        weights: r.weights.map((w) =>
          create(ProgressiveWeightSchema, { deploymentId: w.deploymentId, weight: w.weight }),
        ),
      }),
    ),
    pinnedDeploymentId: v.pinned?.deploymentId ?? "",
    pinnedRevision: BigInt(v.pinned?.revision ?? 0),
    warmWindowSeconds: v.environment.environment.warm_window_seconds,
    ...(v.progressive !== null ? { progressive: progressiveStatusMsg(v.progressive) } : {}),
  });
}

export function progressiveStatusMsg(p: ProgressiveView): ProgressiveStatus {
  const st = p.state;
  const strategy = p.spec.strategy;
  const steps = strategy.type === "canary" ? strategy.steps.length : 2;
  const stepName =
    strategy.type === "blueGreen"
      ? st.step === 0
        ? "preview"
        : "switched"
      : (() => {
          const s = strategy.steps[st.step];
          if (s === undefined) return "full rollout";
          if (s.type === "setWeight") return `setWeight ${s.weight}`;
          if (s.type === "pause") return s.seconds === null ? "pause (until promote)" : `pause ${s.seconds}s`;
          return "analysis";
        })();
  return create(ProgressiveStatusSchema, {
    strategy: strategy.type,
    phase: st.phase,
    reason: st.reason,
    stableDeploymentId: st.stable ?? "",
    canaryDeploymentId: st.canary ?? "",
    aborted: st.aborted,
    step: Math.min(st.step, steps) + 1,
    steps,
    stepName,
    wave: st.wave + 1,
    waves: p.waves.length,
    atWaveGate: st.gate,
    weights: [...p.routing].map(([region, r]) =>
      create(RegionWeightsSchema, {
        region,
        weights: r.weights.map((w) =>
          create(ProgressiveWeightSchema, { deploymentId: w.deploymentId, weight: w.weight }),
        ),
        previewDeploymentId: r.preview ?? "",
      }),
    ),
    lastAnalysis: st.lastVerdict?.result ?? "",
    lastAnalysisReason: st.lastVerdict?.reason ?? "",
    lastAnalysisUnixMs: BigInt(st.lastVerdict?.at ?? 0),
    previousDeploymentId: st.previous ?? "",
    previousUntilUnixMs: BigInt(st.previousUntil ?? 0),
    previewHeader: `${PREVIEW_HEADER}: ${PREVIEW_HEADER_VALUE}`,
  });
}

export function rolloutServiceImpl({ store, driver }: RolloutServiceDeps): ServiceImpl<typeof RolloutService> {
  const status = async (ref: EnvironmentRef): Promise<RolloutStatus> =>
    rolloutStatusMsg(await rolloutStatus(store.db, ref, Date.now()));
  const after = async (ref: EnvironmentRef, environmentId: string): Promise<RolloutStatus> => {
    await driver.environmentChanged(environmentId);
    return status(ref);
  };
  return {
    async scale(req) {
      const ref = validateEnvironmentRef(req);
      const region = req.region === "" ? null : regionName("region", req.region);
      const replicas = rules.intRange("replicas", req.replicas, 0, rules.LIMITS.replicasMax);
      return { status: await after(ref, await scaleEnvironment(store, ref, region, replicas)) };
    },
    async pause(req) {
      const ref = validateEnvironmentRef(req);
      return { status: await after(ref, await setPaused(store, ref, true)) };
    },
    async resume(req) {
      const ref = validateEnvironmentRef(req);
      return { status: await after(ref, await setPaused(store, ref, false)) };
    },
    async undo(req) {
      const ref = validateEnvironmentRef(req);
      const to =
        req.toRevision === undefined ? null : rules.intRange("to_revision", req.toRevision, 1, Number.MAX_SAFE_INTEGER);
      return { status: await after(ref, await undoRollout(store, ref, to)) };
    },
    async rollback(req) {
      const ref = validateEnvironmentRef(req);
      if (req.unpin) {
        if (req.instant) throw invalidArgument("instant", "cannot be combined with unpin");
        const { environmentId, unpinned } = await unpinEnvironment(store, ref);
        return {
          deploymentId: "",
          revision: 0n,
          instant: false,
          rollingRegions: [],
          unpinned,
          status: await after(ref, environmentId),
        };
      }
      const p = await rollbackEnvironment(store, ref, req.instant);
      return {
        deploymentId: p.deploymentId,
        revision: BigInt(p.revision),
        instant: p.instant,
        rollingRegions: p.rollingRegions,
        unpinned: false,
        status: await after(ref, p.environmentId),
      };
    },
    async restart(req) {
      const ref = validateEnvironmentRef(req);
      const { environmentId, deploymentId } = await restartRollout(store, ref);
      return { deploymentId, status: await after(ref, environmentId) };
    },
    async history(req) {
      return { status: await status(validateEnvironmentRef(req)) };
    },
    async getRolloutStatus(req) {
      return { status: await status(validateEnvironmentRef(req)) };
    },
    async promote(req) {
      const ref = validateEnvironmentRef(req);
      const { environment } = await findEnvironment(store.db, ref);
      await setProgressiveCommand(store, environment, "promote");
      return { status: await after(ref, environment.id) };
    },
    async abort(req) {
      const ref = validateEnvironmentRef(req);
      const { environment } = await findEnvironment(store.db, ref);
      await setProgressiveCommand(store, environment, "abort");
      return { status: await after(ref, environment.id) };
    },
  };
}
