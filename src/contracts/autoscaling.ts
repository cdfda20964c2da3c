// The autoscaling policy of an environment (or of one of its regions): what ctrl stores and
// streams to the agents, what the agent's autoscaler decides within, and what the CLI parses. One
// shape and one validation for all of them, so ctrl and the agent refuse the same policies with
// the same field names.

/** The most replicas an environment may have in one region (ctrl's limit, the agent's check). */
export const REGION_REPLICAS_MAX = 1000;
/** Requests a region's sentinels hold for an environment at zero replicas, unless configured. */
export const DEFAULT_HELD_REQUESTS = 1_000;
/** How long a held request waits for an instance before it is answered 503, unless configured. */
export const DEFAULT_HELD_TIMEOUT_SECONDS = 30;
/** Like the HorizontalPodAutoscaler's defaults: scale up at once, down after five quiet minutes. */
export const DEFAULT_SCALE_UP_WINDOW_SECONDS = 0;
export const DEFAULT_SCALE_DOWN_WINDOW_SECONDS = 300;

export const AUTOSCALE_BOUNDS = {
  concurrencyMax: 100_000,
  cpuPercentMax: 1_000,
  windowSecondsMax: 3_600,
  idleSecondsMin: 30,
  idleSecondsMax: 7 * 24 * 3_600,
  heldRequestsMax: 100_000,
  heldTimeoutSecondsMax: 600,
} as const;

export interface ScaleToZero {
  /** No request at any of the region's sentinels for this long: the region goes to 0. */
  readonly idleSeconds: number;
  /** Requests held per environment and region while it wakes; over this, 503 with Retry-After. */
  readonly maxHeldRequests: number;
  /** A held request that got no instance within this is answered 503 with Retry-After. */
  readonly heldTimeoutSeconds: number;
}

export interface AutoscalePolicy {
  readonly minReplicas: number;
  readonly maxReplicas: number;
  /** Target in-flight requests per instance, measured by the sentinels; null: not by concurrency. */
  readonly concurrencyTarget: number | null;
  /** Target CPU use in percent of the instance's request; null: not by CPU. */
  readonly cpuTargetPercent: number | null;
  /** A higher count is taken only once every recommendation of this window asked for it. */
  readonly scaleUpWindowSeconds: number;
  /** A lower count is taken only once every recommendation of this window allowed it. */
  readonly scaleDownWindowSeconds: number;
  /** At most this many replicas more or fewer per decision; null: no limit. */
  readonly maxStep: number | null;
  /** Null: the region keeps at least minReplicas (≥ 1). */
  readonly scaleToZero: ScaleToZero | null;
}

/** A refused policy: the field at fault (snake_case, as on the wire) and why. */
export interface PolicyProblem {
  readonly field: string;
  readonly problem: string;
}

function intIn(field: string, v: number, min: number, max: number): PolicyProblem | null {
  if (!Number.isInteger(v)) return { field, problem: "must be a whole number" };
  if (v < min || v > max) return { field, problem: `must be between ${min} and ${max}` };
  return null;
}

/**
 * The first problem of a policy, or null when it is valid. `replicasLimit` is the most replicas
 * the environment may have in a region; `prefix` names the field path (e.g. "autoscale").
 */
