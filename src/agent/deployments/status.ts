// Pure mapping from observed pods to the instance set reported to ctrl:
//  - terminal pods (Succeeded/Failed) are left out, and so are pods without an IP, except:
//  - FAILED, without an address, for a pod that has not started and a Warning event says why
//    (`cannotStart`, events.ts: a volume that cannot be mounted): there but broken, and shown;
//  - TERMINATING: a pod with a deletion timestamp that has not ended yet, IP or not — no longer a
//    replica, but its process may still run, which Recreate must wait out (Kubernetes' Recreate
//    looks at the old ReplicaSets' pods for the same reason);
//  - RUNNING only when phase Running and ContainersReady=True;
//  - FAILED while a container cannot start or keeps crashing (image pull errors,
//    CrashLoopBackOff, bad config) — a pod that is there but broken;
//  - PENDING otherwise (scheduled, starting, or running but not ready yet);
//  - ready_since from the Ready condition's transition time, so ctrl can apply minReadySeconds.
import { createHash } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { InstanceSchema, InstanceStatus, type Instance } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { KubeObject } from "../../kube/object.js";
import { isRecord } from "../../kube/object.js";
import { parseQuantity } from "../../kube/quantity.js";

/** Waiting reasons of a container that do not go away by waiting (also the builder pods', agent/builds). */
export const failingReasons: ReadonlySet<string> = new Set([
  "CrashLoopBackOff",
  "ErrImagePull",
  "ImagePullBackOff",
  "InvalidImageName",
  "CreateContainerConfigError",
  "CreateContainerError",
  "RunContainerError",
]);

interface Condition {
  type: string;
  status: string;
  lastTransitionTime?: string;
}

function conditions(pod: KubeObject): Condition[] {
  const status = isRecord(pod.status) ? pod.status : {};
  return Array.isArray(status.conditions) ? (status.conditions as Condition[]) : [];
}

function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}

export function instanceStatusOf(pod: KubeObject): InstanceStatus {
  const status = isRecord(pod.status) ? pod.status : {};
  const phase = str(status.phase);
  const containerStatuses = Array.isArray(status.containerStatuses) ? status.containerStatuses : [];
  for (const cs of containerStatuses) {
    if (!isRecord(cs) || !isRecord(cs.state)) continue;
    const waiting = cs.state.waiting;
    if (isRecord(waiting) && failingReasons.has(str(waiting.reason))) return InstanceStatus.FAILED;
  }
  const containersReady = conditions(pod).some((c) => c.type === "ContainersReady" && c.status === "True");
  if (phase === "Running" && containersReady) return InstanceStatus.RUNNING;
  return InstanceStatus.PENDING;
}

/** The instance for a pod, or undefined when the pod is not reported. */
export function podToInstance(
  pod: KubeObject,
  zoneOfNode: (node: string) => string,
  cannotStart = false,
): Instance | undefined {
  const status = isRecord(pod.status) ? pod.status : {};
  const phase = str(status.phase);
  if (phase === "Succeeded" || phase === "Failed") return undefined;
  const terminating = pod.metadata.deletionTimestamp !== undefined;
  const ip = str(status.podIP);
  if (ip === "" && !terminating && !cannotStart) return undefined;
  const spec = isRecord(pod.spec) ? pod.spec : {};
  const containers = Array.isArray(spec.containers) ? spec.containers : [];
  const c = isRecord(containers[0]) ? containers[0] : {};
  const ports = Array.isArray(c.ports) ? c.ports : [];
  const port = isRecord(ports[0]) && typeof ports[0].containerPort === "number" ? ports[0].containerPort : 0;
  const limits = isRecord(c.resources) && isRecord(c.resources.limits) ? c.resources.limits : {};
  const cpu = parseQuantity(str(limits.cpu)) ?? 0; // thousandths of a core = millicores
  const mem = parseQuantity(str(limits.memory)) ?? 0;
  const ready = terminating ? undefined : conditions(pod).find((x) => x.type === "Ready" && x.status === "True");
  const readySince = ready?.lastTransitionTime ? Date.parse(ready.lastTransitionTime) : 0;
  const nodeName = str(spec.nodeName);
  return create(InstanceSchema, {
    k8sName: pod.metadata.name ?? "",
    address: ip === "" ? "" : ip.includes(":") ? `[${ip}]:${port}` : `${ip}:${port}`,
    status: terminating ? InstanceStatus.TERMINATING : cannotStart ? InstanceStatus.FAILED : instanceStatusOf(pod),
    cpuMillicores: BigInt(Math.round(cpu)),
    memoryMib: BigInt(Math.round(mem / 1000 / 2 ** 20)),
    nodeName,
    zone: nodeName === "" ? "" : zoneOfNode(nodeName),
    readySinceUnixMs: BigInt(Number.isFinite(readySince) ? readySince : 0),
  });
}

/**
 * Instances sorted by pod name (a stable order for reports and fingerprints); `cannotStart` says
 * which pods have not started for a reason a Warning event gives (events.ts).
 */
export function instancesOf(
  pods: KubeObject[],
  zoneOfNode: (node: string) => string,
  cannotStart: (pod: KubeObject) => boolean = () => false,
): Instance[] {
  const out: Instance[] = [];
  for (const p of pods) {
    const i = podToInstance(p, zoneOfNode, cannotStart(p));
    if (i) out.push(i);
  }
  return out.sort((a, b) => (a.k8sName < b.k8sName ? -1 : a.k8sName > b.k8sName ? 1 : 0));
}

/** Identifies an instance set: equal fingerprints mean ctrl would learn nothing new. */
export function instancesFingerprint(k8sName: string, instances: Instance[]): string {
  const h = createHash("sha256").update(k8sName);
  for (const i of instances) h.update(`\n${instanceLine(i)}|${i.zone}`);
  return h.digest("hex");
}

function instanceLine(i: Instance): string {
  return `${i.k8sName}|${i.address}|${i.status}|${i.cpuMillicores}|${i.memoryMib}|${i.nodeName}|${i.readySinceUnixMs}`;
}

/**
 * What a pod contributes to its deployment's report, as a string ("" when it is not reported,
 * or there is no pod); the node's zone is left out (a pod's node does not change once set).
 */
export function instanceKey(pod: KubeObject | undefined): string {
  if (pod === undefined) return "";
  const i = podToInstance(pod, () => "");
  return i ? instanceLine(i) : "";
}
