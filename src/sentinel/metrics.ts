// The sentinel's Prometheus metrics. The names the agent reads back for rollout analysis come
// from SENTINEL_METRICS (src/contracts/routing.ts); the rest are for operators. Label values are
// bounded: revisions (deployment ids of this environment, or "none" when the sentinel answered
// itself), status classes, and the instances (pod names) of the routing table, never paths. An
// instance's figures are forgotten 10 minutes after it left the table, like a revision's.
//
// Per-request figures (count by status class, latency histogram) are kept in RequestStats, plain
// counters indexed by revision, and turned into Prometheus samples only when scraped: the
// request path pays a map lookup and a few increments, not prom-client's label hashing.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type MetricType } from "prom-client";
import { instanceSeriesKey, NO_REVISION, SENTINEL_METRICS } from "../contracts/routing.js";

/** Latency buckets in seconds. */
export const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30] as const;

interface RevisionCounts {
  readonly codes: Map<string, number>;
  /** Observations per bucket (not cumulative); the last slot is +Inf. */
  readonly buckets: number[];
  sum: number;
  count: number;
}

function add(r: RevisionCounts, code: string, seconds: number): void {
  r.codes.set(code, (r.codes.get(code) ?? 0) + 1);
  let i = 0;
  while (i < DURATION_BUCKETS.length && seconds > (DURATION_BUCKETS[i] ?? Infinity)) i++;
  r.buckets[i] = (r.buckets[i] ?? 0) + 1;
  r.sum += seconds;
  r.count++;
}

/** The key of an instance's series in RequestStats. */
export const instanceKey = instanceSeriesKey;

interface TableInstances {
  readonly revisions: readonly {
    readonly deploymentId: string;
    readonly endpoints: readonly { readonly pod: string | undefined }[];
    readonly starting?: readonly { readonly pod: string | undefined }[];
  }[];
}

/** The instance series a routing table keeps (its endpoints' and starting instances' pods). */
export function instanceKeys(table: TableInstances): Set<string> {
  const keys = new Set<string>();
  for (const r of table.revisions)
    for (const e of [...r.endpoints, ...(r.starting ?? [])])
      if (e.pod !== undefined) keys.add(instanceKey(r.deploymentId, e.pod));
  return keys;
}

/** The labels of a series key: a revision's, or an instance's (instanceKey). */
function seriesLabels(key: string): { revision: string; instance?: string } {
  const tab = key.indexOf("\t");
  return tab < 0 ? { revision: key } : { revision: key.slice(0, tab), instance: key.slice(tab + 1) };
}

/**
 * Requests by series (a revision, or a revision's instance: instanceKey) and status class, and
 * their latency, for the scrape to read.
 */
export class RequestStats {
  readonly #byRevision = new Map<string, RevisionCounts>();
  readonly #leftAt = new Map<string, number>();

  record(revision: string, code: string, seconds: number): void {
    let r = this.#byRevision.get(revision);
    if (!r) {
      r = { codes: new Map(), buckets: new Array<number>(DURATION_BUCKETS.length + 1).fill(0), sum: 0, count: 0 };
      this.#byRevision.set(revision, r);
    }
    add(r, code, seconds);
  }

  /**
   * Drops the figures of revisions that left the table more than `afterMs` ago, so a long-lived
   * sentinel does not keep a series for every revision it ever routed.
   */
  forgetExcept(keep: ReadonlySet<string>, now: number, afterMs = 600_000): void {
    for (const id of this.#byRevision.keys()) {
      if (keep.has(id) || id === NO_REVISION) {
        this.#leftAt.delete(id);
        continue;
      }
      const left = this.#leftAt.get(id);
      if (left === undefined) this.#leftAt.set(id, now);
      else if (now - left >= afterMs) {
        this.#byRevision.delete(id);
        this.#leftAt.delete(id);
      }
    }
  }

  count(revision: string, code: string): number {
    return this.#byRevision.get(revision)?.codes.get(code) ?? 0;
  }

  entries(): IterableIterator<[string, RevisionCounts]> {
    return this.#byRevision.entries();
  }
}

type SeriesLabel = "revision" | "instance";

