// A workspace's quotas: their names, the spelling people write them in (`krane quota set`, ctrl's
// `--default-quota`), and the pure arithmetic of use against limit that ctrl refuses changes
// with and the CLI shows.

/** Every quota, in the order they are shown. */
export const QUOTA_NAMES = ["cpu", "memory", "instances", "environments", "previews", "build_minutes"] as const;
export type QuotaName = (typeof QUOTA_NAMES)[number];

/** A limit: a number (millicores, MiB, a count, minutes per calendar month) or null: unlimited. */
export type Limits = Readonly<Record<QuotaName, number | null>>;
/** What a workspace uses (build minutes are counted by builds, not here). */
export type Usage = Readonly<Record<Exclude<QuotaName, "build_minutes">, number>>;

export const UNLIMITED: Limits = {
  cpu: null,
  memory: null,
  instances: null,
  environments: null,
  previews: null,
  build_minutes: null,
};

/**
 * The built-in defaults where the installation sets none: unlimited, but for previews, which pull
 * requests open without a person deciding each (10, the preview limit krane always had).
 */
export const BUILT_IN_DEFAULTS: Limits = { ...UNLIMITED, previews: 10 };

/** How each quota is written for people. */
export const QUOTA_UNITS: Readonly<Record<QuotaName, string>> = {
  cpu: "millicores",
  memory: "MiB",
  instances: "instances",
  environments: "environments",
  previews: "previews",
  build_minutes: "minutes per month",
};

/** The largest limit accepted (a count far beyond any cluster; keeps sums exact in a double). */
export const QUOTA_MAX = 1_000_000_000;

export function isQuotaName(s: string): s is QuotaName {
  return (QUOTA_NAMES as readonly string[]).includes(s);
}

// ------------------------------------------------------------------ spelling

/** A setting as written: a limit, "unlimited", or "default" (the installation's). */
export type QuotaSetting = { kind: "limit"; value: number } | { kind: "unlimited" } | { kind: "default" };

const CPU = /^(\d+(?:\.\d{1,3})?)(m?)$/;
const MEMORY = /^(\d+(?:\.\d+)?)(Mi|Gi|Ti|M|G|T)?$/;
const COUNT = /^\d+$/;
const MEMORY_MIB: Record<string, number> = { "": 1, Mi: 1, M: 1, Gi: 1024, G: 1024, Ti: 1024 * 1024, T: 1024 * 1024 };

/**
 * One quota's value as written: CPU in cores or millicores ("2", "0.5", "500m"), memory in MiB
 * or with a unit ("512", "512Mi", "4Gi"), counts and minutes as whole numbers; "unlimited";
 * "default". Throws an Error naming the quota on anything else.
 */
export function parseQuotaValue(name: QuotaName, raw: string): QuotaSetting {
  const v = raw.trim();
  if (v === "unlimited") return { kind: "unlimited" };
  if (v === "default") return { kind: "default" };
  const bad = (what: string) => new Error(`${name}: ${JSON.stringify(raw)} is not ${what}, "unlimited" or "default"`);
  let n: number;
  if (name === "cpu") {
    const m = CPU.exec(v);
    if (!m) throw bad(`a CPU amount ("2", "0.5", "500m")`);
    n = m[2] === "m" ? Number(m[1]) : Math.round(Number(m[1]) * 1000);
    if (!Number.isInteger(n)) throw bad("a whole number of millicores");
  } else if (name === "memory") {
    const m = MEMORY.exec(v);
    if (!m) throw bad(`a memory amount ("512Mi", "4Gi")`);
    n = Number(m[1]) * MEMORY_MIB[m[2] ?? ""]!;
    if (!Number.isInteger(n)) throw bad("a whole number of MiB");
  } else {
    if (!COUNT.test(v)) throw bad("a whole number");
    n = Number(v);
  }
  if (n > QUOTA_MAX) throw new Error(`${name}: ${raw} is more than the largest limit (${QUOTA_MAX})`);
  return { kind: "limit", value: n };
}

/**
 * A list of settings: "cpu=4,memory=8Gi,previews=5" (what `--default-quota` and `krane quota set`
 * take). Throws naming the quota at fault; a name given twice is refused.
 */
