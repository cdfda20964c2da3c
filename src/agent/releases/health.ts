// The health of one applied object of a release, from its live state (pure): Progressing,
// Healthy, Degraded or Suspended, with a short message. Rules per kind follow what a platform
// user expects (a Job done or failed, a Deployment available or stuck), with OpenChoreo's known
// mistakes fixed: a waiting reason such as CrashLoopBackOff is Degraded even while a container
// is not ready, and a Deployment whose Progressing reason is NewReplicaSetAvailable has finished
// rolling out. Kinds without rules (ConfigMap, Service, …) are Healthy once they exist.
import { ObjectHealth } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { KubeObject } from "../../kube/object.js";

export interface HealthVerdict {
  health: ObjectHealth;
  message: string;
}

interface Condition {
  type?: string;
  status?: string;
  reason?: string;
  message?: string;
}

const BAD_WAITING = new Set([
  "CrashLoopBackOff",
  "ImagePullBackOff",
  "ErrImagePull",
  "CreateContainerConfigError",
  "InvalidImageName",
]);

function num(v: unknown): number {
  return typeof v === "number" ? v : 0;
}

function conditions(o: KubeObject): Condition[] {
  const s = o.status as { conditions?: Condition[] } | undefined;
  return Array.isArray(s?.conditions) ? s.conditions : [];
}

function cond(o: KubeObject, type: string): Condition | undefined {
  return conditions(o).find((c) => c.type === type);
}

const ok = (message = ""): HealthVerdict => ({ health: ObjectHealth.HEALTHY, message });
const progressing = (message: string): HealthVerdict => ({ health: ObjectHealth.PROGRESSING, message });
const degraded = (message: string): HealthVerdict => ({ health: ObjectHealth.DEGRADED, message });
const suspended = (message: string): HealthVerdict => ({ health: ObjectHealth.SUSPENDED, message });

function deployment(o: KubeObject): HealthVerdict {
  const spec = (o.spec ?? {}) as { paused?: boolean; replicas?: number };
  const s = (o.status ?? {}) as Record<string, unknown>;
  const desired = spec.replicas ?? 1;
  if (spec.paused) return suspended("paused");
  if (desired === 0) return suspended("scaled to 0");
  const gen = o.metadata.generation ?? 0;
  const observed = num(s.observedGeneration);
  if (observed === 0 || gen > observed) return progressing("waiting for the controller to observe the change");
  const prog = cond(o, "Progressing");
  if (prog?.reason === "ProgressDeadlineExceeded") return degraded(prog.message ?? "progress deadline exceeded");
  if (cond(o, "ReplicaFailure")?.status === "True")
    return degraded(cond(o, "ReplicaFailure")?.message ?? "replica failure");
  const updated = num(s.updatedReplicas);
  const available = num(s.availableReplicas);
  const ready = num(s.readyReplicas);
  if (
    updated === desired &&
    available === desired &&
    ready === desired &&
    num(s.unavailableReplicas) === 0 &&
    num(s.replicas) === desired
  )
    return ok(`${available}/${desired} available`);
  if (prog?.status === "True" && prog.reason === "NewReplicaSetAvailable" && available >= desired)
    return ok(`${available}/${desired} available`);
  return progressing(`${available}/${desired} available, ${updated} updated`);
}

function statefulSet(o: KubeObject): HealthVerdict {
  const spec = (o.spec ?? {}) as { replicas?: number };
  const s = (o.status ?? {}) as Record<string, unknown>;
  const desired = spec.replicas ?? 1;
  if (num(s.observedGeneration) < (o.metadata.generation ?? 0))
    return progressing("waiting for the controller to observe the change");
  if (s.currentRevision !== s.updateRevision) return progressing("rolling out a new revision");
  if (num(s.readyReplicas) === desired && num(s.availableReplicas) === desired && num(s.updatedReplicas) === desired)
    return ok(`${desired}/${desired} ready`);
  return progressing(`${num(s.readyReplicas)}/${desired} ready`);
}

function job(o: KubeObject): HealthVerdict {
  if ((o.spec as { suspend?: boolean } | undefined)?.suspend) return suspended("suspended");
  const failed = cond(o, "Failed");
  if (failed?.status === "True") return degraded(failed.message ?? failed.reason ?? "failed");
  if (cond(o, "Complete")?.status === "True") return ok("complete");
  const s = (o.status ?? {}) as Record<string, unknown>;
  return progressing(`${num(s.active)} running, ${num(s.succeeded)} succeeded`);
}

function cronJob(o: KubeObject): HealthVerdict {
  if ((o.spec as { suspend?: boolean } | undefined)?.suspend) return suspended("suspended");
  const s = (o.status ?? {}) as { active?: unknown[]; lastScheduleTime?: string };
  if (Array.isArray(s.active) && s.active.length > 0) return progressing(`${s.active.length} run(s) active`);
  return ok(s.lastScheduleTime ? `last scheduled ${s.lastScheduleTime}` : "scheduled");
}

function pod(o: KubeObject): HealthVerdict {
  const s = (o.status ?? {}) as {
    phase?: string;
    containerStatuses?: { ready?: boolean; state?: { waiting?: { reason?: string } } }[];
  };
  switch (s.phase) {
    case "Pending":
      return progressing("pending");
    case "Succeeded":
      return ok("succeeded");
    case "Failed":
      return degraded("failed");
    case "Running": {
      for (const c of s.containerStatuses ?? []) {
        const reason = c.state?.waiting?.reason;
        if (reason && BAD_WAITING.has(reason)) return degraded(reason);
      }
      if ((s.containerStatuses ?? []).some((c) => !c.ready)) return progressing("containers not ready");
      return ok("running");
    }
    default:
      return { health: ObjectHealth.UNSPECIFIED, message: s.phase ?? "unknown" };
  }
}

function hpa(o: KubeObject): HealthVerdict {
  const active = cond(o, "ScalingActive");
  if (active?.status === "False") return degraded(active.message ?? active.reason ?? "cannot scale");
  return ok();
}

export function healthOf(o: KubeObject): HealthVerdict {
  const group = (o.apiVersion ?? "").includes("/") ? (o.apiVersion ?? "").split("/")[0] : "";
  switch (`${group}/${o.kind ?? ""}`) {
    case "apps/Deployment":
      return deployment(o);
    case "apps/StatefulSet":
      return statefulSet(o);
    case "batch/Job":
      return job(o);
    case "batch/CronJob":
      return cronJob(o);
    case "/Pod":
      return pod(o);
    case "autoscaling/HorizontalPodAutoscaler":
      return hpa(o);
    default:
      return ok();
  }
}