/** A prom-client Histogram whose samples come from RequestStats at scrape time. */
class StatsHistogram extends Histogram<SeriesLabel> {
  constructor(
    private readonly stats: RequestStats,
    registry: Registry,
    private readonly metricName: string,
    private readonly helpText: string,
  ) {
    super({
      name: metricName,
      help: helpText,
      labelNames: ["revision", "instance"],
      buckets: [...DURATION_BUCKETS],
      registers: [registry],
    });
  }

  // prom-client's registry (and Histogram.get) read histograms through getForPromString, which its
  // typings do not declare; this is that method, computing the samples from RequestStats.
  async getForPromString(): ReturnType<Histogram<SeriesLabel>["get"]> {
    const name = this.metricName;
    const values: Awaited<ReturnType<Histogram<SeriesLabel>["get"]>>["values"] = [];
    for (const [key, r] of this.stats.entries()) {
      const labels = seriesLabels(key);
      let acc = 0;
      DURATION_BUCKETS.forEach((le, i) => {
        acc += r.buckets[i] ?? 0;
        values.push({ metricName: `${name}_bucket`, labels: { le, ...labels } as typeof labels, value: acc });
      });
      values.push({ metricName: `${name}_bucket`, labels: { le: "+Inf", ...labels } as typeof labels, value: r.count });
      values.push({ metricName: `${name}_sum`, labels, value: r.sum });
      values.push({ metricName: `${name}_count`, labels, value: r.count });
    }
    return {
      name,
      help: this.helpText,
      // prom-client types `type` as an enum that does not exist at run time; the registry wants the string.
      type: "histogram" as unknown as MetricType,
      aggregator: "sum",
      collect: () => undefined,
      values,
    };
  }
}

/** A counter of requests by series and status class, read from RequestStats at scrape time. */
function statsCounter(stats: RequestStats, registry: Registry, name: string, help: string): void {
  new Counter({
    name,
    help,
    labelNames: ["revision", "instance", "code"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [key, c] of stats.entries())
        for (const [code, n] of c.codes) this.inc({ ...seriesLabels(key), code }, n);
    },
  });
}

export interface SentinelMetrics {
  readonly registry: Registry;
  /** Requests and latency per revision (exposed as SENTINEL_METRICS.requests and .duration). */
  readonly stats: RequestStats;
  /**
   * The same per instance that answered, keys from instanceKey (SENTINEL_METRICS.instanceRequests
   * and .instanceDuration): the sentinel's own answers count for no instance.
   */
  readonly instanceStats: RequestStats;
  readonly upstreamConnectErrors: Counter<"revision">;
  readonly upstreamResets: Counter<"revision">;
  readonly ejections: Counter<"revision">;
  readonly retries: Counter<"revision">;
  readonly routingVersion: Gauge;
  readonly endpoints: Gauge<"revision" | "state">;
  readonly tableUpdates: Counter;
  /** Cold starts whose held requests went to an instance found answering before the kubelet said so. */
  readonly warmReleases: Counter;
  readonly policyErrors: Counter;
  readonly inFlight: Gauge;
  /** Read at scrape time. */
  inFlightNow: () => number;
  readonly webSockets: Gauge;
  readonly kubeConnected: Gauge;
  readonly clientErrors: Counter<"reason">;
  /** Requests refused at the edge by API authentication (./auth.ts), by status. */
  readonly authRefusals: Counter<"status">;
  /** Each edge policy's decisions (./policies.ts): allow or deny, by the policy's name. */
  readonly policyDecisions: Counter<"policy" | "decision">;
}

export function statusClass(status: number): string {
  if (status < 200) return "1xx";
  if (status < 300) return "2xx";
  if (status < 400) return "3xx";
  if (status < 500) return "4xx";
  return "5xx";
}

/** Endpoint counts read at scrape time (so ejections that end show up without an event). */
export type EndpointCounts = () => readonly { revision: string; routable: number; ejected: number }[];

