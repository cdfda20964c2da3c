// The region's instance usage for the metrics history (issue: per instance CPU, memory and
// restarts), the I/O shell around ./minutes.ts. Runs on the leader beside the sentinel kind's
// measurement collector and at its interval: each round it lists the resource metrics API's pod
// figures (metrics-server; one cluster-wide list by label, like the autoscaler's CPU reader),
// takes the instances and their restart counts from the shared pod cache, adds them into the
// round's minute and sends the minutes not yet acknowledged (ClusterService.ReportUsage).
//
// Best effort: without the metrics API (not installed, unavailable) restarts are still counted,
// the API is asked again after a pause, and it is said once; a failed report is sent again with
// the next round, the minutes being kept (at most MAX_PENDING_MINUTES) until ctrl has them.
import { create } from "@bufbuild/protobuf";
import { ReportUsageRequestSchema, type ReportUsageRequest } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { COMPONENT, LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_REGION, MANAGED_BY } from "../../contracts/labels.js";
import { KubeApiError } from "../../kube/client.js";
import { resources } from "../../kube/resources.js";
import { sleep } from "../../retry/backoff.js";
import type { KindContext } from "../runtime/builder.js";
import { deploymentKeyOf } from "../deployments/controller.js";
import { UsageMinutes, instanceOf, useByPod, type Minute, type PodUse } from "./minutes.js";

/** metrics-server's default resolution: reading more often gives the same figures. */
export const USAGE_INTERVAL_MS = 15_000;
/** Rounds to wait before asking a metrics API that failed again. */
const METRICS_PAUSE_ROUNDS = 30;

export interface UsageReaderOptions {
  readonly region: string;
  /** Between rounds (0 disables the reader). */
  readonly intervalMs: number;
  readonly send: (req: ReportUsageRequest, signal: AbortSignal) => Promise<void>;
  readonly now?: () => number;
}

/** The report of the pending minutes, or undefined when there is nothing to say. */
export function usageReport(region: string, minutes: readonly Minute[]): ReportUsageRequest | undefined {
  if (minutes.length === 0) return undefined;
  return create(ReportUsageRequestSchema, {
    region,
    minutes: minutes.map((m) => ({
      minuteUnixMs: BigInt(m.minuteMs),
      instances: [...m.instances.values()].map((i) => ({
        environmentId: i.environmentId,
        deploymentId: i.deploymentId,
        instance: i.instance,
        cpuMillicoresSum: i.cpuMillicoresSum,
        memoryBytesSum: i.memoryBytesSum,
        readings: i.readings,
        restarts: i.restarts,
      })),
    })),
  });
}

export class UsageReader {
  readonly #o: UsageReaderOptions;
  readonly #now: () => number;
  #skipMetrics = 0;
  #metricsFailing = false;

  constructor(o: UsageReaderOptions) {
    this.#o = o;
    this.#now = o.now ?? Date.now;
  }

  async run<D>(ctx: KindContext<D>, signal: AbortSignal): Promise<void> {
    if (this.#o.intervalMs <= 0) return;
    // A new run (this replica became the leader again): restart counts seen before are a new baseline.
    const minutes = new UsageMinutes();
    while (!signal.aborted) {
      const started = this.#now();
      try {
        await this.round(ctx, minutes, signal);
      } catch (err) {
        if (signal.aborted) return;
        ctx.log.warn({ err: err instanceof Error ? err.message : String(err) }, "instance usage round failed");
      }
      await sleep(Math.max(0, this.#o.intervalMs - (this.#now() - started)), signal);
    }
  }

  async round<D>(ctx: KindContext<D>, minutes: UsageMinutes, signal: AbortSignal): Promise<void> {
    const instances = [];
    for (const pod of ctx.informer(resources.pods).values()) {
      if (deploymentKeyOf(pod) === undefined) continue;
      const i = instanceOf(pod);
      if (i) instances.push(i);
    }
    const at = this.#now();
    minutes.observe(at, instances, instances.length === 0 ? undefined : await this.#use(ctx, signal));
    const req = usageReport(this.#o.region, minutes.pending());
    if (!req) return;
    await this.#o.send(req, signal);
    minutes.acknowledged(at);
  }

  async #use<D>(ctx: KindContext<D>, signal: AbortSignal): Promise<Map<string, PodUse> | undefined> {
    if (this.#skipMetrics > 0) {
      this.#skipMetrics--;
      return undefined;
    }
    try {
      const { items } = await ctx.kube.list(resources.podMetrics, {
        labelSelector: `${LABEL_MANAGED_BY}=${MANAGED_BY},${LABEL_COMPONENT}=${COMPONENT.deployment},${LABEL_REGION}=${this.#o.region}`,
        signal,
      });
      if (this.#metricsFailing)
        ctx.log.info({}, "the resource metrics API answers again: instance CPU and memory are kept");
      this.#metricsFailing = false;
      return useByPod(items);
    } catch (err) {
      if (signal.aborted) throw err;
      if (!this.#metricsFailing)
        ctx.log.info(
          {
            status: err instanceof KubeApiError ? err.status : undefined,
            err: err instanceof Error ? err.message : String(err),
          },
          "cannot read the resource metrics API (is metrics-server installed?): instance CPU and memory are not kept, restarts are",
        );
      this.#metricsFailing = true;
      this.#skipMetrics = METRICS_PAUSE_ROUNDS;
      return undefined;
    }
  }
}
