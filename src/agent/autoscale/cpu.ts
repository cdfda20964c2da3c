// The agent's reader of its instances' CPU use, for environments with a CPU target: every
// interval it lists the resource metrics API's pod figures (metrics-server) for the region's
// deployment pods, one cluster-wide list by label (managed-by, component, region), and keeps the
// use per revision (src/autoscale/cpu.ts). It reads only while some environment asks for CPU.
// Without the metrics API (not installed, or unavailable) it says so once, and the autoscaler
// sees no figure: it then never scales down on the other figures' word (src/autoscale/recommend.ts).
import { COMPONENT, LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_REGION, MANAGED_BY } from "../../contracts/labels.js";
import { cpuByRevision, type RevisionCpu } from "../../autoscale/cpu.js";
import { KubeApiError, type KubeClient } from "../../kube/client.js";
import { resources } from "../../kube/resources.js";
import { sleep } from "../../retry/backoff.js";
import type { Logger } from "../../base/log.js";

/** metrics-server's default resolution is 15 s; reading more often gives the same figures. */
export const CPU_READ_INTERVAL_MS = 15_000;

export interface CpuReaderOptions {
  readonly region: string;
  /** Between reads (default CPU_READ_INTERVAL_MS). */
  readonly intervalMs?: number;
  readonly now?: () => number;
}

export class PodCpuReader {
  readonly #o: CpuReaderOptions;
  readonly #now: () => number;
  #last: { atMs: number; byRevision: Map<string, RevisionCpu> } | undefined;
  #unavailable = false;

  constructor(o: CpuReaderOptions) {
    this.#o = o;
    this.#now = o.now ?? Date.now;
  }

  get #interval(): number {
    return this.#o.intervalMs ?? CPU_READ_INTERVAL_MS;
  }

  /** A revision's use as last read; undefined when not read, or too old to judge by (3 intervals). */
  use(deploymentId: string): RevisionCpu | undefined {
    const last = this.#last;
    if (last === undefined || this.#now() - last.atMs > 3 * this.#interval) return undefined;
    return last.byRevision.get(deploymentId);
  }

  /** Reads every interval while `wanted()` (some environment has a CPU target), until `signal`. */
  async run(kube: KubeClient, wanted: () => boolean, log: Logger | undefined, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      if (wanted()) await this.read(kube, log, signal);
      await sleep(this.#interval, signal);
    }
  }

  /** One read; failures leave no figure (never a stale one past its age) and are logged once. */
  async read(kube: KubeClient, log: Logger | undefined, signal: AbortSignal): Promise<void> {
    try {
      const { items } = await kube.list(resources.podMetrics, {
        labelSelector: `${LABEL_MANAGED_BY}=${MANAGED_BY},${LABEL_COMPONENT}=${COMPONENT.deployment},${LABEL_REGION}=${this.#o.region}`,
        signal,
      });
      this.#last = { atMs: this.#now(), byRevision: cpuByRevision(items) };
      if (this.#unavailable) log?.info({}, "the resource metrics API answers again: CPU targets are judged");
      this.#unavailable = false;
    } catch (err) {
      if (signal.aborted) return;
      if (!this.#unavailable)
        log?.warn(
          {
            status: err instanceof KubeApiError ? err.status : undefined,
            err: err instanceof Error ? err.message : String(err),
          },
          "cannot read the resource metrics API (is metrics-server installed?): CPU targets are not judged, and no environment with one is scaled down",
        );
      this.#unavailable = true;
    }
  }
}