export function createSentinelMetrics(
  endpointCounts: EndpointCounts,
  registry = new Registry(),
  defaults = true,
): SentinelMetrics {
  if (defaults) collectDefaultMetrics({ register: registry });
  const r = [registry];
  const stats = new RequestStats();
  const instanceStats = new RequestStats();
  const duration = "Time from request to the end of the response";
  new StatsHistogram(stats, registry, SENTINEL_METRICS.duration, `${duration}, by revision.`);
  statsCounter(
    stats,
    registry,
    SENTINEL_METRICS.requests,
    'Requests answered, by revision and status class ("aborted": the client left first).',
  );
  new StatsHistogram(instanceStats, registry, SENTINEL_METRICS.instanceDuration, `${duration}, by instance.`);
  statsCounter(
    instanceStats,
    registry,
    SENTINEL_METRICS.instanceRequests,
    "Requests an instance answered (or that failed on it), by revision, instance and status class.",
  );
  const m: SentinelMetrics = {
    registry,
    stats,
    instanceStats,
    inFlightNow: () => 0,
    upstreamConnectErrors: new Counter({
      name: SENTINEL_METRICS.upstreamConnectErrors,
      help: "Attempts that could not connect to an instance (refused, unreachable, connect timeout).",
      labelNames: ["revision"],
      registers: r,
    }),
    upstreamResets: new Counter({
      name: "krane_sentinel_upstream_resets_total",
      help: "Attempts whose connection broke before a response began.",
      labelNames: ["revision"],
      registers: r,
    }),
    ejections: new Counter({
      name: SENTINEL_METRICS.ejections,
      help: "Instances ejected by passive health checks.",
      labelNames: ["revision"],
      registers: r,
    }),
    retries: new Counter({
      name: "krane_sentinel_retries_total",
      help: "Requests retried on another instance after a failed connect.",
      labelNames: ["revision"],
      registers: r,
    }),
    routingVersion: new Gauge({
      name: SENTINEL_METRICS.routingVersion,
      help: "The routing policy version served.",
      registers: r,
    }),
    endpoints: new Gauge({
      name: "krane_sentinel_endpoints",
      help: "Instances in the routing table, by revision and state (routable, ejected).",
      labelNames: ["revision", "state"],
      registers: r,
      collect() {
        this.reset();
        for (const c of endpointCounts()) {
          this.set({ revision: c.revision, state: "routable" }, c.routable);
          this.set({ revision: c.revision, state: "ejected" }, c.ejected);
        }
      },
    }),
    tableUpdates: new Counter({
      name: "krane_sentinel_table_updates_total",
      help: "Routing table rebuilds.",
      registers: r,
    }),
    warmReleases: new Counter({
      name: "krane_sentinel_warm_releases_total",
      help: "Cold starts whose held requests went to a starting instance that answered its readiness path to the sentinel, before its EndpointSlice listed it ready.",
      registers: r,
    }),
    policyErrors: new Counter({
      name: "krane_sentinel_policy_errors_total",
      help: "Policy ConfigMaps refused (the last good policy stays).",
      registers: r,
    }),
    inFlight: new Gauge({
      name: "krane_sentinel_in_flight_requests",
      help: "Requests being proxied now.",
      registers: r,
      collect() {
        this.set(m.inFlightNow());
      },
    }),
    webSockets: new Gauge({
      name: "krane_sentinel_websockets",
      help: "Upgraded (WebSocket) connections open now.",
      registers: r,
    }),
    kubeConnected: new Gauge({
      name: "krane_sentinel_kube_connected",
      help: "1 while the routing-table watches are healthy.",
      registers: r,
    }),
    clientErrors: new Counter({
      name: "krane_sentinel_client_errors_total",
      help: "Malformed client requests and connections answered 4xx or closed, by reason.",
      labelNames: ["reason"],
      registers: r,
    }),
    authRefusals: new Counter({
      name: "krane_sentinel_auth_refusals_total",
      help: "Requests refused by API authentication at the edge (401, 403, 400), by status.",
      labelNames: ["status"],
      registers: r,
    }),
    policyDecisions: new Counter({
      name: "krane_sentinel_policy_decisions_total",
      help: "Decisions of the environment's edge policies (allow: passed on to the next; deny: answered), by policy name.",
      labelNames: ["policy", "decision"],
      registers: r,
    }),
  };
  return m;
}
