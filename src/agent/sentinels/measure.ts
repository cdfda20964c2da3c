// Pure core of measurement collection: reading a sentinel pod's /metrics text
// and turning successive readings into per-revision increments.
//
// The parser is small and strict on purpose: the only maintained-looking npm parser of the
// Prometheus text format (parse-prometheus-text-format) has had no release since 2019 and no
// types, and the agent needs three metric families of one known producer (the sentinel's
// prom-client). Every line must be a comment, blank, or a well-formed sample; anything else makes
// the whole scrape an error (a half-read scrape would count as a counter reset).
//
// Increments: per pod and revision, the difference to the previous reading of the same pod. A
// counter that went down, or a process start time that changed, means the sentinel restarted: the
// new reading counts from 0. A pod seen for the first time counts from 0 only if its process
// started after the collector's first round (a new pod: all of its traffic is new); otherwise
// (agent restart, leader change) its reading is only the baseline, so nothing is counted twice.
// A reading whose process started well before its pod was created is another pod's, answering on
// an address handed out again, and counts as not scraped.
import { LATENCY_BUCKETS_MS } from "../../contracts/analysis.js";
import { instanceSeriesKey, SENTINEL_METRICS } from "../../contracts/routing.js";
// The sentinel's label for requests it answered without a revision (never reported).
import { NO_REVISION } from "../../contracts/routing.js";

export const STATUS_CLASSES = ["2xx", "3xx", "4xx", "5xx"] as const;
/** Latency slots: one per LATENCY_BUCKETS_MS bound, then +Inf. */
export const SLOTS = LATENCY_BUCKETS_MS.length + 1;
/** Refuse bigger scrapes (a sentinel exposes a few kB per revision). */
export const MAX_SCRAPE_BYTES = 4 * 1024 * 1024;
/** Refuse more revisions than this per pod. */
export const MAX_REVISIONS_PER_POD = 1_000;
/** Refuse more instance series than this per pod. */
export const MAX_INSTANCES_PER_POD = 5_000;

/** One revision's cumulative counters in one reading. */
export interface RevisionCounters {
  /** Responses by class 2xx, 3xx, 4xx, 5xx. */
  readonly classes: number[];
  /** Other codes ("aborted", "1xx"): only for reset detection. */
  other: number;
  /** Non-cumulative latency observations per slot (SLOTS). */
  readonly buckets: number[];
}

export interface PodReading {
  /** process_start_time_seconds × 1000, or undefined when absent. */
  readonly startedMs: number | undefined;
  readonly revisions: ReadonlyMap<string, RevisionCounters>;
  /** Per instance that answered, keyed by instanceKey (empty from a sentinel that counts none). */
  readonly instances: ReadonlyMap<string, RevisionCounters>;
}

export interface Sample {
  readonly name: string;
  readonly labels: ReadonlyMap<string, string>;
  readonly value: number;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

function parseValue(s: string, line: number): number {
  // As Prometheus reads them (Go's ParseFloat): special values in any case (prom-client writes "Nan").
  const l = s.toLowerCase();
  if (l === "+inf" || l === "inf" || l === "+infinity" || l === "infinity") return Infinity;
  if (l === "-inf" || l === "-infinity") return -Infinity;
  if (l === "nan") return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s))
    throw new Error(`line ${line}: bad value "${s.slice(0, 40)}"`);
  return Number(s);
}