export function parseQuotaList(text: string): Map<QuotaName, QuotaSetting> {
  const out = new Map<QuotaName, QuotaSetting>();
  for (const part of text.split(",")) {
    const item = part.trim();
    if (item === "") continue;
    const eq = item.indexOf("=");
    if (eq < 0) throw new Error(`${JSON.stringify(item)}: expected name=value (${QUOTA_NAMES.join(", ")})`);
    const name = item.slice(0, eq).trim().replaceAll("-", "_");
    if (!isQuotaName(name)) throw new Error(`${JSON.stringify(name)} is not a quota (${QUOTA_NAMES.join(", ")})`);
    if (out.has(name)) throw new Error(`${name}: given twice`);
    out.set(name, parseQuotaValue(name, item.slice(eq + 1)));
  }
  return out;
}

/** A setting as parseQuotaValue reads it back (what the CLI sends). */
export function settingText(name: QuotaName, s: QuotaSetting): string {
  if (s.kind !== "limit") return s.kind;
  return name === "cpu" ? `${s.value}m` : name === "memory" ? `${s.value}Mi` : String(s.value);
}

/** A limit for people: "4000m", "8192 MiB", "12", "unlimited". */
export function formatLimit(name: QuotaName, v: number | null): string {
  if (v === null) return "unlimited";
  if (name === "cpu") return `${v}m`;
  if (name === "memory") return `${v} MiB`;
  return String(v);
}

/** One quota as people read it (`krane quota get`, the dashboard): ctrl's Quota message written out. */
export interface QuotaUse {
  readonly name: string;
  /** "-" when ctrl did not count it (an older ctrl, for build minutes). */
  readonly used: string;
  readonly limit: string;
  /** The workspace's own limit, or the installation's default. */
  readonly setBy: "workspace" | "default";
  /** "over": use past the limit (a limit set below use); "full": at it; "" otherwise or unlimited. */
  readonly state: "over" | "full" | "";
}

export function quotaUse(q: { name: string; limit?: bigint; used?: bigint; own: boolean }): QuotaUse {
  const name = q.name as QuotaName;
  const limit = q.limit === undefined ? null : Number(q.limit);
  const used = q.used === undefined ? null : Number(q.used);
  const state = limit === null || used === null ? "" : used > limit ? "over" : used === limit ? "full" : "";
  return {
    name: q.name,
    used: used === null ? "-" : formatLimit(name, used),
    limit: formatLimit(name, limit),
    setBy: q.own ? "workspace" : "default",
    state,
  };
}

// ------------------------------------------------------------------ use

/** An environment's scale in one region: its replicas, or the autoscaler's max when it autoscales. */
export interface RegionScale {
  readonly replicas: number;
  /** The autoscaling policy's maxReplicas there; null: it does not autoscale there. */
  readonly autoscaleMax: number | null;
}

/** What one environment (or a preview waiting for approval, which reserves one) can reach. */
export interface EnvironmentReach {
  /** A preview's environment counts as a preview, not as an environment. */
  readonly preview: boolean;
  readonly regions: readonly RegionScale[];
  /** Per instance, of the revision it runs (0 before its first deploy). */
  readonly cpuMillicores: number;
  readonly memoryMib: number;
}

/** The most instances a region can run: its replicas, or its autoscaling max. */
export function regionMax(r: RegionScale): number {
  return r.autoscaleMax ?? r.replicas;
}

/**
 * What a workspace uses: every environment at its maximum (in every region, replicas or the
 * autoscaling max, times the resources of one instance). Counting the maximum, not what runs now,
 * means an autoscaler or a wake from zero can never take the workspace past a quota that
 * admitted the environment.
 */
export function usageOf(envs: readonly EnvironmentReach[]): Usage {
  let cpu = 0;
  let memory = 0;
  let instances = 0;
  let environments = 0;
  let previews = 0;
  for (const e of envs) {
    const n = e.regions.reduce((s, r) => s + regionMax(r), 0);
    instances += n;
    cpu += n * e.cpuMillicores;
    memory += n * e.memoryMib;
    if (e.preview) previews += 1;
    else environments += 1;
  }
  return { cpu, memory, instances, environments, previews };
}

