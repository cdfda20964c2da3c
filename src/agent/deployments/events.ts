// Pure mapping from a deployment's pods to its instance events: what each pod's status shows of
// its containers' lifecycle right now. Not a history — a pod's status holds only the current and
// the last state of each container, so a pod yields at most a few events whatever happened to it
// (ctrl accumulates the history, bounded). Per container:
//  - "terminated": the last termination (lastState.terminated, or state.terminated) with the
//    kubelet's reason (OOMKilled, Error, Completed, ...), the exit code and the finish time;
//  - "waiting": a reason the container cannot start or run with (CrashLoopBackOff with the last
//    termination's exit code and time, ErrImagePull, ImagePullBackOff, InvalidImageName,
//    CreateContainerConfigError, ...); the kubelet's message names the image;
//  - "unready": a running container that was ready and stopped being ready — its readiness probe
//    fails. Read from the pod's Ready condition: it turned False after the container started (a
//    new pod whose probe has not passed yet is not an event). A failing liveness probe shows as
//    a restart: a "terminated" event with its exit code (the kubelet kills the container).
// Per pod: "evicted" when it is being or was evicted: the kubelet evicted it (status.reason
// Evicted, with the kubelet's message: which resource ran low), or the pod carries the
// DisruptionTarget condition Kubernetes sets before it deletes a pod for a disruption — an
// eviction through the API (a node drain: EvictionByEvictionAPI), preemption by the scheduler,
// a taint, or the kubelet (the condition's reason, with its message). One eviction per pod.
// Per pod that has not started (no container ran yet): "waiting" with the reason of a Warning
// event that says why when its status cannot (POD_START_FAILURES: a volume that cannot be
// mounted, the secret store's driver failing to sync its Secret), the cause cut out of the
// kubelet's or driver's wrapping ("external secrets: <the store's answer>"), at the event's first
// time, in place of the CreateContainerConfigError it causes. Such a pod is reported as a failed
// instance (status.ts) so that `krane status` shows it.
// Waiting and unready facts carry no time of their own in a pod's status: they use the time the
// pod last became unready (the Ready condition's transition), which is stable while the fact
// lasts, so the same fact reported again is the same event; an eviction uses the DisruptionTarget
// condition's transition when there is one.
import { createHash } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { ReportedInstanceEventSchema, type ReportedInstanceEvent } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { KubeObject } from "../../kube/object.js";
import { isRecord } from "../../kube/object.js";
import { cutMessage, POD_START_FAILURES } from "../runtime/trim.js";
import { EXTERNAL_SECRETS_VOLUME } from "./settings.js";

/** Waiting reasons that are part of a normal start, not events. */
const ORDINARY_WAITING = new Set(["ContainerCreating", "PodInitializing"]);

type Json = Record<string, unknown>;

function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}

function rec(v: unknown): Json | undefined {
  return isRecord(v) ? v : undefined;
}

function ms(v: unknown): number {
  const t = Date.parse(str(v));
  return Number.isFinite(t) && t > 0 ? t : 0;
}

function int32(v: unknown): number | undefined {
  return typeof v === "number" && Number.isInteger(v) && v >= -(2 ** 31) && v < 2 ** 31 ? v : undefined;
}

/** The events a pod's status shows now, in a stable order. */
export function podEvents(pod: KubeObject): ReportedInstanceEvent[] {
  const instance = pod.metadata.name ?? "";
  if (instance === "") return [];
  const status = rec(pod.status) ?? {};
  const conditions = Array.isArray(status.conditions) ? status.conditions : [];
  const readyCond = conditions.map(rec).find((c) => c?.type === "Ready");
  const disruption = conditions.map(rec).find((c) => c?.type === "DisruptionTarget" && c.status === "True");
  const unreadySince = readyCond && readyCond.status !== "True" ? ms(readyCond.lastTransitionTime) : 0;
  const out: ReportedInstanceEvent[] = [];
  const event = (
    kind: string,
    reason: string,
    at: number,
    fields: { exitCode?: number; restarts?: number; image?: string; message?: string } = {},
  ): void => {
    out.push(
      create(ReportedInstanceEventSchema, {
        instance,
        kind,
        reason,
        atUnixMs: BigInt(at),
        exitCode: fields.exitCode,
        restarts: fields.restarts ?? 0,
        image: fields.image ?? "",
        message: cutMessage(fields.message ?? ""),
      }),
    );
  };
  const statuses = Array.isArray(status.containerStatuses) ? status.containerStatuses : [];
  for (const raw of statuses) {
    const cs = rec(raw);
    if (!cs) continue;
    const restarts = Math.max(0, int32(cs.restartCount) ?? 0);
    const image = str(cs.image);
    const state = rec(cs.state) ?? {};
    const last = rec(rec(cs.lastState)?.terminated);
    const current = rec(state.terminated);
    // The newest termination: the current one when the container is down, else the last one.
    const term = current ?? last;
    if (term) {
      event("terminated", str(term.reason) || "Error", ms(term.finishedAt), {
        exitCode: int32(term.exitCode),
        restarts,
        image,
        message: str(term.message),
      });
    }
    const waiting = rec(state.waiting);
    const reason = str(waiting?.reason);
    if (waiting && reason !== "" && !ORDINARY_WAITING.has(reason)) {
      const crash = reason === "CrashLoopBackOff" && last !== undefined;
      event("waiting", reason, crash ? ms(last.finishedAt) : unreadySince, {
        exitCode: crash ? int32(last.exitCode) : undefined,
        restarts,
        image,
        message: str(waiting.message),
      });
    }
    const running = rec(state.running);
    if (running && cs.ready === false && cs.started !== false && unreadySince > ms(running.startedAt)) {
      event("unready", "ReadinessProbeFailing", unreadySince, { restarts, image });
    }
  }
  const kubeletEvicted = str(status.reason) === "Evicted";
  if (kubeletEvicted || disruption) {
    // The kubelet's own reason and message say more (the resource that ran low) than its
    // condition (TerminationByKubelet).
    const reason = kubeletEvicted ? "Evicted" : str(disruption?.reason) || "Evicted";
    const message = kubeletEvicted ? str(status.message) : str(disruption?.message);
    const at = disruption ? ms(disruption.lastTransitionTime) : unreadySince;
    event("evicted", /^[A-Za-z][A-Za-z0-9]{0,63}$/.test(reason) ? reason : "Evicted", at, { message });
  }
  return out;
}

