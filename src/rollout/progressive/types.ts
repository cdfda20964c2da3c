// The shapes of progressive delivery: the strategy an environment declares (canary steps,
// blue-green, region waves), the state a rollout keeps between decisions, what a decision reads
// (per-region observations, a command, an analysis verdict, now) and what it answers (replica
// targets and routing weights per region, events, when to look again). Plain JSON: ctrl stores
// the spec and the state as they are.

/** Rules an analysis step (or a wave gate) judges the new revision's sample by. */
export interface AnalysisRules {
  /** Minimum share of non-5xx answers, in percent (null: not judged). */
  readonly minSuccessRatePercent: number | null;
  /** Maximum p99 latency in ms (null: not judged). */
  readonly maxP99Ms: number | null;
  /** Requests the new revision must have answered in a check before it is judged. */
  readonly minRequests: number;
  /** Seconds between checks. */
  readonly intervalSeconds: number;
  /** Passed checks that complete the step. */
  readonly checks: number;
  /** Failed checks tolerated; one more aborts the rollout. */
  readonly failuresAllowed: number;
}

export type CanaryStep =
  | { readonly type: "setWeight"; readonly weight: number }
  /** seconds null: until `krane rollout promote`. */
  | { readonly type: "pause"; readonly seconds: number | null }
  | { readonly type: "analysis"; readonly rules: AnalysisRules };

export interface CanaryStrategy {
  readonly type: "canary";
  readonly steps: readonly CanaryStep[];
  /** Scale the stable revision down as the canary grows (default false: full size until the end). */
  readonly scaleDownStable: boolean;
}

export interface BlueGreenStrategy {
  readonly type: "blueGreen";
  /** Switch by itself this long after the new revision is fully available (null: wait for promote). */
  readonly autoPromoteSeconds: number | null;
  /** How long the previous revision keeps running after the switch (rollback = a route swap). */
  readonly scaleDownDelaySeconds: number;
}

export type WaveGate =
  | { readonly type: "available"; readonly seconds: number }
  | { readonly type: "analysis"; readonly rules: AnalysisRules };

export interface Waves {
  /** Ordered lists of regions; every region of the environment in at most one. */
  readonly regions: readonly (readonly string[])[];
  readonly gate: WaveGate;
}

/** An environment's progressive strategy (stored as JSON; null strategy = the rolling engine). */
export interface ProgressiveSpec {
  readonly strategy: CanaryStrategy | BlueGreenStrategy;
  readonly waves: Waves | null;
  /** A step waiting for the new revision to become available fails after this long. */
  readonly progressDeadlineSeconds: number;
}

export type Phase = "Healthy" | "Progressing" | "Paused" | "Degraded";

export type VerdictResult = "pass" | "fail" | "inconclusive";

export interface Verdict {
  readonly result: VerdictResult;
  /** Names the failing (or missing) measurement. */
  readonly reason: string;
  readonly at: number;
}

export interface ProgressiveState {
  /** The revision serving (deployment id); null before the first rollout. */
  readonly stable: string | null;
  /** The revision being rolled out (or the one aborted); null when none. */
  readonly canary: string | null;
  readonly aborted: boolean;
  readonly phase: Phase;
  readonly reason: string;
  /** Index of the wave in progress (0 without waves). */
  readonly wave: number;
  /** Canary: index of the current step (steps.length = all done). Blue-green: 0 preview, 1 switched. */
  readonly step: number;
  readonly stepStartedAt: number;
  /** Since when the step's (or gate's) condition has held: fully available, or preview ready. */
  readonly readySince: number | null;
  /** Waiting at the wave gate (the wave's regions are complete). */
  readonly gate: boolean;
  /** Promote was asked for and not consumed yet (blue-green switches once available). */
  readonly promoteRequested: boolean;
  /** Analysis of the current step or gate. */
  readonly analysis: {
    readonly passed: number;
    readonly failed: number;
    readonly lastCheckAt: number | null;
    readonly last: Verdict | null;
  };
  /** The latest verdict of any step or gate of this rollout (kept across steps, for status). */
  readonly lastVerdict: Verdict | null;
  /** Blue-green: the revision replaced by the switch, kept running until previousUntil. */
  readonly previous: string | null;
  readonly previousUntil: number | null;
}

export interface RevisionCounts {
  readonly available: number;
  readonly ready: number;
  readonly current: number;
}

export interface RegionObservation {
  readonly region: string;
  /** The environment's replicas in the region. */
  readonly replicas: number;
  /** Counts by deployment id (absent = none). */
  readonly revisions: ReadonlyMap<string, RevisionCounts>;
}

export type Command = "promote" | "abort";

export interface DecisionInput {
  readonly spec: ProgressiveSpec;
  readonly state: ProgressiveState;
  /** The environment's newest deployment (the revision to roll out), or null when it has none. */
  readonly newest: string | null;
  /** Every region of the environment. */
  readonly regions: readonly RegionObservation[];
  readonly command: Command | null;
  /** The verdict of the analysis asked for by analysisRequest(), when one was due. */
  readonly verdict: Verdict | null;
  readonly now: number;
}

export interface RevisionWeight {
  readonly deploymentId: string;
  readonly weight: number;
}

export interface RegionDecision {
  readonly region: string;
  /** Desired replicas per deployment id; revisions not named are scaled to 0. */
  readonly replicas: Readonly<Record<string, number>>;
  /** Weights adding up to 100 (empty: nothing to route yet). */
  readonly weights: readonly RevisionWeight[];
  /** Blue-green: the revision requests carrying the preview header go to. */
  readonly preview: string | null;
}

export interface ProgressiveEvent {
  readonly type: "Normal" | "Warning";
  readonly reason: string;
  readonly message: string;
}

export interface Decision {
  readonly state: ProgressiveState;
  readonly regions: readonly RegionDecision[];
  readonly events: readonly ProgressiveEvent[];
  /** When to decide again without an event (unix ms), or null. */
  readonly wakeAt: number | null;
  /** The decision aborted the rollout (the shell counts it). */
  readonly aborted: boolean;
}

/** What the shell must measure before deciding: the new revision (and stable) since sinceMs. */
export interface AnalysisRequest {
  readonly rules: AnalysisRules;
  readonly canary: string;
  readonly stable: string | null;
  readonly sinceMs: number;
  readonly regions: readonly string[];
}
