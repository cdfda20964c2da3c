// Pure: why a builder pod will not build (any more), in words for the build's record; undefined
// while it is starting or running.
import type { KubeObject } from "../../kube/object.js";
import { failingReasons } from "../deployments/status.js";

interface ContainerState {
  readonly waiting?: { reason?: string; message?: string };
  readonly terminated?: { reason?: string; exitCode?: number; message?: string };
}
interface PodStatus {
  readonly phase?: string;
  readonly reason?: string;
  readonly message?: string;
  readonly containerStatuses?: readonly { name: string; state?: ContainerState }[];
}
interface PodSpecPart {
  readonly activeDeadlineSeconds?: number;
  readonly containers?: readonly { name: string; resources?: { limits?: { cpu?: string; memory?: string } } }[];
}

/** Whether the kubelet stopped the pod at its activeDeadlineSeconds (the build's time limit). */
export function pastDeadline(pod: KubeObject): boolean {
  return (pod as { status?: PodStatus }).status?.reason === "DeadlineExceeded";
}

export function podProblem(pod: KubeObject): string | undefined {
  const status = (pod as { status?: PodStatus }).status ?? {};
  const spec = (pod as { spec?: PodSpecPart }).spec ?? {};
  if (status.reason === "DeadlineExceeded")
    return `the build ran past its time limit of ${String(spec.activeDeadlineSeconds ?? "?")} s: its builder pod was stopped`;
  for (const c of status.containerStatuses ?? []) {
    const t = c.state?.terminated;
    if (t?.reason === "OOMKilled") {
      const memory = spec.containers?.find((x) => x.name === c.name)?.resources?.limits?.memory ?? "?";
      return `the build ran out of its memory limit (${memory}): its builder pod's ${c.name} was killed`;
    }
    if (t) return `the builder pod's ${c.name} ended (${t.reason ?? `exit code ${String(t.exitCode ?? "?")}`})`;
    const w = c.state?.waiting;
    if (w?.reason !== undefined && failingReasons.has(w.reason))
      return `the builder pod's ${c.name} cannot start: ${w.reason}${w.message ? `: ${w.message}` : ""}`;
  }
  if (status.phase === "Failed" || status.phase === "Succeeded")
    return `the builder pod ended (${status.reason ?? status.phase}${status.message ? `: ${status.message}` : ""})`;
  return undefined;
}
