// The charts tab: the sentinels' measurements per revision (MetricsService.GetRevisionMetrics:
// requests/s, error rate, p50 and p99, in 30 s buckets over the last 15 minutes), read again when
// the live view says a newer measurement was stored. Drawn as plain SVG polylines: four small
// line charts need no chart library (none would be smaller than these few lines, and SVG needs no
// canvas, no inline script or style, so the page's strict Content-Security-Policy holds).
import { useEffect, useState } from "preact/hooks";
import type { EnvironmentView, GetRevisionMetricsResponse, RevisionMetrics } from "../gen/krane/ctrl/v1/live_pb.js";
import { api, errorText } from "./api.js";
import type { EnvRef } from "./router.js";

const W = 420;
const H = 140;
const PAD = 28;
const COLORS = ["var(--accent)", "var(--warn)", "var(--ok)", "var(--bad)", "var(--muted)"];

interface Series {
  name: string;
  points: { t: number; v: number }[];
}

function fmt(v: number): string {
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}

export function LineChart(props: { title: string; unit: string; series: Series[]; from: number; to: number }) {
  const max = Math.max(1e-9, ...props.series.flatMap((s) => s.points.map((p) => p.v)));
  const span = Math.max(1, props.to - props.from);
  const x = (t: number) => PAD + ((t - props.from) / span) * (W - PAD - 8);
  const y = (v: number) => H - PAD + 8 - (v / max) * (H - PAD);
  const summary = props.series
    .map(
      (s) => `${s.name}: last ${s.points.length ? fmt(s.points[s.points.length - 1]?.v ?? 0) : "none"} ${props.unit}`,
    )
    .join("; ");
  return (
    <figure class="chart">
      <figcaption>
        {props.title} ({props.unit})
      </figcaption>
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={`${props.title}: ${summary || "no measurements"}`}>
        <line x1={PAD} y1={H - PAD + 8} x2={W - 8} y2={H - PAD + 8} class="axis" />
        <line x1={PAD} y1={8} x2={PAD} y2={H - PAD + 8} class="axis" />
        <text x={2} y={14} class="tick">
          {fmt(max)}
        </text>
        <text x={2} y={H - PAD + 8} class="tick">
          0
        </text>
        <text x={PAD} y={H - 4} class="tick">
          {new Date(props.from).toLocaleTimeString()}
        </text>
        <text x={W - 8} y={H - 4} class="tick" text-anchor="end">
          {new Date(props.to).toLocaleTimeString()}
        </text>
        {props.series.map((s, i) => (
          <polyline
            key={s.name}
            fill="none"
            stroke={COLORS[i % COLORS.length]}
            stroke-width={2}
            points={s.points.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(" ")}
          />
        ))}
      </svg>
      <ul class="legend">
        {props.series.map((s, i) => (
          <li key={s.name}>
            <span class="swatch" style={{ background: COLORS[i % COLORS.length] }} aria-hidden="true" /> {s.name}
          </li>
        ))}
      </ul>
    </figure>
  );
}

function series(revs: RevisionMetrics[], pick: (p: RevisionMetrics["points"][number]) => number | undefined): Series[] {
  return revs.map((r) => ({
    name: `r${r.revision}`,
    points: r.points.flatMap((p) => {
      const v = pick(p);
      // -1: past the last latency bucket (30 s); drawn at 30 s.
      return v === undefined ? [] : [{ t: Number(p.atUnixMs), v: v < 0 ? 30_000 : v }];
    }),
  }));
}

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
          series={series(revs, (p) => p.requestsPerSecond)}
        />
        <LineChart
          title="Error rate"
          unit="% 5xx"
          from={from}
          to={to}
          series={series(revs, (p) => p.errorRatePercent)}
        />
        <LineChart title="p50 latency" unit="ms" from={from} to={to} series={series(revs, (p) => p.p50Ms)} />
        <LineChart title="p99 latency" unit="ms" from={from} to={to} series={series(revs, (p) => p.p99Ms)} />
      </div>
    </>
  );
}
