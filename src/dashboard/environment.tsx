// An environment's page: one live view (LiveService.WatchEnvironment) feeds every tab; the
// status tab shows the rollout (per region; a canary's steps, weights and analysis verdict with
// the measurements behind it), revisions, instances with their last event, sentinels, and the
// actions (deploy, scale, pause/resume, promote/abort, restart, rollback after a diff).
import { useState } from "preact/hooks";
import type { Deployment } from "../gen/krane/ctrl/v1/api_pb.js";
import type { EnvironmentView } from "../gen/krane/ctrl/v1/live_pb.js";
import { api } from "./api.js";
import { Charts } from "./charts.js";
import { Events } from "./events.js";
import { LiveBadge, useLiveStream } from "./live.js";
import { Logs } from "./logs.js";
import { Settings } from "./settings.js";
import { ENV_TABS, envHash, type EnvRef, type EnvTab } from "./router.js";
import { Table } from "./table.js";
import { ago, statusName, useConfirmedActions } from "./util.js";

/**
 * The page of one environment. Its state (the view, each tab's data, filters, typed input, an
 * open confirmation) is that environment's: the route mounts it keyed by `envKey`, so another
 * environment gets a fresh page, never this one's data under the other's name.
 */
export function EnvironmentPage(props: EnvRef & { tab: EnvTab }) {
  const ref = { workspace: props.workspace, project: props.project, environment: props.environment };
  const [view, setView] = useState<EnvironmentView | undefined>(undefined);
  const { state, error } = useLiveStream(
    (signal) => api.live.watchEnvironment(ref, { signal }),
    (m) => {
      if (m.view) setView(m.view);
    },
    [props.workspace, props.project, props.environment],
  );
  const tab = props.tab;
  return (
    <main>
      <p>
        <a href="#/">Overview</a> / {props.workspace} / {props.project}/{props.environment} <LiveBadge state={state} />
      </p>
      <nav aria-label="Environment" class="tabs">
        {ENV_TABS.map(([t, title]) => (
          <a key={t} href={envHash(ref, t)} aria-current={t === tab ? "page" : undefined}>
            {title}
          </a>
        ))}
      </nav>
      {/* A refusal ends the stream: only ctrl's message, nothing that would act on the environment. */}
      {error ? (
        <p class="error" role="alert">
          {error}
        </p>
      ) : !view ? (
        <p class="muted">Loading…</p>
      ) : tab === "events" ? (
        <Events envRef={ref} view={view} />
      ) : tab === "logs" ? (
        <Logs envRef={ref} view={view} />
      ) : tab === "charts" ? (
        <Charts envRef={ref} view={view} />
      ) : tab === "config" ? (
        <Settings envRef={ref} view={view} />
      ) : (
        <Status envRef={ref} view={view} />
      )}
    </main>
  );
}

interface Row {
  field: string;
  now: string;
  then: string;
}

/** What a rollback to `to` changes, field by field (configuration with values, secrets by name only). */
export function rollbackDiff(from: Deployment | undefined, to: Deployment): Row[] {
  const f = (d: Deployment | undefined) => ({
    image: d?.image ?? "",
    command: [...(d?.command ?? []), ...(d?.args ?? [])].join(" "),
    port: String(d?.port ?? ""),
    "environment variables": (d?.env ?? [])
      .map((e) => e.name)
      .sort()
      .join(", "),
    config: (d?.config ?? [])
      .map((e) => `${e.name}=${e.value}`)
      .sort()
      .join(", "),
    "secret names": [...(d?.secretKeys ?? [])].sort().join(", "),
  });
  const a = f(from);
  const b = f(to);
  return (Object.keys(a) as (keyof typeof a)[]).map((k) => ({ field: k, now: a[k], then: b[k] }));
}

