/** @jsxRuntime automatic @jsxImportSource preact */
// The charts tab: the sentinels' measurements per revision (MetricsService.GetRevisionMetrics:
// requests/s stacked by revision, error rate, p50 and p99, in 30 s buckets over the last 15
// minutes) and each instance's CPU and memory (MetricsService.GetMetricsHistory, per minute),
// read again when the live view says a newer measurement was stored; drawn by
// components/line-chart.tsx. Below them, the environment's alert rules (./alerts.tsx).
import { useEffect, useState } from "preact/hooks";
import type {
  EnvironmentView,
  GetMetricsHistoryResponse,
  GetRevisionMetricsResponse,
} from "../../../gen/krane/ctrl/v1/live_pb.js";
import { api, errorText } from "../../api.js";
import { LineChart } from "../../components/line-chart.js";
import type { EnvRef } from "../../router.js";
import { AlertRules } from "./alerts.js";
import { instanceSeries, revisionSeries } from "./charts-model.js";

const WINDOW_MS = 15 * 60_000;
const MIB = 2 ** 20;

export function Charts(props: { envRef: EnvRef; view: EnvironmentView }) {
  const [data, setData] = useState<GetRevisionMetricsResponse>();
  const [usage, setUsage] = useState<GetMetricsHistoryResponse>();
  const [error, setError] = useState("");
  const { workspace, project, environment } = props.envRef;
  const through = props.view.measuredThroughUnixMs;
  useEffect(() => {
    let live = true;
    const ref = { workspace, project, environment };
    Promise.all([
      api.metrics.getRevisionMetrics({ ...ref, bucketSeconds: 30 }),
      api.metrics.getMetricsHistory({ ...ref, sinceUnixMs: BigInt(Date.now() - WINDOW_MS), stepSeconds: 60 }),
    ])
      .then(([r, h]) => live && (setData(r), setUsage(h), setError("")))
      .catch((err: unknown) => live && setError(errorText(err)));
    return () => {
      live = false;
    };
  }, [workspace, project, environment, through]);
  const revs = data?.revisions ?? [];
  const from = Number(data?.sinceUnixMs ?? 0);
  const to = Math.max(Date.now(), from + 1);
  const cpu = instanceSeries(usage?.series ?? [], (p) => p.cpuMillicores);
  const memory = instanceSeries(usage?.series ?? [], (p) =>
    p.memoryBytes === undefined ? undefined : p.memoryBytes / MIB,
  );
  return (
    <>
      <h2>Charts</h2>
      <p class="muted">
        Traffic from the sentinels' measurements, every region added up, 30 s buckets; CPU and memory per instance from
        metrics-server, per minute.
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {data && revs.length === 0 && <p class="muted">No measurements in the last 15 minutes.</p>}
      <div class="charts">
        <LineChart
          title="Requests"
          unit="per second"
          from={from}
          to={to}
          stacked
          series={revisionSeries(revs, (p) => p.requestsPerSecond)}
        />
        <LineChart
          title="Error rate"
          unit="% 5xx"
          from={from}
          to={to}
          series={revisionSeries(revs, (p) => p.errorRatePercent)}
        />
        <LineChart title="p50 latency" unit="ms" from={from} to={to} series={revisionSeries(revs, (p) => p.p50Ms)} />
        <LineChart title="p99 latency" unit="ms" from={from} to={to} series={revisionSeries(revs, (p) => p.p99Ms)} />
        <LineChart title="CPU per instance" unit="millicores" from={to - WINDOW_MS} to={to} series={cpu} />
        <LineChart title="Memory per instance" unit="MiB" from={to - WINDOW_MS} to={to} series={memory} />
      </div>
      {usage && cpu.length === 0 && memory.length === 0 && (
        <p class="muted">
          No CPU or memory figures in the last 15 minutes: the cluster's agent reads them from metrics-server (is it
          installed?).
        </p>
      )}
      <AlertRules envRef={props.envRef} through={through} />
    </>
  );
}
