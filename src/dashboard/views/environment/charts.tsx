/** @jsxRuntime automatic @jsxImportSource preact */
// The charts tab: the sentinels' measurements per revision (MetricsService.GetRevisionMetrics:
// requests/s, error rate, p50 and p99, in 30 s buckets over the last 15 minutes), read again when
// the live view says a newer measurement was stored; drawn by components/line-chart.tsx.
import { useEffect, useState } from "preact/hooks";
import type { EnvironmentView, GetRevisionMetricsResponse } from "../../../gen/krane/ctrl/v1/live_pb.js";
import { api, errorText } from "../../api.js";
import { LineChart } from "../../components/line-chart.js";
import type { EnvRef } from "../../router.js";
import { revisionSeries } from "./charts-model.js";

export function Charts(props: { envRef: EnvRef; view: EnvironmentView }) {
  const [data, setData] = useState<GetRevisionMetricsResponse>();
  const [error, setError] = useState("");
  const { workspace, project, environment } = props.envRef;
  const through = props.view.measuredThroughUnixMs;
  useEffect(() => {
    let live = true;
    api.metrics
      .getRevisionMetrics({ workspace, project, environment, bucketSeconds: 30 })
      .then((r) => live && (setData(r), setError("")))
      .catch((err: unknown) => live && setError(errorText(err)));
    return () => {
      live = false;
    };
  }, [workspace, project, environment, through]);
  const revs = data?.revisions ?? [];
  const from = Number(data?.sinceUnixMs ?? 0);
  const to = Math.max(Date.now(), from + 1);
  return (
    <>
      <h2>Charts</h2>
      <p class="muted">From the sentinels' measurements, every region added up, 30 s buckets.</p>
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
      </div>
    </>
  );
}