/** One sample line (`name{a="b",…} value [timestamp]`), strictly. */
export function parseSampleLine(text: string, line = 1): Sample {
  let i = 0;
  while (i < text.length && text[i] !== "{" && text[i] !== " " && text[i] !== "\t") i++;
  const name = text.slice(0, i);
  if (!NAME.test(name)) throw new Error(`line ${line}: bad metric name "${name.slice(0, 60)}"`);
  const labels = new Map<string, string>();
  if (text[i] === "{") {
    i++;
    for (;;) {
      while (text[i] === " ") i++;
      if (text[i] === "}") {
        i++;
        break;
      }
      const eq = text.indexOf("=", i);
      if (eq < 0) throw new Error(`line ${line}: label without "="`);
      const key = text.slice(i, eq).trim();
      if (!LABEL_NAME.test(key)) throw new Error(`line ${line}: bad label name "${key.slice(0, 60)}"`);
      i = eq + 1;
      if (text[i] !== '"') throw new Error(`line ${line}: label ${key} value must be quoted`);
      i++;
      let value = "";
      for (;;) {
        const c = text[i];
        if (c === undefined) throw new Error(`line ${line}: unterminated label value`);
        if (c === '"') break;
        if (c === "\\") {
          const n = text[i + 1];
          if (n === "\\") value += "\\";
          else if (n === '"') value += '"';
          else if (n === "n") value += "\n";
          else throw new Error(`line ${line}: bad escape in label ${key}`);
          i += 2;
          continue;
        }
        value += c;
        i++;
      }
      i++;
      if (labels.has(key)) throw new Error(`line ${line}: label ${key} repeated`);
      labels.set(key, value);
      while (text[i] === " ") i++;
      if (text[i] === ",") i++;
      else if (text[i] !== "}") throw new Error(`line ${line}: expected "," or "}" after label ${key}`);
    }
  }
  const rest = text
    .slice(i)
    .trim()
    .split(/[ \t]+/);
  if (rest.length < 1 || rest.length > 2 || rest[0] === "")
    throw new Error(`line ${line}: expected a value (and an optional timestamp)`);
  const value = parseValue(rest[0] ?? "", line);
  if (rest.length === 2 && !/^-?\d+$/.test(rest[1] ?? "")) throw new Error(`line ${line}: bad timestamp`);
  return { name, labels, value };
}

/** Every sample of a text exposition whose name is in `keep` (all when absent). */
export function parseExposition(text: string, keep?: ReadonlySet<string>): Sample[] {
  if (text.length > MAX_SCRAPE_BYTES) throw new Error(`scrape larger than ${MAX_SCRAPE_BYTES} bytes`);
  const out: Sample[] = [];
  const lines = text.split("\n");
  for (let n = 0; n < lines.length; n++) {
    const raw = lines[n] ?? "";
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (line.trim() === "" || line.startsWith("#")) continue;
    const s = parseSampleLine(line, n + 1);
    if (!keep || keep.has(s.name)) out.push(s);
  }
  return out;
}

const BUCKET = `${SENTINEL_METRICS.duration}_bucket`;
const INSTANCE_BUCKET = `${SENTINEL_METRICS.instanceDuration}_bucket`;
const START = "process_start_time_seconds";
const KEEP = new Set([SENTINEL_METRICS.requests, BUCKET, SENTINEL_METRICS.instanceRequests, INSTANCE_BUCKET, START]);

/** The key of an instance's counters in a reading (as the sentinel's own). */
export const instanceKey = instanceSeriesKey;

/** The slot of a histogram `le` bound (seconds), or undefined when it is not one of ours. */
function slotOf(le: string): number | undefined {
  if (le === "+Inf") return SLOTS - 1;
  const s = Number(le);
  const i = LATENCY_BUCKETS_MS.findIndex((ms) => Math.abs(ms / 1000 - s) < 1e-9);
  return i < 0 ? undefined : i;
}

function counterValue(v: number, what: string): number {
  if (!Number.isFinite(v) || v < 0 || !Number.isInteger(v))
    throw new Error(`${what}: counter value ${v} is not a non-negative integer`);
  return v;
}

/** One family pair (requests by code, latency buckets) read into counters per series key. */
class SeriesCounters {
  readonly counters = new Map<string, RevisionCounters>();
  readonly #cumulative = new Map<string, (number | undefined)[]>();

  constructor(
    private readonly bucketName: string,
    private readonly max: number,
  ) {}

  get(key: string): RevisionCounters {
    let r = this.counters.get(key);
    if (!r) {
      if (this.counters.size >= this.max) throw new Error(`more than ${this.max} series of ${this.bucketName}`);
      r = { classes: [0, 0, 0, 0], other: 0, buckets: new Array<number>(SLOTS).fill(0) };
      this.counters.set(key, r);
    }
    return r;
  }

  request(key: string, s: Sample): void {
    const code = s.labels.get("code") ?? "";
    const v = counterValue(s.value, s.name);
    const i = (STATUS_CLASSES as readonly string[]).indexOf(code);
    const r = this.get(key);
    if (i >= 0) r.classes[i] = (r.classes[i] ?? 0) + v;
    else r.other += v;
  }