export function policyProblem(p: AutoscalePolicy, replicasLimit: number, prefix = "autoscale"): PolicyProblem | null {
  const f = (name: string): string => `${prefix}.${name}`;
  const checks: (PolicyProblem | null)[] = [
    intIn(f("min_replicas"), p.minReplicas, 0, replicasLimit),
    intIn(f("max_replicas"), p.maxReplicas, 1, replicasLimit),
  ];
  for (const c of checks) if (c) return c;
  if (p.maxReplicas > replicasLimit)
    return { field: f("max_replicas"), problem: `must be at most the environment's limit of ${replicasLimit}` };
  if (p.minReplicas > p.maxReplicas)
    return { field: f("min_replicas"), problem: `must not be above max_replicas (${p.maxReplicas})` };
  if (p.concurrencyTarget === null && p.cpuTargetPercent === null)
    return { field: f("concurrency"), problem: "give a concurrency target, a cpu target or both" };
  const more: (PolicyProblem | null)[] = [
    p.concurrencyTarget === null
      ? null
      : intIn(f("concurrency"), p.concurrencyTarget, 1, AUTOSCALE_BOUNDS.concurrencyMax),
    p.cpuTargetPercent === null ? null : intIn(f("cpu"), p.cpuTargetPercent, 1, AUTOSCALE_BOUNDS.cpuPercentMax),
    intIn(f("scale_up_window_seconds"), p.scaleUpWindowSeconds, 0, AUTOSCALE_BOUNDS.windowSecondsMax),
    intIn(f("scale_down_window_seconds"), p.scaleDownWindowSeconds, 0, AUTOSCALE_BOUNDS.windowSecondsMax),
    p.maxStep === null ? null : intIn(f("max_step"), p.maxStep, 1, replicasLimit),
  ];
  for (const c of more) if (c) return c;
  const z = p.scaleToZero;
  if (z === null) {
    if (p.minReplicas === 0)
      return { field: f("min_replicas"), problem: "0 needs scale-to-zero (--scale-to-zero idle=…)" };
    return null;
  }
  if (p.minReplicas !== 0)
    return {
      field: f("scale_to_zero"),
      problem: `cannot be combined with min_replicas ${p.minReplicas}: scale-to-zero needs min_replicas 0`,
    };
  return (
    intIn(
      f("scale_to_zero.idle_seconds"),
      z.idleSeconds,
      AUTOSCALE_BOUNDS.idleSecondsMin,
      AUTOSCALE_BOUNDS.idleSecondsMax,
    ) ??
    intIn(f("scale_to_zero.max_held_requests"), z.maxHeldRequests, 1, AUTOSCALE_BOUNDS.heldRequestsMax) ??
    intIn(f("scale_to_zero.held_timeout_seconds"), z.heldTimeoutSeconds, 1, AUTOSCALE_BOUNDS.heldTimeoutSecondsMax)
  );
}

/** The policy previews get: one instance at most, asleep after 15 idle minutes. */
export const PREVIEW_POLICY: AutoscalePolicy = {
  minReplicas: 0,
  maxReplicas: 1,
  concurrencyTarget: 100,
  cpuTargetPercent: null,
  scaleUpWindowSeconds: DEFAULT_SCALE_UP_WINDOW_SECONDS,
  scaleDownWindowSeconds: DEFAULT_SCALE_DOWN_WINDOW_SECONDS,
  maxStep: null,
  scaleToZero: {
    idleSeconds: 900,
    maxHeldRequests: DEFAULT_HELD_REQUESTS,
    heldTimeoutSeconds: DEFAULT_HELD_TIMEOUT_SECONDS,
  },
};

/** A region's own policy where it has one, else the environment's (null: no autoscaling there). */
export function regionPolicy(
  environment: AutoscalePolicy | null,
  overrides: ReadonlyMap<string, AutoscalePolicy | null>,
  region: string,
): AutoscalePolicy | null {
  return overrides.has(region) ? (overrides.get(region) ?? null) : environment;
}

// ------------------------------------------------------------------ the CLI's spelling

/** "30s", "5m", "1h", "1h30m" or a bare number of seconds, as whole seconds; null when malformed. */
export function parseDurationSeconds(v: string): number | null {
  const s = v.trim();
  if (/^\d+$/.test(s)) return Number(s);
  const m = /^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/.exec(s);
  if (!m || s === "") return null;
  return Number(m[1] ?? 0) * 3600 + Number(m[2] ?? 0) * 60 + Number(m[3] ?? 0);
}

/** What `--autoscale k=v,…` sets; absent keys keep their stored (or default) values. */
export interface AutoscaleSpec {
  minReplicas?: number;
  maxReplicas?: number;
  concurrencyTarget?: number;
  cpuTargetPercent?: number;
  scaleUpWindowSeconds?: number;
  scaleDownWindowSeconds?: number;
  maxStep?: number;
}

const SPEC_KEYS = ["min", "max", "concurrency", "cpu", "up", "down", "step"] as const;

/**
 * Parses `min=1,max=20,concurrency=50,cpu=80%,up=0s,down=5m,step=4`. Throws an Error naming the
 * flag and key at fault.
 */