/** The first quota a change takes past its limit: used before, asked (the change's growth), limit. */
export interface Exceeded {
  readonly quota: QuotaName;
  readonly used: number;
  readonly asked: number;
  readonly limit: number;
}

/**
 * Whether going from `before` to `after` passes a limit. A change that grows a quantity past its
 * limit is refused; one that leaves it where it was or lowers it is allowed even while the
 * workspace is over (a limit set below use: the workspace can still shrink, never grow).
 */
export function exceeded(before: Usage, after: Usage, limits: Limits): Exceeded | null {
  for (const q of QUOTA_NAMES) {
    if (q === "build_minutes") continue;
    const limit = limits[q];
    if (limit === null) continue;
    if (after[q] > limit && after[q] > before[q])
      return { quota: q, used: before[q], asked: after[q] - before[q], limit };
  }
  return null;
}

/** The refusal's text: the quota, what the workspace uses, what the change asks and the limit. */
export function exceededMessage(workspace: string, e: Exceeded): string {
  const f = (v: number) => formatLimit(e.quota, v);
  return `workspace "${workspace}" would pass its ${e.quota} quota: it uses ${f(e.used)}, this change asks ${f(e.asked)} more, the limit is ${f(e.limit)} (krane quota get ${workspace})`;
}

/** The installation's default where the workspace sets none (undefined), else the workspace's. */
export function effectiveLimits(own: Readonly<Record<QuotaName, number | null | undefined>>, defaults: Limits): Limits {
  const out: Record<QuotaName, number | null> = { ...defaults };
  for (const q of QUOTA_NAMES) {
    const v = own[q];
    if (v !== undefined) out[q] = v;
  }
  return out;
}

/**
 * The first setting that goes above the installation's default where the installation set one
 * (a workspace's owner may share out what the installation gave, not take more).
 */
export function aboveCeiling(
  settings: ReadonlyMap<QuotaName, QuotaSetting>,
  defaults: Limits,
): { quota: QuotaName; asked: number | null; ceiling: number } | null {
  for (const [q, s] of settings) {
    const ceiling = defaults[q];
    if (ceiling === null || s.kind === "default") continue;
    if (s.kind === "unlimited") return { quota: q, asked: null, ceiling };
    if (s.value > ceiling) return { quota: q, asked: s.value, ceiling };
  }
  return null;
}

// ---------------------------------------------------------------- build minutes

const MINUTE_MS = 60_000;

/** The first instant (UTC) of the calendar month `nowMs` is in: build minutes count from it. */
export function monthStartMs(nowMs: number): number {
  const d = new Date(nowMs);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

/**
 * Build minutes used in the calendar month of `nowMs`: each build's running time within the
 * month (a running build's so far), rounded up to a whole minute per build, as CI providers bill.
 */
export function buildMinutesUsed(
  builds: readonly { readonly startedAtMs: number; readonly finishedAtMs: number | null }[],
  nowMs: number,
): number {
  const from = monthStartMs(nowMs);
  let minutes = 0;
  for (const b of builds) {
    const ms = Math.min(b.finishedAtMs ?? nowMs, nowMs) - Math.max(b.startedAtMs, from);
    if (ms > 0) minutes += Math.ceil(ms / MINUTE_MS);
  }
  return minutes;
}

/** What a build may run now: refused once the month's minutes are spent, else its time limit capped at what is left. */
export type BuildAllowance =
  | { readonly ok: false; readonly message: string }
  | { readonly ok: true; readonly timeoutMs: number; readonly cappedBy?: string };

export function buildAllowance(
  workspace: string,
  limit: number | null,
  usedMinutes: number,
  timeoutMs: number,
): BuildAllowance {
  if (limit === null) return { ok: true, timeoutMs };
  const left = limit - usedMinutes;
  if (left <= 0)
    return {
      ok: false,
      message: `workspace "${workspace}" has used its build_minutes quota: ${usedMinutes} of ${limit} minutes this month (krane quota get ${workspace})`,
    };
  if (left * MINUTE_MS >= timeoutMs) return { ok: true, timeoutMs };
  return {
    ok: true,
    timeoutMs: left * MINUTE_MS,
    cappedBy: `workspace "${workspace}" ran out of build minutes during the build: its build_minutes quota is ${limit} minutes this month (krane quota get ${workspace})`,
  };
}
