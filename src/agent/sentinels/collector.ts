// Measurement collection for rollout analysis (a canary is judged on its sentinels' counters), the I/O shell around ./measure.ts.
// Runs on the leader next to the SentinelObserver (the sentinel kind's `observe` loop): every
// interval it scrapes the ops port /metrics of every serving pod of every active sentinel of this
// region (the pods found by sentinelPods, as the observer finds them), several at once up to a
// limit and each with a timeout, turns the readings into per-(environment, revision) increments
// and reports them to ctrl (ClusterService.ReportMeasurements). Only revisions of the sentinel's
// own environment are reported (its pods here, or its routing policy, in the last 15 minutes),
// and a scrape body is read up to 4 MiB: an environment may run a sentinel image of its own.
//
// Best effort throughout: a pod that does not answer counts as not scraped (its previous reading
// stays as the baseline), a slow one costs at most the timeout and never delays the controllers
// (this loop is apart from the work queue). A report that fails is sent once more with the next
// round, then dropped: analysis wants fresh numbers, not a backlog.
import { create } from "@bufbuild/protobuf";
import { Counter, type Registry } from "prom-client";
import {
  ReportMeasurementsRequestSchema,
  type ApplySentinel,
  type ReportMeasurementsRequest,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { SENTINEL_OPS_PORT } from "../../contracts/routing.js";
import type { AddressMapping } from "../../contracts/address-map.js";
import { sleep } from "../../retry/backoff.js";
import type { KindContext } from "../runtime/builder.js";
import {
  IncrementTracker,
  MAX_SCRAPE_BYTES,
  parseSentinelMetrics,
  type PodReading,
  type PodScrape,
  type RoundIncrement,
} from "./measure.js";
import { sentinelPods } from "./observer.js";
import { forEachLimit } from "../runtime/limit.js";
import { LABEL_ENVIRONMENT_ID } from "../../contracts/labels.js";
import { resources } from "../../kube/resources.js";
import { deploymentKeyOf } from "../deployments/controller.js";
import { labelIndex } from "../runtime/builder.js";

/** How long a revision stays reportable after its last pod left (the sentinel keeps its counts 10 min). */
const REVISION_MEMORY_MS = 15 * 60_000;
/** A deployment id as ctrl accepts it (src/ctrl/validate/rules.ts). */
const DEPLOYMENT_ID = /^dep_[a-z0-9]{1,60}$/;

/** At most this many (environment, revision) entries per report (ctrl refuses more). */
export const MAX_MEASUREMENTS_PER_REPORT = 2_000;

export interface CollectorOptions {
  readonly region: string;
  /** How often the pods are scraped (default 10 s; 0 disables collection). */
  readonly intervalMs?: number;
  /** Per scrape (default 2 s, at most the interval). */
  readonly timeoutMs?: number;
  /** Scrapes in flight at once (default 16). */
  readonly parallel?: number;
  readonly addressMap?: AddressMapping;
  /** Sends one report (ClusterService.ReportMeasurements). */
  readonly send: (req: ReportMeasurementsRequest, signal: AbortSignal) => Promise<void>;
  readonly registry?: Registry;
  readonly now?: () => number;
}

interface CollectorMetrics {
  readonly scrapes: Counter<"result">;
  readonly reports: Counter<"result">;
}

const metricsCache = new WeakMap<Registry, CollectorMetrics>();

function collectorMetrics(registry: Registry | undefined): CollectorMetrics | undefined {
  if (!registry) return undefined;
  let m = metricsCache.get(registry);
  if (!m) {
    m = {
      scrapes: new Counter({
        name: "krane_agent_sentinel_scrapes_total",
        help: "Scrapes of sentinel pods' /metrics for rollout analysis, by result (ok, error).",
        labelNames: ["result"],
        registers: [registry],
      }),
      reports: new Counter({
        name: "krane_agent_measurement_reports_total",
        help: "Measurement reports sent to ctrl, by result (ok, error, dropped: failed twice).",
        labelNames: ["result"],
        registers: [registry],
      }),
    };
    metricsCache.set(registry, m);
  }
  return m;
}

/** The body as text, or undefined (and the body cancelled) when it is larger than `max` bytes. */
async function readBounded(res: Response, max: number): Promise<string | undefined> {
  if (Number(res.headers.get("content-length") ?? "0") > max || !res.body) {
    await res.body?.cancel();
    return res.body ? undefined : "";
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel();
      return undefined;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** A report of a round's increments, or undefined when there is nothing to say. */
export function buildReport(
  region: string,
  fromMs: number,
  toMs: number,
  incs: readonly RoundIncrement[],
): ReportMeasurementsRequest | undefined {
  if (incs.length === 0) return undefined;
  // Bounded: the busiest entries first when a region has more than a report may carry.
  const total = (i: RoundIncrement): number => i.inc.classes.reduce((a, b) => a + b, 0);
  const busiest = (list: RoundIncrement[]): RoundIncrement[] =>
    list.length > MAX_MEASUREMENTS_PER_REPORT
      ? list.sort((a, b) => total(b) - total(a)).slice(0, MAX_MEASUREMENTS_PER_REPORT)
      : list;
  const counts = (i: RoundIncrement) => ({
    environmentId: i.environmentId,
    deploymentId: i.deploymentId,
    responses2xx: BigInt(i.inc.classes[0] ?? 0),
    responses3xx: BigInt(i.inc.classes[1] ?? 0),
    responses4xx: BigInt(i.inc.classes[2] ?? 0),
    responses5xx: BigInt(i.inc.classes[3] ?? 0),
    latencyBuckets: i.inc.buckets.map((v) => BigInt(v)),
  });
  const revisions = busiest(incs.filter((i) => i.instance === undefined));
  if (revisions.length === 0) return undefined;
  // ctrl keeps an instance's figures only with its revision's, so only those are sent.
  const sent = new Set(revisions.map((i) => `${i.environmentId}\n${i.deploymentId}`));
  const instances = busiest(
    incs.filter((i) => i.instance !== undefined && sent.has(`${i.environmentId}\n${i.deploymentId}`)),
  );
  return create(ReportMeasurementsRequestSchema, {
    region,
    fromUnixMs: BigInt(fromMs),
    toUnixMs: BigInt(toMs),
    revisions: revisions.map(counts),
    instances: instances.map((i) => ({ ...counts(i), instance: i.instance ?? "" })),
  });
}

export class MeasurementCollector {
  readonly #o: CollectorOptions;
  #tracker = new IncrementTracker();
  readonly #m: CollectorMetrics | undefined;
  /** A report that failed once, sent again with the next round. */
  #retry: ReportMeasurementsRequest | undefined;
  /** Revisions of each environment seen in this cluster ("env\ndep" → last seen, ms). */
  readonly #revisions = new Map<string, number>();
  /** Their pods ("env\ndep\npod" → last seen, ms): the instances a report may name. */
  readonly #instances = new Map<string, number>();

  constructor(opts: CollectorOptions) {
    this.#o = opts;
    this.#m = collectorMetrics(opts.registry);
  }

  async run(ctx: KindContext<ApplySentinel>, signal: AbortSignal): Promise<void> {
    const every = this.#o.intervalMs ?? 10_000;
    if (every <= 0) return;
    // A new run (this replica became the leader again): readings from before may predate
    // traffic another leader already reported, so start from fresh baselines.
    this.#tracker = new IncrementTracker();
    this.#retry = undefined;
    while (!signal.aborted) {
      const started = Date.now();
      try {
        await this.round(ctx, signal);
      } catch (err) {
        ctx.log.warn({ err: err instanceof Error ? err.message : String(err) }, "measurement round failed");
      }
      await sleep(Math.max(0, every - (Date.now() - started)), signal);
    }
  }

  /** One round: scrape every pod, report the increments (and a report that failed last round). */
  async round(ctx: KindContext<ApplySentinel>, signal: AbortSignal): Promise<void> {
    const now = this.#o.now ?? Date.now;
    const targets: { pod: string; environmentId: string; host: string; createdMs: number | undefined }[] = [];
    for (const key of ctx.activeKeys()) {
      const env = ctx.desiredOf(key)?.environmentId;
      if (!env) continue;
      for (const p of sentinelPods(ctx, key, this.#o.addressMap))
        targets.push({ pod: `${key}/${p.name}`, environmentId: env, host: p.host, createdMs: p.createdMs });
    }
    const at = now();
    const scrapes: PodScrape[] = [];
    // A round lasts at most one interval, however many pods do not answer (those left count as
    // not scraped, their previous readings stay the baseline).
    const roundSignal = AbortSignal.any([signal, AbortSignal.timeout(Math.max(1_000, this.#o.intervalMs ?? 10_000))]);
    await forEachLimit(targets, this.#o.parallel ?? 16, async (t) => {
      const reading = await this.#scrape(t.host, roundSignal);
      this.#m?.scrapes.inc({ result: reading ? "ok" : "error" });
      scrapes.push({ pod: t.pod, environmentId: t.environmentId, reading, podCreatedMs: t.createdMs });
    });
    if (signal.aborted) return;
    const from = this.#tracker.lastRoundMs;
    // Only revisions of the sentinel's own environment (its pods in this cluster, or its routing
    // policy): a sentinel image of the user's own could name anything, and ctrl refuses a whole
    // report that names another environment's revision.
    const envs = new Set(targets.map((t) => t.environmentId));
    for (const env of envs) {
      for (const pod of ctx.informer(resources.pods).byIndex(labelIndex(LABEL_ENVIRONMENT_ID), env)) {
        const dep = deploymentKeyOf(pod);
        if (dep === undefined) continue;
        this.#revisions.set(`${env}\n${dep}`, at);
        const name = pod.metadata?.name;
        if (name !== undefined) this.#instances.set(`${env}\n${dep}\n${name}`, at);
      }
    }
    for (const key of ctx.activeKeys()) {
      const d = ctx.desiredOf(key);
      for (const r of d?.routing?.revisions ?? [])
        this.#revisions.set(`${d?.environmentId ?? ""}\n${r.deploymentId}`, at);
    }
    for (const m of [this.#revisions, this.#instances])
      for (const [k, seen] of m) if (at - seen > REVISION_MEMORY_MS) m.delete(k);
    // Instances only as pods of that revision here: a name a sentinel made up is not reported.
    const incs = this.#tracker
      .round(at, scrapes)
      .filter((i) =>
        i.instance === undefined
          ? DEPLOYMENT_ID.test(i.deploymentId) && this.#revisions.has(`${i.environmentId}\n${i.deploymentId}`)
          : this.#instances.has(`${i.environmentId}\n${i.deploymentId}\n${i.instance}`),
      );
    const fresh = from === undefined ? undefined : buildReport(this.#o.region, from, at, incs);
    const retry = this.#retry;
    this.#retry = undefined;
    if (retry) await this.#send(retry, signal, false);
    if (fresh) await this.#send(fresh, signal, true);
  }

  /**
   * Sends one report; a first failure keeps it for the next round. Not src/retry: the spacing
   * of the second attempt is the collection interval itself, and after it the numbers are stale
   * for analysis, so there is nothing a backoff would add.
   */
  async #send(req: ReportMeasurementsRequest, signal: AbortSignal, mayRetry: boolean): Promise<void> {
    try {
      await this.#o.send(req, signal);
      this.#m?.reports.inc({ result: "ok" });
    } catch {
      this.#m?.reports.inc({ result: mayRetry ? "error" : "dropped" });
      if (mayRetry) this.#retry = req;
    }
  }

  async #scrape(host: string, signal: AbortSignal): Promise<PodReading | undefined> {
    const timeout = AbortSignal.any([
      signal,
      AbortSignal.timeout(Math.min(this.#o.timeoutMs ?? 2_000, this.#o.intervalMs ?? 10_000)),
    ]);
    try {
      const res = await fetch(`http://${host}:${SENTINEL_OPS_PORT}/metrics`, { signal: timeout });
      if (!res.ok) {
        await res.body?.cancel();
        return undefined;
      }
      const text = await readBounded(res, MAX_SCRAPE_BYTES);
      return text === undefined ? undefined : parseSentinelMetrics(text);
    } catch {
      // Not answering, too slow, or not a sentinel's metrics: not scraped this round.
      return undefined;
    }
  }
}