  bucket(key: string, s: Sample): void {
    const le = s.labels.get("le") ?? "";
    const slot = slotOf(le);
    if (slot === undefined) throw new Error(`${this.bucketName}: unexpected bucket le="${le.slice(0, 20)}"`);
    this.get(key);
    let c = this.#cumulative.get(key);
    if (!c) this.#cumulative.set(key, (c = new Array<number | undefined>(SLOTS).fill(undefined)));
    c[slot] = counterValue(s.value, this.bucketName);
  }

  /** The buckets made non-cumulative; throws when one is missing or they go down. */
  finish(): Map<string, RevisionCounters> {
    for (const [key, c] of this.#cumulative) {
      const r = this.get(key);
      let prev = 0;
      for (let i = 0; i < SLOTS; i++) {
        const v = c[i];
        if (v === undefined) throw new Error(`${this.bucketName}: ${key.slice(0, 80)} lacks bucket ${i}`);
        if (v < prev) throw new Error(`${this.bucketName}: ${key.slice(0, 80)} is not cumulative`);
        r.buckets[i] = v - prev;
        prev = v;
      }
    }
    return this.counters;
  }
}

/** A sentinel pod's reading from its /metrics text. */
export function parseSentinelMetrics(text: string): PodReading {
  const revisions = new SeriesCounters(BUCKET, MAX_REVISIONS_PER_POD);
  const instances = new SeriesCounters(INSTANCE_BUCKET, MAX_INSTANCES_PER_POD);
  let startedMs: number | undefined;
  for (const s of parseExposition(text, KEEP)) {
    if (s.name === START) {
      if (!Number.isFinite(s.value) || s.value < 0) throw new Error(`${START}: bad value`);
      startedMs = Math.round(s.value * 1000);
      continue;
    }
    const rev = s.labels.get("revision");
    if (rev === undefined || rev === "") throw new Error(`${s.name}: sample without a revision label`);
    if (rev === NO_REVISION) continue;
    if (s.name === SENTINEL_METRICS.requests) revisions.request(rev, s);
    else if (s.name === BUCKET) revisions.bucket(rev, s);
    else {
      const instance = s.labels.get("instance");
      if (instance === undefined || instance === "" || instance.includes("\t"))
        throw new Error(`${s.name}: sample without a valid instance label`);
      if (s.name === SENTINEL_METRICS.instanceRequests) instances.request(instanceKey(rev, instance), s);
      else instances.bucket(instanceKey(rev, instance), s);
    }
  }
  return { startedMs, revisions: revisions.finish(), instances: instances.finish() };
}

/** One revision's increments since the previous reading (what a report carries). */
export interface Increment {
  readonly classes: number[];
  readonly buckets: number[];
}

export function emptyIncrement(): Increment {
  return { classes: [0, 0, 0, 0], buckets: new Array<number>(SLOTS).fill(0) };
}

function isEmpty(inc: Increment): boolean {
  return inc.classes.every((v) => v === 0) && inc.buckets.every((v) => v === 0);
}

function wentDown(prev: RevisionCounters, cur: RevisionCounters): boolean {
  if (cur.other < prev.other) return true;
  // Each status class and each (non-cumulative) latency slot only grows while the process lives.
  return (
    cur.classes.some((v, i) => v < (prev.classes[i] ?? 0)) || cur.buckets.some((v, i) => v < (prev.buckets[i] ?? 0))
  );
}

/**
 * The increments of one pod between two readings (`prev` undefined: count everything), per
 * revision or per instance (`of`). Never negative: a series whose counters went down restarted and
 * counts from 0.
 */
export function podIncrements(
  prev: PodReading | undefined,
  cur: PodReading,
  of: "revisions" | "instances" = "revisions",
): Map<string, Increment> {
  const restarted =
    prev !== undefined &&
    prev.startedMs !== undefined &&
    cur.startedMs !== undefined &&
    prev.startedMs !== cur.startedMs;
  const out = new Map<string, Increment>();
  for (const [key, c] of cur[of]) {
    const p = restarted ? undefined : prev?.[of].get(key);
    const base = p && !wentDown(p, c) ? p : undefined;
    const inc: Increment = {
      classes: c.classes.map((v, i) => v - (base?.classes[i] ?? 0)),
      buckets: c.buckets.map((v, i) => v - (base?.buckets[i] ?? 0)),
    };
    if (!isEmpty(inc)) out.set(key, inc);
  }
  return out;
}

