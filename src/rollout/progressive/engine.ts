// The progressive engine: one decision of a canary / blue-green / region-wave rollout, pure (no
// I/O, no clock: `now` is an input). ctrl's shell (src/ctrl/rollout/progressive.ts) reads the
// state and the observations, asks analysisRequest() whether a check is due (measuring is I/O,
// so the shell does it and passes the verdict in), calls decide(), and writes what it answers:
// replica targets and routing weights per region, the new state, events and the wake-up time.
//
// Rules (README.md in this folder has the longer story):
//  - a new deployment starts a rollout from step 0 of the first wave; one that arrives mid-rollout
//    replaces the canary (the old canary is scaled to 0), the stable revision stays;
//  - regions of later waves keep the stable revision at 100 % and never get the new one before
//    the gate of the wave in progress has passed; regions of completed waves run it at 100 %;
//  - an abort (command, failed analysis, a step past its deadline) routes 100 % to stable in every
//    region in the same decision and scales the new revision to 0;
//  - weights always add up to 100 and never point at a revision with no available replica while
//    another revision of the region has one (safeWeights);
//  - steps only move forward, except by abort (and promote after an abort retries from step 0).
import type {
  AnalysisRequest,
  AnalysisRules,
  CanaryStrategy,
  Decision,
  DecisionInput,
  ProgressiveEvent,
  ProgressiveSpec,
  ProgressiveState,
  RegionDecision,
  RegionObservation,
  RevisionWeight,
} from "./types.js";

export const EMPTY_ANALYSIS: ProgressiveState["analysis"] = { passed: 0, failed: 0, lastCheckAt: null, last: null };

export const INITIAL_STATE: ProgressiveState = {
  stable: null,
  canary: null,
  aborted: false,
  phase: "Healthy",
  reason: "",
  wave: 0,
  step: 0,
  stepStartedAt: 0,
  readySince: null,
  gate: false,
  promoteRequested: false,
  analysis: EMPTY_ANALYSIS,
  lastVerdict: null,
  previous: null,
  previousUntil: null,
};

/** The environment's regions in wave order; regions no wave names form a last wave. */
export function wavesOf(spec: ProgressiveSpec, regions: readonly string[]): string[][] {
  if (spec.waves === null) return [[...regions]];
  const present = new Set(regions);
  const out = spec.waves.regions.map((w) => w.filter((r) => present.has(r))).filter((w) => w.length > 0);
  const named = new Set(out.flat());
  const rest = regions.filter((r) => !named.has(r));
  if (rest.length > 0) out.push(rest);
  return out.length > 0 ? out : [[]];
}

/** The canary's weight at a step: the last setWeight at or before it (100 once the steps are done). */
export function weightAt(strategy: CanaryStrategy, step: number): number {
  if (step >= strategy.steps.length) return 100;
  for (let i = step; i >= 0; i--) {
    const s = strategy.steps[i];
    if (s?.type === "setWeight") return s.weight;
  }
  return 0;
}

/** Canary replicas for its share of a region: rounded up, at least 1 when it has any weight. */
export function canaryReplicas(replicas: number, weight: number): number {
  if (weight <= 0 || replicas <= 0) return 0;
  if (weight >= 100) return replicas;
  return Math.min(replicas, Math.max(1, Math.ceil((replicas * weight) / 100)));
}

function available(o: RegionObservation | undefined, id: string | null): number {
  if (o === undefined || id === null) return 0;
  return o.revisions.get(id)?.available ?? 0;
}

/**
 * Weights that add up to 100 and send nothing to a revision with no available replica while
 * another one has some: the share of such a revision goes to the others in proportion (to the
 * first available one when they have none).
 */
export function safeWeights(weights: readonly RevisionWeight[], availableOf: (id: string) => number): RevisionWeight[] {
  const ws = weights
    .filter((w, i) => weights.findIndex((x) => x.deploymentId === w.deploymentId) === i)
    .map((w) => ({ ...w, weight: Math.max(0, Math.min(100, Math.round(w.weight))) }));
  if (ws.length === 0) return [];
  const live = ws.filter((w) => availableOf(w.deploymentId) > 0);
  if (live.length === 0) return normalise(ws);
  const liveWeight = live.reduce((a, w) => a + w.weight, 0);
  if (liveWeight === 0) {
    const first = live[0] as RevisionWeight;
    return ws.map((w) => ({ deploymentId: w.deploymentId, weight: w.deploymentId === first.deploymentId ? 100 : 0 }));
  }
  return normalise(ws.map((w) => (availableOf(w.deploymentId) > 0 ? w : { ...w, weight: 0 })));
}

