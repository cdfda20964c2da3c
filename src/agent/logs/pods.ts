// What of a pod the log reader needs: its app container's id (the current one, or with `previous`
// the one before the last restart), once the container has started.
import { isRecord, type KubeObject } from "../../kube/object.js";

export interface ContainerRef {
  /** The container runtime's id ("containerd://…"): a restart is a new id. */
  readonly id: string;
}

/** The container to read, or undefined when there is none yet (pending) or none before (previous). */
export function appContainer(pod: KubeObject, name: string, previous: boolean): ContainerRef | undefined {
  const status = isRecord(pod.status) ? pod.status : {};
  const statuses = Array.isArray(status.containerStatuses) ? status.containerStatuses : [];
  const c = statuses.find((s): s is Record<string, unknown> => isRecord(s) && s.name === name);
  if (!c) return undefined;
  if (previous) {
    // The kubelet keeps the container before the last restart: there is one once it restarted.
    const restarts = typeof c.restartCount === "number" ? c.restartCount : 0;
    const last = isRecord(c.lastState) && isRecord(c.lastState.terminated) ? c.lastState.terminated : undefined;
    const id = last && typeof last.containerID === "string" ? last.containerID : "";
    return restarts > 0 || id ? { id: id || `restart-${restarts}` } : undefined;
  }
  const state = isRecord(c.state) ? c.state : {};
  // Waiting (ContainerCreating, CrashLoopBackOff): nothing new to read yet.
  if (!isRecord(state.running) && !isRecord(state.terminated)) return undefined;
  const id = typeof c.containerID === "string" ? c.containerID : "";
  return id ? { id } : undefined;
}

/** The id of the pod's app container when it is running now, else "". */
export function runningContainer(pod: KubeObject, name: string): string {
  const status = isRecord(pod.status) ? pod.status : {};
  const statuses = Array.isArray(status.containerStatuses) ? status.containerStatuses : [];
  const c = statuses.find((s): s is Record<string, unknown> => isRecord(s) && s.name === name);
  if (!c || !isRecord(c.state) || !isRecord(c.state.running)) return "";
  return typeof c.containerID === "string" ? c.containerID : "";
}

/**
 * Whether the pod is a stand-in: its app container shown running without a container id. A
 * kubelet always names the container it runs; KWOK's simulated nodes (the local cluster's
 * stand-ins) run none, so there is no log to read.
 */
export function isStandIn(pod: KubeObject, name: string): boolean {
  const status = isRecord(pod.status) ? pod.status : {};
  const statuses = Array.isArray(status.containerStatuses) ? status.containerStatuses : [];
  const c = statuses.find((s): s is Record<string, unknown> => isRecord(s) && s.name === name);
  if (!c || !isRecord(c.state) || !isRecord(c.state.running)) return false;
  return typeof c.containerID !== "string" || c.containerID === "";
}
