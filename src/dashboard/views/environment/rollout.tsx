/** @jsxRuntime automatic @jsxImportSource preact */
// The rollout section of the status tab: the strategy and, for a progressive rollout, its phase
// and step; the rollout per region; a canary's steps with where it is; the traffic weights per
// region; the pin `krane rollback` left and the revision kept warm; the last analysis verdict with the measurements behind it;
// the instances per region, old and new, as the rollout moved while the page was open.
import type { EnvironmentView } from "../../../gen/krane/ctrl/v1/live_pb.js";
import type { RolloutStatus } from "../../../gen/krane/ctrl/v1/rollout_pb.js";
import { Table } from "../../components/table.js";
import { ago, latency } from "../../format.js";
import { Toned } from "../../components/badge.js";
import { LineChart } from "../../components/line-chart.js";
import { MOVES_WINDOW_MS, movesSeries, type RolloutSample } from "./moves-model.js";
import { agentHint, canarySteps, regionState, rollbackLines, verdictTone } from "./status-model.js";

export function Rollout(props: {
  view: EnvironmentView;
  rollout: RolloutStatus;
  revisionOf: (deploymentId: string) => bigint | undefined;
  /** The instance counts per region as views arrived. */
  moves: readonly RolloutSample[];
}) {
  const { rollout, revisionOf } = props;
  const progressive = rollout.progressive;
  const spec = props.view.status?.environment?.rollout?.progressive;
  const steps = spec?.canary ? canarySteps(spec.canary.steps, progressive) : [];
  return (
    <div>
      <p>
        Strategy <strong>{progressive?.strategy || rollout.strategy || "RollingUpdate"}</strong>
        {progressive && (
          <>
            {" "}
            · phase <strong>{progressive.phase}</strong> · step {progressive.step} of {progressive.steps} (
            {progressive.stepName}){progressive.aborted && <span class="bad"> · aborted</span>}
            {progressive.reason && <span class="muted"> · {progressive.reason}</span>}
          </>
        )}
      </p>
      {rollbackLines(rollout, revisionOf).map((line) => (
        <p key={line.text} class={line.tone}>
          {line.text}
        </p>
      ))}
      <Table
        label="Rollout per region"
        empty={
          <>
            Nothing rolls out yet: deploy a revision with{" "}
            <code>krane deploy &lt;project/env&gt; --image &lt;image&gt;</code>.
          </>
        }
        rows={rollout.regions}
        rowKey={(r) => r.region}
        columns={[
          { key: "region", title: "Region", value: (r) => r.region },
          {
            key: "phase",
            title: "State",
            value: regionState,
            render: (r) => {
              const state = regionState(r);
              const hint = r.complete ? "" : agentHint(r.region, props.view.status?.clusters ?? []);
              const tone = state === "complete" ? "ok" : state === "failed" || hint !== "" ? "bad" : "warn";
              return (
                <Toned tone={tone} title={hint || undefined}>
                  {state}
                  {hint !== "" && <span class="hint"> · {hint}</span>}
                </Toned>
              );
            },
          },
          { key: "desired", title: "Desired", value: (r) => r.replicas },
          { key: "updated", title: "Updated", value: (r) => r.updatedReplicas },
          { key: "ready", title: "Ready", value: (r) => r.readyReplicas },
          { key: "available", title: "Available", value: (r) => r.availableReplicas },
          { key: "msg", title: "Progress", wrap: true, value: (r) => r.message },
        ]}
      />
      {props.moves.length > 0 && <Moves samples={props.moves} />}
      {steps.length > 0 && (
        <>
          <h3>Canary steps</h3>
          <ol class="steps" aria-label="Canary steps">
            {steps.map((s, i) => (
              <li
                key={i}
                class={s.at === "now" ? "current" : s.at === "done" ? "muted" : ""}
                aria-current={s.at === "now" ? "step" : undefined}
              >
                {s.text}
                {s.at === "now" ? " ← now" : ""}
              </li>
            ))}
          </ol>
        </>
      )}
      {progressive && progressive.weights.length > 0 && (
        <Table
          label="Traffic weights"
          empty="No weights yet: they appear once the canary sets its first weight."
          rows={progressive.weights}
          rowKey={(r) => r.region}
          columns={[
            { key: "region", title: "Region", value: (r) => r.region },
            {
              key: "weights",
              title: "Weights",
              value: (r) => r.weights.map((w) => `r${revisionOf(w.deploymentId) ?? "?"} ${w.weight}%`).join(", "),
            },
          ]}
        />
      )}
      {progressive?.lastAnalysis && (
        <>
          <h3>Last analysis verdict</h3>
          <p>
            <strong class={verdictTone(progressive.lastAnalysis)}>{progressive.lastAnalysis}</strong>{" "}
            {ago(progressive.lastAnalysisUnixMs)}: {progressive.lastAnalysisReason}
          </p>
          <Table
            label="Measurements behind the verdict"
            empty="No measurement behind this verdict."
            rows={props.view.verdictMeasurements}
            rowKey={(m) => m.deploymentId}
            columns={[
              { key: "role", title: "Revision", value: (m) => `${m.role} r${revisionOf(m.deploymentId) ?? "?"}` },
              { key: "req", title: "Requests", value: (m) => Number(m.requests) },
              { key: "5xx", title: "5xx", value: (m) => Number(m.responses5xx) },
              {
                key: "rate",
                title: "Success rate",
                value: (m) => (m.successRatePercent === undefined ? "" : `${m.successRatePercent.toFixed(1)} %`),
              },
              { key: "p50", title: "p50", value: (m) => latency(m.p50Ms) },
              { key: "p99", title: "p99", value: (m) => latency(m.p99Ms) },
              {
                key: "window",
                title: "Window",
                value: (m) =>
                  `${new Date(Number(m.fromUnixMs)).toLocaleTimeString()}–${new Date(Number(m.toUnixMs)).toLocaleTimeString()}`,
              },
            ]}
          />
        </>
      )}
    </div>
  );
}

/** Old and new instances per region since the page opened (at most the last 15 minutes). */
function Moves(props: { samples: readonly RolloutSample[] }) {
  const now = Date.now();
  const from = Math.max(props.samples[0]?.atMs ?? now, now - MOVES_WINDOW_MS);
  return (
    <div class="charts">
      <LineChart
        title="Instances per region, new and old"
        unit="instances"
        from={from}
        to={Math.max(now, from + 1)}
        series={movesSeries(props.samples, from, now)}
      />
      <p class="muted">
        New: the target revision's instances (updated replicas); old: earlier revisions' still running. As pushed since
        this page opened.
      </p>
    </div>
  );
}
