// What the status tab shows and offers, derived from the live view (pure: no page, no calls).
import type { CanaryStep, Cluster, Deployment, DeploymentStatus } from "../../../gen/krane/ctrl/v1/api_pb.js";
import type { EnvironmentView } from "../../../gen/krane/ctrl/v1/live_pb.js";
import type { ProgressiveStatus, RegionRollout, RolloutStatus } from "../../../gen/krane/ctrl/v1/rollout_pb.js";
import type { Tone } from "../../components/badge.js";
import { ago, statusName } from "../../format.js";

/** The rollout's own actions (each asks first): the button, the confirmation's title, the call. */
export const ROLLOUT_ACTIONS = [
  ["Pause", "Pause the rollout", "pause"],
  ["Resume", "Resume the rollout", "resume"],
  ["Promote", "Promote to the next step", "promote"],
  ["Abort", "Abort: all traffic back to the stable revision", "abort"],
  ["Restart", "Restart: a fresh copy of the current revision (redeploy)", "restart"],
] as const;

export interface Revisions {
  /** Newest first. */
  all: DeploymentStatus[];
  /** The revision the rollout moves to (a rollback's target is an older one), else the newest. */
  current: Deployment | undefined;
  revisionOf: (deploymentId: string) => bigint | undefined;
}

export function revisions(view: EnvironmentView): Revisions {
  const all = [...(view.status?.deployments ?? [])].sort(
    (a, b) => Number(b.deployment?.revision ?? 0) - Number(a.deployment?.revision ?? 0),
  );
  const targetId = view.rollout?.regions[0]?.targetDeploymentId;
  const current = all.find((d) => d.deployment?.id === targetId)?.deployment ?? all[0]?.deployment;
  return { all, current, revisionOf: (id) => all.find((d) => d.deployment?.id === id)?.deployment?.revision };
}

/** Whether a revision's row offers a rollback to it: every revision but the rollout's target. */
export function offersRollback(
  d: DeploymentStatus,
  current: Deployment | undefined,
): d is DeploymentStatus & {
  deployment: Deployment;
} {
  return d.deployment !== undefined && d.deployment.id !== current?.id;
}

/** The confirmation's title of scaling to `replicas` in `region` ("": every region). */
export function scaleTitle(replicas: string, region: string): string {
  return `Scale to ${replicas} ${region === "" ? "in every region" : `in ${region}`}`;
}

/** The replicas a scale asks for: not a whole number is -1, which ctrl refuses with its message. */
export function scaleReplicas(text: string): number {
  const n = Number(text);
  return Number.isInteger(n) ? n : -1;
}

export interface InstanceRow {
  key: string;
  region: string;
  name: string;
  revision: number;
  state: string;
  node: string;
  /** The instance's last event: reason, exit code, when. */
  event: string;
  eventTitle: string;
}

/** Every instance of every revision, with its last event. */
export function instanceRows(view: EnvironmentView, now = Date.now()): InstanceRow[] {
  const lastEvent = new Map(view.latestEvents.map((e) => [`${e.region}/${e.instance}`, e]));
  return (view.status?.deployments ?? []).flatMap((d) =>
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
            ? `${ev.reason}${ev.exitCode !== undefined ? ` (exit ${ev.exitCode})` : ""} ${ago(ev.atUnixMs, now)}`
            : "",
          eventTitle: ev?.message ?? "",
        };
      }),
    ),
  );
}

/** A region's rollout in one word. */
export function regionState(r: RegionRollout): string {
  return r.complete ? "complete" : r.deadlineExceeded ? "failed" : r.paused ? "paused" : "progressing";
}

/** An agent heartbeats every 10 s: six missed in a row and it is taken as gone. */
export const AGENT_SILENT_MS = 60_000;

/**
 * Why a region's rollout may not move, when the reason is that nothing runs it: no agent ever
 * connected for the region, or its agents stopped heartbeating. Empty when one is heard.
 */
export function agentHint(region: string, clusters: readonly Cluster[], now = Date.now()): string {
  const mine = clusters.filter((c) => c.region === region);
  if (mine.some((c) => Number(c.lastHeartbeatUnixMs) > now - AGENT_SILENT_MS)) return "";
  const last = Math.max(0, ...mine.map((c) => Number(c.lastHeartbeatUnixMs)));
  return last === 0
    ? `no agent has connected for ${region}: nothing runs this rollout there`
    : `the agent of ${region} was last heard ${ago(last, now)}: nothing runs this rollout there now`;
}

export interface StepRow {
  text: string;
  /** The step the canary is at; a done step is muted. */
  at: "now" | "done" | "ahead";
}

/** A canary's steps, and where the rollout is among them. */
export function canarySteps(steps: readonly CanaryStep[], progressive: ProgressiveStatus | undefined): StepRow[] {
  return steps.map((s, i) => {
    const here = progressive !== undefined && progressive.step === i + 1 && progressive.canaryDeploymentId !== "";
    const done = progressive !== undefined && (progressive.step > i + 1 || progressive.canaryDeploymentId === "");
    const text =
      s.step.case === "setWeight"
        ? `weight ${s.step.value} %`
        : s.step.case === "pause"
          ? s.step.value.seconds > 0
            ? `pause ${s.step.value.seconds} s`
            : "pause until promoted"
          : "analysis";
    return { text, at: here ? "now" : done ? "done" : "ahead" };
  });
}

export function verdictTone(verdict: string): Tone {
  return verdict === "pass" ? "ok" : verdict === "fail" ? "bad" : "warn";
}

export interface DiffRow {
  field: string;
  now: string;
  then: string;
}

/** What a rollback to `to` changes, field by field (configuration with values, secrets by name only). */
export function rollbackDiff(from: Deployment | undefined, to: Deployment): DiffRow[] {
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

/**
 * The rollout section's lines about `krane rollback`: the pin, and per region the revision kept
 * warm for an instant rollback.
 */
export function rollbackLines(
  rollout: RolloutStatus,
  revisionOf: (deploymentId: string) => bigint | undefined,
): { text: string; tone: "warn" | "muted" }[] {
  const out: { text: string; tone: "warn" | "muted" }[] = [];
  if (rollout.pinnedDeploymentId !== "")
    out.push({
      text: `Pinned to r${rollout.pinnedRevision} by krane rollback: newer deployments take no traffic until krane rollback --unpin`,
      tone: "warn",
    });
  for (const r of rollout.regions) {
    const w = r.warm;
    if (w === undefined || w.deploymentId === "") continue;
    const until =
      w.untilUnixMs === 0n
        ? "until this rollout ends and its warm window after"
        : `until ${new Date(Number(w.untilUnixMs)).toLocaleTimeString()}`;
    out.push({
      text: `Warm in ${r.region}: r${revisionOf(w.deploymentId) ?? w.deploymentRevision} (${w.replicas} pods) for an instant rollback, ${until}`,
      tone: "muted",
    });
  }
  return out;
}