/** Whether any container of the pod has run (a start failure no longer concerns it). */
function started(pod: KubeObject): boolean {
  const status = rec(pod.status) ?? {};
  const statuses = Array.isArray(status.containerStatuses) ? status.containerStatuses : [];
  return statuses.some((raw) => {
    const cs = rec(raw);
    const state = rec(cs?.state);
    return (
      state?.running !== undefined || state?.terminated !== undefined || rec(cs?.lastState)?.terminated !== undefined
    );
  });
}

/**
 * The cause in a kubelet's or driver's message, without the layers that wrap it (the volume
 * operation, gRPC's "rpc error: code = … desc =", the driver's "…, err:"), and the volume it is
 * about: "external secrets: <cause>" for krane's external secrets volume.
 */
export function startFailureMessage(reason: string, message: string): string {
  const volume = /volume "([^"]+)"/.exec(message)?.[1];
  const cause =
    message
      .split(/\bdesc = |, err: |, error: /)
      .pop()
      ?.trim() ?? "";
  const what = cause === "" ? message : cause;
  // The Secrets Store CSI driver syncs only external secrets' Secrets.
  if (volume === EXTERNAL_SECRETS_VOLUME || reason === "FailedToCreateSecret") return `external secrets: ${what}`;
  return volume === undefined ? what : `volume ${volume}: ${what}`;
}

/**
 * The instance events a pod that has not started gets from its Warning events (trimmed Event
 * objects about it): the newest of each reason in POD_START_FAILURES.
 */
export function startFailureEvents(pod: KubeObject, warnings: readonly KubeObject[]): ReportedInstanceEvent[] {
  const instance = pod.metadata.name ?? "";
  if (instance === "" || started(pod)) return [];
  const newest = new Map<string, { at: number; message: string }>();
  for (const w of warnings) {
    const e = w as KubeObject & Json;
    const reason = str(e.reason);
    if (!POD_START_FAILURES.has(reason)) continue;
    const at = ms(e.firstTimestamp);
    const seen = newest.get(reason);
    if (seen === undefined || at > seen.at) newest.set(reason, { at, message: str(e.message) });
  }
  return [...newest.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([reason, { at, message }]) =>
      create(ReportedInstanceEventSchema, {
        instance,
        kind: "waiting",
        reason,
        atUnixMs: BigInt(at),
        restarts: 0,
        image: "",
        message: cutMessage(startFailureMessage(reason, message)),
      }),
    );
}

/** Whether the pod has not started and a Warning event says why (it is reported as failed). */
export function cannotStart(pod: KubeObject, warnings: readonly KubeObject[]): boolean {
  return startFailureEvents(pod, warnings).length > 0;
}

/**
 * The events of a deployment's pods (terminal ones included), by pod name then in pod order;
 * `warningsOf` gives the Warning events about a pod (none when omitted).
 */
export function eventsOf(
  pods: readonly KubeObject[],
  warningsOf: (pod: KubeObject) => readonly KubeObject[] = () => [],
): ReportedInstanceEvent[] {
  const sorted = [...pods].sort((a, b) => {
    const x = a.metadata.name ?? "";
    const y = b.metadata.name ?? "";
    return x < y ? -1 : x > y ? 1 : 0;
  });
  return sorted.flatMap((p) => {
    const failures = startFailureEvents(p, warningsOf(p));
    if (failures.length === 0) return podEvents(p);
    // The cause replaces its consequence: a container held back for want of the Secret the
    // store's driver could not sync waits with CreateContainerConfigError, which says only that
    // the Secret is missing (and, in the same second, would hide the driver's reason as the
    // instance's last event).
    const own = podEvents(p).filter((e) => !(e.kind === "waiting" && e.reason === "CreateContainerConfigError"));
    return [...own, ...failures];
  });
}

export function eventLine(e: ReportedInstanceEvent): string {
  return `${e.instance}|${e.kind}|${e.reason}|${e.atUnixMs}|${e.exitCode ?? ""}|${e.restarts}|${e.image}|${e.message}`;
}

/** What a pod contributes to its deployment's events, as a string (a change means a new report). */
export function eventsKey(pod: KubeObject | undefined): string {
  return pod === undefined ? "" : podEvents(pod).map(eventLine).join("\n");
}

/** Identifies a set of events: equal fingerprints mean ctrl would learn nothing new. */
export function eventsFingerprint(events: readonly ReportedInstanceEvent[]): string {
  const h = createHash("sha256");
  for (const e of events) h.update(`${eventLine(e)}\n`);
  return h.digest("hex");
}