export function parseAutoscaleSpec(flag: string, v: string): AutoscaleSpec {
  const out: AutoscaleSpec = {};
  const seen = new Set<string>();
  for (const part of v.split(",")) {
    const eq = part.indexOf("=");
    const key = (eq < 0 ? part : part.slice(0, eq)).trim();
    const value = eq < 0 ? "" : part.slice(eq + 1).trim();
    if (!(SPEC_KEYS as readonly string[]).includes(key))
      throw new Error(`${flag}: unknown key "${key}" (expected ${SPEC_KEYS.join(", ")})`);
    if (seen.has(key)) throw new Error(`${flag}: ${key} given twice`);
    seen.add(key);
    const int = (s: string): number => {
      if (!/^\d+$/.test(s)) throw new Error(`${flag}: ${key} must be a whole number, got "${value}"`);
      return Number(s);
    };
    const seconds = (): number => {
      const n = parseDurationSeconds(value);
      if (n === null) throw new Error(`${flag}: ${key} must be a duration such as 30s or 5m, got "${value}"`);
      return n;
    };
    switch (key) {
      case "min":
        out.minReplicas = int(value);
        break;
      case "max":
        out.maxReplicas = int(value);
        break;
      case "concurrency":
        out.concurrencyTarget = int(value);
        break;
      case "cpu":
        out.cpuTargetPercent = int(value.endsWith("%") ? value.slice(0, -1) : value);
        break;
      case "up":
        out.scaleUpWindowSeconds = seconds();
        break;
      case "down":
        out.scaleDownWindowSeconds = seconds();
        break;
      case "step":
        out.maxStep = int(value);
        break;
    }
  }
  return out;
}

/** What `--scale-to-zero idle=5m[,held=1000][,timeout=30s]` sets. */
export interface ScaleToZeroSpec {
  idleSeconds?: number;
  maxHeldRequests?: number;
  heldTimeoutSeconds?: number;
}

export function parseScaleToZeroSpec(flag: string, v: string): ScaleToZeroSpec {
  const out: ScaleToZeroSpec = {};
  for (const part of v.split(",")) {
    const [key = "", value = ""] = part.split("=", 2).map((s) => s.trim());
    if (key === "idle" || key === "timeout") {
      const n = parseDurationSeconds(value);
      if (n === null) throw new Error(`${flag}: ${key} must be a duration such as 30s or 5m, got "${value}"`);
      if (key === "idle") out.idleSeconds = n;
      else out.heldTimeoutSeconds = n;
    } else if (key === "held") {
      if (!/^\d+$/.test(value)) throw new Error(`${flag}: held must be a whole number, got "${value}"`);
      out.maxHeldRequests = Number(value);
    } else throw new Error(`${flag}: unknown key "${key}" (expected idle, held, timeout)`);
  }
  return out;
}

/**
 * A stored policy with a spec laid over it (the CLI's and the API's partial update). `base` null:
 * the defaults, with min 1 (or 0 when scale-to-zero is asked for) and max = min.
 */
export function mergePolicy(
  base: AutoscalePolicy | null,
  spec: AutoscaleSpec,
  zero: ScaleToZeroSpec | null | undefined,
): AutoscalePolicy {
  const scaleToZero: ScaleToZero | null =
    zero === null
      ? null
      : zero === undefined
        ? (base?.scaleToZero ?? null)
        : {
            idleSeconds: zero.idleSeconds ?? base?.scaleToZero?.idleSeconds ?? 300,
            maxHeldRequests: zero.maxHeldRequests ?? base?.scaleToZero?.maxHeldRequests ?? DEFAULT_HELD_REQUESTS,
            heldTimeoutSeconds:
              zero.heldTimeoutSeconds ?? base?.scaleToZero?.heldTimeoutSeconds ?? DEFAULT_HELD_TIMEOUT_SECONDS,
          };
  const min = spec.minReplicas ?? base?.minReplicas ?? (scaleToZero ? 0 : 1);
  const concurrency = spec.concurrencyTarget ?? base?.concurrencyTarget ?? null;
  const cpu = spec.cpuTargetPercent ?? base?.cpuTargetPercent ?? null;
  return {
    minReplicas: min,
    maxReplicas: spec.maxReplicas ?? base?.maxReplicas ?? Math.max(min, 1),
    // With neither target given anywhere, concurrency is the one the sentinels can always measure.
    concurrencyTarget: concurrency === null && cpu === null ? 100 : concurrency,
    cpuTargetPercent: cpu,
    scaleUpWindowSeconds: spec.scaleUpWindowSeconds ?? base?.scaleUpWindowSeconds ?? DEFAULT_SCALE_UP_WINDOW_SECONDS,
    scaleDownWindowSeconds:
      spec.scaleDownWindowSeconds ?? base?.scaleDownWindowSeconds ?? DEFAULT_SCALE_DOWN_WINDOW_SECONDS,
    maxStep: spec.maxStep ?? base?.maxStep ?? null,
    scaleToZero,
  };
}