function Status(props: { envRef: EnvRef; view: EnvironmentView }) {
  const ref = props.envRef;
  const { status, rollout } = props.view;
  const { act, errors, dialog } = useConfirmedActions();
  const [image, setImage] = useState("");
  const [replicas, setReplicas] = useState("");
  const [scaleRegion, setScaleRegion] = useState("");
  const deployments = [...(status?.deployments ?? [])].sort(
    (a, b) => Number(b.deployment?.revision ?? 0) - Number(a.deployment?.revision ?? 0),
  );
  // The revision the rollout moves to (a rollback's target is an older one), else the newest.
  const targetId = rollout?.regions[0]?.targetDeploymentId;
  const current = deployments.find((d) => d.deployment?.id === targetId)?.deployment ?? deployments[0]?.deployment;
  const revisionOf = (id: string) => deployments.find((d) => d.deployment?.id === id)?.deployment?.revision;
  const lastEvent = new Map(props.view.latestEvents.map((e) => [`${e.region}/${e.instance}`, e]));
  const instances = deployments.flatMap((d) =>
    d.regions.flatMap((r) =>
      r.instances.map((i) => {
        const ev = lastEvent.get(`${r.region}/${i.k8sName}`);
        return {
          key: `${r.region}/${i.k8sName}`,
          region: r.region,
          name: i.k8sName,
          revision: Number(d.deployment?.revision ?? 0),
          state: statusName(i.status),
          node: i.nodeName,
          event: ev
            ? `${ev.reason}${ev.exitCode !== undefined ? ` (exit ${ev.exitCode})` : ""} ${ago(ev.atUnixMs)}`
            : "",
          eventTitle: ev?.message ?? "",
        };
      }),
    ),
  );
  const progressive = rollout?.progressive;
  const spec = status?.environment?.rollout?.progressive;
  const regions = status?.environment?.regions ?? [];

  return (
    <>
      <h2>Actions</h2>
      <form
        class="actions"
        onSubmit={(e) => {
          e.preventDefault();
          const img = image.trim();
          act({
            title: `Deploy ${img}`,
            field: "image",
            body: <p>A new revision with this image rolls out to every region.</p>,
            run: () => api.deployments.createDeployment({ ...ref, image: img, port: current?.port ?? 0 }),
            onDone: () => setImage(""),
          });
        }}
      >
        <label>
          Image
          <input
            name="image"
            value={image}
            onInput={(e) => setImage(e.currentTarget.value)}
            placeholder={current?.image ?? "registry/app:tag"}
            aria-describedby="image-error"
            required
          />
        </label>
        <button class="primary" type="submit">
          Deploy
        </button>
        <span id="image-error" class="error" role="alert">
          {errors.image ?? ""}
        </span>
      </form>
      <form
        class="actions"
        onSubmit={(e) => {
          e.preventDefault();
          const n = Number(replicas);
          act({
            title: `Scale to ${replicas} ${scaleRegion === "" ? "in every region" : `in ${scaleRegion}`}`,
            field: "scale",
            run: () => api.rollout.scale({ ...ref, region: scaleRegion, replicas: Number.isInteger(n) ? n : -1 }),
          });
        }}
      >
        <label>
          Replicas
          <input
            name="replicas"
            inputMode="numeric"
            value={replicas}
            onInput={(e) => setReplicas(e.currentTarget.value)}
            aria-describedby="scale-error"
            required
            size={6}
          />
        </label>
        <label>
          Region
          <select value={scaleRegion} onChange={(e) => setScaleRegion(e.currentTarget.value)}>
            <option value="">every region</option>
            {regions.map((r) => (
              <option key={r.region} value={r.region}>
                {r.region} (now {r.replicas})
              </option>
            ))}
          </select>
        </label>
        <button type="submit">Scale</button>
        <span id="scale-error" class="error" role="alert">
          {errors.scale ?? ""}
        </span>
      </form>
      <div class="actions">
        {(
          [
            ["Pause", "Pause the rollout", () => api.rollout.pause(ref)],
            ["Resume", "Resume the rollout", () => api.rollout.resume(ref)],
            ["Promote", "Promote to the next step", () => api.rollout.promote(ref)],
            ["Abort", "Abort: all traffic back to the stable revision", () => api.rollout.abort(ref)],
            ["Restart", "Restart: a fresh copy of the current revision (redeploy)", () => api.rollout.restart(ref)],
          ] as const
        ).map(([label, title, run]) => (
          <button key={label} type="button" onClick={() => act({ title, field: "action", run })}>
            {label}
          </button>
        ))}
      </div>
      <p class="error" role="alert">
        {errors.action ?? ""}
      </p>
      {dialog}
      <h2>Rollout</h2>
      {rollout && (
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
          <Table
            label="Rollout per region"
            rows={rollout.regions}
            rowKey={(r) => r.region}
            columns={[
              { key: "region", title: "Region", value: (r) => r.region },
              {
                key: "phase",
                title: "State",
                value: (r) =>
                  r.complete ? "complete" : r.deadlineExceeded ? "failed" : r.paused ? "paused" : "progressing",
              },
              { key: "desired", title: "Desired", value: (r) => r.replicas },
              { key: "updated", title: "Updated", value: (r) => r.updatedReplicas },
              { key: "ready", title: "Ready", value: (r) => r.readyReplicas },
              { key: "available", title: "Available", value: (r) => r.availableReplicas },
              { key: "msg", title: "Progress", value: (r) => r.message },
            ]}
          />
          {spec?.canary && spec.canary.steps.length > 0 && (
            <>
              <h3>Canary steps</h3>
              <ol class="steps" aria-label="Canary steps">
                {spec.canary.steps.map((s, i) => {
                  const here =
                    progressive !== undefined && progressive.step === i + 1 && progressive.canaryDeploymentId;
                  const done =
                    progressive !== undefined && (progressive.step > i + 1 || !progressive.canaryDeploymentId);
                  const text =
                    s.step.case === "setWeight"
                      ? `weight ${s.step.value} %`
                      : s.step.case === "pause"
                        ? s.step.value.seconds > 0
                          ? `pause ${s.step.value.seconds} s`
                          : "pause until promoted"
                        : "analysis";
                  return (
                    <li key={i} class={here ? "current" : done ? "muted" : ""} aria-current={here ? "step" : undefined}>
                      {text}
                      {here ? " ← now" : ""}
                    </li>
                  );
                })}
              </ol>
            </>
          )}
          {progressive && progressive.weights.length > 0 && (
            <Table
              label="Traffic weights"
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
                <strong
                  class={
                    progressive.lastAnalysis === "pass" ? "ok" : progressive.lastAnalysis === "fail" ? "bad" : "warn"
                  }
                >
                  {progressive.lastAnalysis}
                </strong>{" "}
                {ago(progressive.lastAnalysisUnixMs)}: {progressive.lastAnalysisReason}
              </p>
              <Table
                label="Measurements behind the verdict"
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
                  { key: "p50", title: "p50", value: (m) => ms(m.p50Ms) },
                  { key: "p99", title: "p99", value: (m) => ms(m.p99Ms) },
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
      )}
      <h2>Revisions</h2>
      <Table
        label="Revisions"
        rows={deployments}
        rowKey={(d) => d.deployment?.id ?? ""}
        columns={[
          { key: "rev", title: "Revision", value: (d) => Number(d.deployment?.revision ?? 0) },
          { key: "image", title: "Image", value: (d) => d.deployment?.image ?? "" },
          {
            key: "when",
            title: "Created",
            value: (d) => Number(d.deployment?.createdAtUnixMs ?? 0),
            render: (d) => ago(d.deployment?.createdAtUnixMs ?? 0),
          },
          {
            key: "running",
            title: "Running / desired",
            value: (d) => d.regions.map((r) => `${r.region} ${r.runningInstances}/${r.desiredReplicas}`).join(", "),
          },
          {
            key: "rollback",
            title: "Rollback",
            value: () => "",
            render: (d) =>
              d.deployment && d.deployment.id !== current?.id ? (
                <button
                  type="button"
                  aria-label={`Roll back to revision ${d.deployment.revision}`}
                  onClick={() => {
                    const to = d.deployment as Deployment;
                    act({
                      title: `Roll back to revision ${to.revision}`,
                      field: "action",
                      run: () => api.rollout.undo({ ...ref, toRevision: to.revision }),
                      body: (
                        <table class="diff" aria-label="What the rollback changes">
                          <thead>
                            <tr>
                              <th scope="col">Field</th>
                              <th scope="col">Now (r{String(current?.revision ?? "")})</th>
                              <th scope="col">After (r{String(to.revision)})</th>
                            </tr>
                          </thead>
                          <tbody>
                            {rollbackDiff(current, to).map((row) => (
                              <tr key={row.field}>
                                <td>{row.field}</td>
                                <td>{row.now}</td>
                                <td class={row.now !== row.then ? "changed" : ""}>{row.then}</td>
                              </tr>
                            ))}
                          </tbody>
                        </table>
                      ),
                    });
                  }}
                >
                  Roll back
                </button>
              ) : (
                <span class="muted">target</span>
              ),
          },
        ]}
      />
      <h2>Instances</h2>
      <Table
        label="Instances"
        rows={instances}
        rowKey={(r) => r.key}
        filter
        columns={[
          { key: "region", title: "Region", value: (r) => r.region },
          { key: "name", title: "Instance", value: (r) => r.name },
          { key: "rev", title: "Revision", value: (r) => r.revision },
          {
            key: "state",
            title: "State",
            value: (r) => r.state,
            render: (r) => <span class={r.state === "running" ? "ok" : "warn"}>{r.state}</span>,
          },
          {
            key: "event",
            title: "Last event",
            value: (r) => r.event,
            render: (r) => <span title={r.eventTitle}>{r.event}</span>,
          },
          { key: "node", title: "Node", value: (r) => r.node },
        ]}
      />
      <h2>Sentinels</h2>
      <Table
        label="Sentinels"
        rows={status?.sentinels ?? []}
        rowKey={(s) => s.sentinelId + s.region}
        columns={[
          { key: "region", title: "Region", value: (s) => s.region },
          { key: "avail", title: "Available / desired", value: (s) => `${s.availableReplicas}/${s.desiredReplicas}` },
          {
            key: "routing",
            title: "Routing version served / desired",
            value: (s) => `${s.servedRoutingVersion}/${s.routingVersion}`,
            render: (s) => (
              <span class={s.servedRoutingVersion === s.routingVersion ? "ok" : "warn"}>
                {String(s.servedRoutingVersion)}/{String(s.routingVersion)}
              </span>
            ),
          },
          { key: "address", title: "Address", value: (s) => s.address },
          {
            key: "seen",
            title: "Reported",
            value: (s) => Number(s.reportedAtUnixMs),
            render: (s) => ago(s.reportedAtUnixMs),
          },
        ]}
      />
      <h2>Clusters</h2>
      <Table
        label="Clusters of the environment's regions"
        rows={status?.clusters ?? []}
        rowKey={(c) => c.id}
        columns={[
          { key: "region", title: "Region", value: (c) => c.region },
          { key: "name", title: "Cluster", value: (c) => c.name },
          {
            key: "seen",
            title: "Last seen",
            value: (c) => Number(c.lastHeartbeatUnixMs),
            render: (c) => ago(c.lastHeartbeatUnixMs),
          },
          { key: "behind", title: "Backlog (changes)", value: (c) => Number(c.changesBehind) },
        ]}
      />
    </>
  );
}

function ms(v: number | undefined): string {
  if (v === undefined) return "";
  return v < 0 ? "> 30 s" : `≤ ${v} ms`;
}