/** Integer weights in the same proportions adding up to exactly 100 (largest remainder). */
function normalise(ws: readonly RevisionWeight[]): RevisionWeight[] {
  const sum = ws.reduce((a, w) => a + w.weight, 0);
  if (sum === 0) return ws.map((w, i) => ({ deploymentId: w.deploymentId, weight: i === 0 ? 100 : 0 }));
  const exact = ws.map((w) => (w.weight * 100) / sum);
  const out = exact.map((x) => Math.floor(x));
  let left = 100 - out.reduce((a, b) => a + b, 0);
  const order = exact.map((x, i) => [x - Math.floor(x), i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  for (const [, i] of order) {
    if (left <= 0) break;
    out[i] = (out[i] ?? 0) + 1;
    left--;
  }
  return ws.map((w, i) => ({ deploymentId: w.deploymentId, weight: out[i] ?? 0 }));
}

function stepName(spec: ProgressiveSpec, step: number): string {
  const st = spec.strategy;
  if (st.type === "blueGreen") return step === 0 ? "preview" : "switch";
  const s = st.steps[step];
  if (s === undefined) return "full rollout";
  if (s.type === "setWeight") return `setWeight ${s.weight}`;
  if (s.type === "pause") return s.seconds === null ? "pause (until promote)" : `pause ${s.seconds}s`;
  return "analysis";
}

/** The rules of the analysis running now (a step or a wave gate), or null. */
function currentRules(spec: ProgressiveSpec, s: ProgressiveState): AnalysisRules | null {
  if (s.canary === null || s.aborted) return null;
  if (s.gate) return spec.waves?.gate.type === "analysis" ? spec.waves.gate.rules : null;
  if (spec.strategy.type !== "canary") return null;
  const step = spec.strategy.steps[s.step];
  return step?.type === "analysis" ? step.rules : null;
}

/** Whether the shell must measure before deciding, and what. */
export function analysisRequest(
  spec: ProgressiveSpec,
  s: ProgressiveState,
  regions: readonly string[],
  now: number,
): AnalysisRequest | null {
  const rules = currentRules(spec, s);
  if (rules === null || s.canary === null) return null;
  const since = s.analysis.lastCheckAt ?? s.stepStartedAt;
  if (now < since + rules.intervalSeconds * 1000) return null;
  const waves = wavesOf(spec, regions);
  return { rules, canary: s.canary, stable: s.stable, sinceMs: since, regions: waves[s.wave] ?? [] };
}

function stateKey(s: ProgressiveState): string {
  return JSON.stringify([s.canary, s.aborted, s.wave, s.step, s.gate, s.analysis.lastCheckAt]);
}

export function decide(input: DecisionInput): Decision {
  const { spec, now } = input;
  const regionNames = input.regions.map((r) => r.region);
  const obs = new Map(input.regions.map((r) => [r.region, r]));
  const waves = wavesOf(spec, regionNames);
  const events: ProgressiveEvent[] = [];
  let s: ProgressiveState = input.state;
  let aborted = false;
  const set = (patch: Partial<ProgressiveState>): void => {
    s = { ...s, ...patch };
  };
  const startStep = (patch: Partial<ProgressiveState>): void =>
    set({ stepStartedAt: now, readySince: null, analysis: EMPTY_ANALYSIS, promoteRequested: false, ...patch });
  const abort = (reason: string): void => {
    set({ aborted: true, phase: "Degraded", reason, gate: false, promoteRequested: false });
    events.push({ type: "Warning", reason: "RolloutAborted", message: reason });
    aborted = true;
  };

  // The previous revision of a blue-green switch leaves when its window has passed.
  if (s.previous !== null && (s.previousUntil === null || now >= s.previousUntil))
    set({ previous: null, previousUntil: null });

  // A new deployment, or the one in flight deleted.
  const newest = input.newest;
  if (newest === null) {
    if (s.stable !== null || s.canary !== null) s = { ...INITIAL_STATE };
  } else if (newest !== s.stable && newest !== s.canary) {
    if (newest === s.previous && s.stable !== null) {
      // The newest revision is again the one a blue-green switch left within its scale-down
      // window (the newer one was deleted): it still runs at full size in every region, so the
      // routes switch back at once, as an abort within the window does, rather than rolling it
      // out wave by wave as if it were new.
      const from = s.stable;
      set({
        stable: newest,
        canary: null,
        aborted: false,
        gate: false,
        previous: null,
        previousUntil: null,
        phase: "Healthy",
        reason: "",
      });
      events.push({
        type: "Normal",
        reason: "RolledBack",
        message: `${newest} is the newest revision again and was kept within the scale-down window: traffic switched back from ${from} at once`,
      });
    } else if (s.stable === null) {
      set({ stable: newest, canary: null, aborted: false, phase: "Progressing", reason: `rolling out ${newest}` });
      events.push({
        type: "Normal",
        reason: "RolloutStarted",
        message: `first revision ${newest}: no stable revision to compare with, rolled out at once`,
      });
    } else {
      if (s.canary !== null && !s.aborted)
        events.push({
          type: "Normal",
          reason: "CanaryReplaced",
          message: `${newest} replaces ${s.canary} as the new revision`,
        });
      set({
        canary: newest,
        aborted: false,
        wave: 0,
        step: 0,
        gate: false,
        phase: "Progressing",
        reason: `rolling out ${newest}`,
        lastVerdict: null,
      });
      startStep({});
      events.push({
        type: "Normal",
        reason: "RolloutStarted",
        message: `rolling out ${newest} (${spec.strategy.type}), stable ${s.stable}`,
      });
    }
  } else if (newest === s.stable && s.canary !== null) {
    set({ canary: null, aborted: false, gate: false, phase: "Healthy", reason: "" });
  }

  // Commands.
  if (input.command === "abort") {
    if (s.canary !== null && !s.aborted) {
      abort(`aborted by \`krane rollout abort\` at ${stepName(spec, s.step)}; 100 % of traffic back to ${s.stable}`);
    } else if (s.previous !== null && s.stable !== null) {
      const rolledBack = s.stable;
      set({
        stable: s.previous,
        canary: rolledBack,
        previous: null,
        previousUntil: null,
        aborted: true,
        phase: "Degraded",
        reason: `rolled back to ${s.previous} within the scale-down window`,
      });
      events.push({
        type: "Warning",
        reason: "RolledBack",
        message: `traffic switched back to ${s.stable}; ${rolledBack} scaled down (no pod created)`,
      });
      aborted = true;
    } else {
      events.push({
        type: "Normal",
        reason: "NothingToAbort",
        message: "no rollout in progress and no previous revision kept",
      });
    }
  } else if (input.command === "promote") {
    if (s.canary !== null && s.aborted) {
      set({ aborted: false, wave: 0, step: 0, gate: false, phase: "Progressing", reason: `retrying ${s.canary}` });
      startStep({});
      events.push({
        type: "Normal",
        reason: "RolloutRetried",
        message: `promote after an abort: ${s.canary} starts again from step 1`,
      });
    } else if (s.canary !== null) {
      if (s.gate) {
        events.push({ type: "Normal", reason: "Promoted", message: `wave ${s.wave + 1} gate skipped by promote` });
        nextWave();
      } else if (spec.strategy.type === "blueGreen") {
        set({ promoteRequested: true });
        events.push({
          type: "Normal",
          reason: "Promoted",
          message: s.step === 0 ? "switch requested" : "promote: nothing left to skip",
        });
      } else if (s.step < spec.strategy.steps.length) {
        events.push({
          type: "Normal",
          reason: "Promoted",
          message: `step ${s.step + 1} (${stepName(spec, s.step)}) skipped by promote`,
        });
        set({ step: s.step + 1 });
        startStep({});
      }
    }
  }

  function nextWave(): void {
    if (s.wave + 1 >= waves.length) {
      complete();
      return;
    }
    set({ wave: s.wave + 1, step: 0, gate: false });
    startStep({});
    events.push({
      type: "Normal",
      reason: "WaveStarted",
      message: `wave ${s.wave + 1} of ${waves.length}: ${(waves[s.wave] ?? []).join(", ")}`,
    });
  }

  function complete(): void {
    const old = s.stable;
    const keep = spec.strategy.type === "blueGreen" && old !== null && spec.strategy.scaleDownDelaySeconds > 0;
    set({
      stable: s.canary,
      canary: null,
      aborted: false,
      gate: false,
      phase: "Healthy",
      reason: "",
      previous: keep ? old : null,
      previousUntil:
        keep && spec.strategy.type === "blueGreen" ? now + spec.strategy.scaleDownDelaySeconds * 1000 : null,
    });
    events.push({ type: "Normal", reason: "RolloutCompleted", message: `${s.stable} serves 100 % in every region` });
  }

  // The verdict applies only to the step it was measured for.
  let verdict =
    input.verdict !== null && stateKey(s) === stateKey(input.state) && currentRules(spec, s) !== null
      ? input.verdict
      : null;
  let wakeAt: number | null = null;
  const wake = (t: number): void => {
    wakeAt = wakeAt === null ? t : Math.min(wakeAt, t);
  };
  const deadline = s.stepStartedAt + spec.progressDeadlineSeconds * 1000;
  const current = (): string[] => waves[s.wave] ?? [];
  const fullyAvailable = (
    id: string | null,
    target: (r: RegionObservation) => number,
  ): { ok: boolean; lagging: string } => {
    for (const name of current()) {
      const o = obs.get(name);
      if (o === undefined) continue;
      const want = target(o);
      const have = available(o, id);
      if (have < want) return { ok: false, lagging: `${have} of ${want} available in ${name}` };
    }
    return { ok: true, lagging: "" };
  };
  const waitOrFail = (what: string, lagging: string): void => {
    if (now >= deadline)
      abort(`${s.canary} not available after ${spec.progressDeadlineSeconds}s at ${what}: ${lagging}`);
    else wake(deadline);
  };
  const judgeStep = (rules: AnalysisRules, onPass: () => void): boolean => {
    if (verdict !== null) {
      const v = verdict;
      verdict = null; // one verdict counts once
      const a = s.analysis;
      const passed = a.passed + (v.result === "pass" ? 1 : 0);
      const failed = a.failed + (v.result === "fail" ? 1 : 0);
      set({ analysis: { passed, failed, lastCheckAt: v.at, last: v }, lastVerdict: v });
      events.push({
        type: v.result === "fail" ? "Warning" : "Normal",
        reason:
          v.result === "pass" ? "AnalysisPassed" : v.result === "fail" ? "AnalysisFailed" : "AnalysisInconclusive",
        message: v.reason,
      });
      if (failed > rules.failuresAllowed) {
        abort(`analysis failed: ${v.reason}`);
        return true;
      }
      if (passed >= rules.checks) {
        onPass();
        return true;
      }
    }
    wake((s.analysis.lastCheckAt ?? s.stepStartedAt) + rules.intervalSeconds * 1000);
    return false;
  };

  // Progress: at most one transition per iteration, bounded.
  for (let guard = 0; guard < 200 && s.canary !== null && !s.aborted; guard++) {
    const canary = s.canary;
    const before = stateKey(s);
    const st = spec.strategy;
    if (s.gate) {
      const gate = spec.waves?.gate;
      if (gate === undefined) {
        nextWave();
      } else if (gate.type === "available") {
        const full = fullyAvailable(canary, (o) => o.replicas);
        if (!full.ok) {
          set({ readySince: null });
          waitOrFail(`the gate of wave ${s.wave + 1}`, full.lagging);
        } else {
          const since = s.readySince ?? now;
          set({ readySince: since });
          if (now >= since + gate.seconds * 1000) {
            events.push({
              type: "Normal",
              reason: "WaveGatePassed",
              message: `wave ${s.wave + 1} available for ${gate.seconds}s`,
            });
            nextWave();
          } else wake(since + gate.seconds * 1000);
        }
      } else if (judgeStep(gate.rules, () => nextWave())) {
        // judged
      }
    } else if (st.type === "canary") {
      const step = st.steps[s.step];
      if (step === undefined) {
        const full = fullyAvailable(canary, (o) => o.replicas);
        if (full.ok) {
          events.push({
            type: "Normal",
            reason: "WaveCompleted",
            message: `${canary} serves 100 % in ${current().join(", ")}`,
          });
          if (s.wave + 1 < waves.length) startStep({ gate: true });
          else complete();
        } else waitOrFail("the full rollout", full.lagging);
      } else if (step.type === "setWeight") {
        const full = fullyAvailable(canary, (o) => canaryReplicas(o.replicas, step.weight));
        if (full.ok) {
          events.push({
            type: "Normal",
            reason: "StepCompleted",
            message: `step ${s.step + 1}/${st.steps.length}: weight ${step.weight} %`,
          });
          set({ step: s.step + 1 });
          startStep({});
        } else waitOrFail(`setWeight ${step.weight}`, full.lagging);
      } else if (step.type === "pause") {
        if (step.seconds !== null && now >= s.stepStartedAt + step.seconds * 1000) {
          events.push({
            type: "Normal",
            reason: "StepCompleted",
            message: `step ${s.step + 1}/${st.steps.length}: paused ${step.seconds}s`,
          });
          set({ step: s.step + 1 });
          startStep({});
        } else if (step.seconds !== null) wake(s.stepStartedAt + step.seconds * 1000);
      } else {
        judgeStep(step.rules, () => {
          events.push({
            type: "Normal",
            reason: "StepCompleted",
            message: `step ${s.step + 1}/${st.steps.length}: analysis passed`,
          });
          set({ step: s.step + 1 });
          startStep({});
        });
      }
    } else if (s.step === 0) {
      const full = fullyAvailable(canary, (o) => o.replicas);
      if (!full.ok) {
        waitOrFail("the preview", full.lagging);
      } else {
        const since = s.readySince ?? now;
        set({ readySince: since });
        const auto = st.autoPromoteSeconds;
        if (s.promoteRequested || (auto !== null && now >= since + auto * 1000)) {
          events.push({
            type: "Normal",
            reason: "Switched",
            message: `${canary} takes 100 % of traffic in ${current().join(", ")}`,
          });
          set({ step: 1 });
          startStep({});
        } else if (auto !== null) wake(since + auto * 1000);
      }
    } else {
      if (s.wave + 1 < waves.length) startStep({ gate: true });
      else complete();
    }
    if (stateKey(s) === before) break;
  }

  // Phase.
  if (s.canary !== null && !s.aborted) {
    const paused =
      !s.gate &&
      ((spec.strategy.type === "canary" && spec.strategy.steps[s.step]?.type === "pause") ||
        (spec.strategy.type === "blueGreen" && s.step === 0 && s.readySince !== null));
    set({
      phase: paused ? "Paused" : "Progressing",
      reason: `${stepName(spec, s.step)}${s.gate ? `, gate of wave ${s.wave + 1}` : ""}`,
    });
  } else if (s.canary === null && s.stable !== null) {
    const stable = s.stable;
    const ok = input.regions.every((o) => available(o, stable) >= o.replicas);
    set({ phase: ok ? "Healthy" : "Progressing", reason: ok ? "" : `waiting for ${stable} to be available` });
  }
  if (s.previousUntil !== null) wake(s.previousUntil);

  return { state: s, regions: input.regions.map((o) => regionDecision(spec, s, waves, o)), events, wakeAt, aborted };
}

/** Replica targets and weights of one region for a state (pure; also used by tests). */
export function regionDecision(
  spec: ProgressiveSpec,
  s: ProgressiveState,
  waves: readonly (readonly string[])[],
  o: RegionObservation,
): RegionDecision {
  const R = o.replicas;
  const replicas: Record<string, number> = {};
  const weights: RevisionWeight[] = [];
  let preview: string | null = null;
  const { stable, canary } = s;
  if (s.previous !== null && s.previous !== stable && s.previous !== canary) replicas[s.previous] = R;
  if (stable !== null) replicas[stable] = R;
  const waveOf = waves.findIndex((w) => w.includes(o.region));
  const active = canary !== null && !s.aborted && canary !== stable;
  if (canary !== null && canary !== stable) replicas[canary] = 0;
  if (!active || canary === null || waveOf > s.wave || waveOf < 0) {
    if (stable !== null) weights.push({ deploymentId: stable, weight: 100 });
  } else {
    const done = waveOf < s.wave || s.gate;
    const st = spec.strategy;
    if (st.type === "canary") {
      const w = done ? 100 : weightAt(st, s.step);
      const c = canaryReplicas(R, w);
      replicas[canary] = c;
      if (stable !== null && st.scaleDownStable) {
        const cover = Math.max(R - available(o, canary), w < 100 ? Math.ceil((R * (100 - w)) / 100) : 0);
        replicas[stable] = Math.max(0, Math.min(R, cover));
      }
      if (stable !== null) weights.push({ deploymentId: stable, weight: 100 - w });
      weights.push({ deploymentId: canary, weight: w });
    } else {
      replicas[canary] = R;
      const switched = done || s.step >= 1;
      if (stable !== null) weights.push({ deploymentId: stable, weight: switched ? 0 : 100 });
      weights.push({ deploymentId: canary, weight: switched ? 100 : 0 });
      if (!switched) preview = canary;
    }
  }
  if (s.previous !== null && s.previous !== stable && !weights.some((w) => w.deploymentId === s.previous))
    weights.push({ deploymentId: s.previous, weight: 0 });
  return { region: o.region, replicas, weights: safeWeights(weights, (id) => available(o, id)), preview };
}