/** The policy as stored (JSON text in ctrl's database) and streamed. */
export function formatPolicy(p: AutoscalePolicy | null): string | null {
  return p === null ? null : JSON.stringify(p);
}

/** The stored text back; throws when it is not a policy (a corrupted row must not scale silently). */
export function parseStoredPolicy(text: string | null): AutoscalePolicy | null {
  if (text === null || text === "") return null;
  const v: unknown = JSON.parse(text);
  if (typeof v !== "object" || v === null) throw new Error("stored autoscale policy is not an object");
  const o = v as Record<string, unknown>;
  const num = (k: string): number => {
    const x = o[k];
    if (typeof x !== "number") throw new Error(`stored autoscale policy: ${k} is not a number`);
    return x;
  };
  const numOrNull = (k: string): number | null => (o[k] === null ? null : num(k));
  const z = o.scaleToZero as Record<string, unknown> | null | undefined;
  let scaleToZero: ScaleToZero | null = null;
  if (z !== null && z !== undefined) {
    if (
      typeof z.idleSeconds !== "number" ||
      typeof z.maxHeldRequests !== "number" ||
      typeof z.heldTimeoutSeconds !== "number"
    )
      throw new Error("stored autoscale policy: scaleToZero is malformed");
    scaleToZero = {
      idleSeconds: z.idleSeconds,
      maxHeldRequests: z.maxHeldRequests,
      heldTimeoutSeconds: z.heldTimeoutSeconds,
    };
  }
  return {
    minReplicas: num("minReplicas"),
    maxReplicas: num("maxReplicas"),
    concurrencyTarget: numOrNull("concurrencyTarget"),
    cpuTargetPercent: numOrNull("cpuTargetPercent"),
    scaleUpWindowSeconds: num("scaleUpWindowSeconds"),
    scaleDownWindowSeconds: num("scaleDownWindowSeconds"),
    maxStep: numOrNull("maxStep"),
    scaleToZero,
  };
}

/** "min 1, max 20, 50 in flight per instance, cpu 80 %, scale to zero after 5m" for tables. */
export function describePolicy(p: AutoscalePolicy | null): string {
  if (p === null) return "off";
  const parts = [`min ${p.minReplicas}`, `max ${p.maxReplicas}`];
  if (p.concurrencyTarget !== null) parts.push(`concurrency ${p.concurrencyTarget}`);
  if (p.cpuTargetPercent !== null) parts.push(`cpu ${p.cpuTargetPercent}%`);
  if (p.scaleToZero) parts.push(`to zero after ${p.scaleToZero.idleSeconds}s idle`);
  return parts.join(", ");
}

/** The policy's shape on the wire (krane.ctrl.v1.AutoscalePolicy), structurally. */
export interface WirePolicy {
  readonly minReplicas: number;
  readonly maxReplicas: number;
  readonly concurrencyTarget?: number;
  readonly cpuTargetPercent?: number;
  readonly scaleUpWindowSeconds: number;
  readonly scaleDownWindowSeconds: number;
  readonly maxStep?: number;
  readonly scaleToZero?: {
    readonly idleSeconds: number;
    readonly maxHeldRequests: number;
    readonly heldTimeoutSeconds: number;
  };
}

/** A policy read off the wire (validate it with policyProblem before acting on it). */
export function policyFromWire(m: WirePolicy): AutoscalePolicy {
  const z = m.scaleToZero;
  return {
    minReplicas: m.minReplicas,
    maxReplicas: m.maxReplicas,
    concurrencyTarget: m.concurrencyTarget ?? null,
    cpuTargetPercent: m.cpuTargetPercent ?? null,
    scaleUpWindowSeconds: m.scaleUpWindowSeconds,
    scaleDownWindowSeconds: m.scaleDownWindowSeconds,
    maxStep: m.maxStep ?? null,
    scaleToZero:
      z === undefined
        ? null
        : { idleSeconds: z.idleSeconds, maxHeldRequests: z.maxHeldRequests, heldTimeoutSeconds: z.heldTimeoutSeconds },
  };
}