/** What one scrape round of a pod gave. */
export interface PodScrape {
  /** Unique per pod (sentinel key and pod name). */
  readonly pod: string;
  readonly environmentId: string;
  /** undefined: the scrape failed (the previous reading stays, as the baseline of the next). */
  readonly reading: PodReading | undefined;
  /** When the pod was created (its metadata.creationTimestamp), when known. */
  readonly podCreatedMs?: number;
}

/**
 * How much earlier than its pod a process may seem to start (the node's clock against the API
 * server's, and creationTimestamp's whole seconds) and still be the pod's own.
 */
export const POD_CLOCK_SLACK_MS = 60_000;

/**
 * Whether a reading can be its pod's own process. One that started well before the pod existed
 * is another pod's, still answering on an address handed out again (its drain outlives its pod
 * object): counting it under the new pod would count all of its traffic a second time.
 */
export function readingFitsPod(reading: PodReading, podCreatedMs: number | undefined): boolean {
  return (
    podCreatedMs === undefined ||
    reading.startedMs === undefined ||
    reading.startedMs >= podCreatedMs - POD_CLOCK_SLACK_MS
  );
}

/** Per (environment, revision) or (environment, revision, instance) increments of a round, all pods added up. */
export interface RoundIncrement {
  readonly environmentId: string;
  readonly deploymentId: string;
  /** The instance (pod) that answered; absent for the revision's own figures. */
  readonly instance?: string;
  readonly inc: Increment;
}

/** Pods remembered after they left the scrape targets (so one that returns is not counted twice). */
const MAX_RETIRED = 10_000;

/**
 * Remembers each pod's previous reading and turns a round of scrapes into increments. A pod
 * absent from a round (gone from the informer, not running) is no longer counted; its last
 * reading is kept (bounded) in case the same pod returns, so nothing is counted twice.
 */
export class IncrementTracker {
  readonly #prev = new Map<string, PodReading>();
  readonly #retired = new Map<string, PodReading>();
  #firstRoundMs: number | undefined;
  #lastRoundMs: number | undefined;

  /** Start of the previous round (undefined before the first). */
  get lastRoundMs(): number | undefined {
    return this.#lastRoundMs;
  }

  round(nowMs: number, scrapes: readonly PodScrape[]): RoundIncrement[] {
    const sum = new Map<string, RoundIncrement>();
    const present = new Set<string>();
    this.#firstRoundMs ??= nowMs;
    for (const s of scrapes) {
      present.add(s.pod);
      const prev = this.#prev.get(s.pod) ?? this.#retired.get(s.pod);
      this.#retired.delete(s.pod);
      if (!s.reading || !readingFitsPod(s.reading, s.podCreatedMs)) {
        if (prev) this.#prev.set(s.pod, prev);
        continue;
      }
      this.#prev.set(s.pod, s.reading);
      // New to us: all of its traffic is new if its process started after this tracker's first
      // round (nothing of it can have been counted); otherwise this reading is the baseline.
      if (!prev && !(s.reading.startedMs !== undefined && s.reading.startedMs >= this.#firstRoundMs)) continue;
      const add = (k: string, entry: RoundIncrement): void => {
        const acc = sum.get(k);
        if (!acc) {
          sum.set(k, entry);
          return;
        }
        entry.inc.classes.forEach((v, i) => (acc.inc.classes[i] = (acc.inc.classes[i] ?? 0) + v));
        entry.inc.buckets.forEach((v, i) => (acc.inc.buckets[i] = (acc.inc.buckets[i] ?? 0) + v));
      };
      for (const [rev, inc] of podIncrements(prev, s.reading))
        add(`${s.environmentId}\n${rev}`, { environmentId: s.environmentId, deploymentId: rev, inc });
      for (const [key, inc] of podIncrements(prev, s.reading, "instances")) {
        const tab = key.indexOf("\t");
        const deploymentId = key.slice(0, tab);
        const instance = key.slice(tab + 1);
        add(`${s.environmentId}\n${key}`, { environmentId: s.environmentId, deploymentId, instance, inc });
      }
    }
    for (const [k, r] of [...this.#prev]) {
      if (present.has(k)) continue;
      this.#prev.delete(k);
      this.#retired.set(k, r);
      if (this.#retired.size > MAX_RETIRED) this.#retired.delete(this.#retired.keys().next().value as string);
    }
    this.#lastRoundMs = nowMs;
    return [...sum.values()];
  }
}
