/** @jsxRuntime automatic @jsxImportSource preact */
// A small line chart drawn as plain SVG polylines: a few charts need no chart library (none would
// be smaller than these lines, and SVG needs no canvas, no inline script or style, so the page's
// strict Content-Security-Policy holds). The geometry (`plot`) is pure.
import { figure } from "../format.js";

const W = 420;
const H = 140;
const PAD = 28;
const COLORS = ["var(--accent)", "var(--warn)", "var(--ok)", "var(--bad)", "var(--muted)"];

export interface Series {
  name: string;
  points: { t: number; v: number }[];
}

/**
 * The series stacked, each on those before it (traffic by revision: the top line is the total).
 * A series without a point at a time adds nothing there.
 */
export function stack(series: readonly Series[]): Series[] {
  const below = new Map<number, number>();
  return series.map((s) => ({
    name: s.name,
    points: [...new Set([...below.keys(), ...s.points.map((p) => p.t)])]
      .sort((a, b) => a - b)
      .map((t) => {
        const v = (below.get(t) ?? 0) + s.points.filter((p) => p.t === t).reduce((n, p) => n + p.v, 0);
        below.set(t, v);
        return { t, v };
      }),
  }));
}

/**
 * Where the chart draws: its largest value (the top of the y axis; never 0), each series' points
 * in SVG coordinates, and the summary a screen reader hears.
 */
export function plot(
  series: readonly Series[],
  from: number,
  to: number,
  unit: string,
): { max: number; lines: string[]; summary: string } {
  const max = Math.max(1e-9, ...series.flatMap((s) => s.points.map((p) => p.v)));
  const span = Math.max(1, to - from);
  const x = (t: number) => PAD + ((t - from) / span) * (W - PAD - 8);
  const y = (v: number) => H - PAD + 8 - (v / max) * (H - PAD);
  return {
    max,
    lines: series.map((s) => s.points.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(" ")),
    summary: series
      .map((s) => `${s.name}: last ${s.points.length ? figure(s.points[s.points.length - 1]?.v ?? 0) : "none"} ${unit}`)
      .join("; "),
  };
}

export function LineChart(props: {
  title: string;
  unit: string;
  series: Series[];
  from: number;
  to: number;
  /** Each series drawn on those before it, the area under it filled (the top line: the total). */
  stacked?: boolean;
}) {
  const drawn = props.stacked ? stack(props.series) : props.series;
  const { max, lines } = plot(drawn, props.from, props.to, props.unit);
  // What a screen reader hears is each series' own last value, stacked or not.
  const { summary } = plot(props.series, props.from, props.to, props.unit);
  return (
    <figure class="chart">
      <figcaption>
        {props.title} ({props.unit})
      </figcaption>
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={`${props.title}: ${summary || "no measurements"}`}>
        <line x1={PAD} y1={H - PAD + 8} x2={W - 8} y2={H - PAD + 8} class="axis" />
        <line x1={PAD} y1={8} x2={PAD} y2={H - PAD + 8} class="axis" />
        <text x={2} y={14} class="tick">
          {figure(max)}
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
        {props.stacked &&
          drawn.map((s, i) => {
            // The band between this series and the one below (the x axis for the first).
            const below = i === 0 ? undefined : lines[i - 1];
            const top = lines[i] ?? "";
            if (top === "") return null;
            const floor = below
              ? below.split(" ").reverse().join(" ")
              : `${top.split(" ").at(-1)?.split(",")[0]},${H - PAD + 8} ${top.split(" ")[0]?.split(",")[0]},${H - PAD + 8}`;
            return (
              <polygon
                key={`band-${s.name}`}
                points={`${top} ${floor}`}
                fill={COLORS[i % COLORS.length]}
                fill-opacity={0.25}
                stroke="none"
              />
            );
          })}
        {drawn.map((s, i) => (
          <polyline key={s.name} fill="none" stroke={COLORS[i % COLORS.length]} stroke-width={2} points={lines[i]} />
        ))}
        {drawn.map((s, i) => {
          // A dot on each line's last point: a line of one point (a first bucket) shows too.
          const [cx, cy] = (lines[i] ?? "").split(" ").at(-1)?.split(",") ?? [];
          return cx && cy ? (
            <circle key={`last-${s.name}`} cx={cx} cy={cy} r={3} fill={COLORS[i % COLORS.length]} />
          ) : null;
        })}
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
