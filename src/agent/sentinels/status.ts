// What the sentinel controller reports to ctrl about a live sentinel Deployment: its available
// replicas and a health derived from them. Pure, so the mapping is unit-tested.
//   spec.replicas == 0          → PAUSED   (scaled to zero on purpose)
//   status.availableReplicas > 0 → HEALTHY  (at least one replica can route)
//   otherwise                   → UNHEALTHY
import { Health } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { isRecord, type KubeObject } from "../../kube/object.js";

export interface SentinelObservation {
  readonly k8sName: string;
  readonly availableReplicas: number;
  readonly health: Health;
}

function intField(o: unknown, field: string): number | undefined {
  if (!isRecord(o)) return undefined;
  const v = o[field];
  return typeof v === "number" && Number.isFinite(v) ? v : undefined;
}

export function sentinelHealth(specReplicas: number, availableReplicas: number): Health {
  if (specReplicas === 0) return Health.PAUSED;
  return availableReplicas > 0 ? Health.HEALTHY : Health.UNHEALTHY;
}

export function observeSentinel(deployment: KubeObject): SentinelObservation {
  // An absent spec.replicas means the API server default of 1, not 0.
  const specReplicas = intField(deployment.spec, "replicas") ?? 1;
  // The API server omits zero-valued status counters.
  const availableReplicas = Math.max(0, intField(deployment.status, "availableReplicas") ?? 0);
  return {
    k8sName: deployment.metadata.name ?? "",
    availableReplicas,
    health: sentinelHealth(specReplicas, availableReplicas),
  };
}

/** Identical observations have identical fingerprints, so unchanged status is not re-sent. */
export function observationFingerprint(o: SentinelObservation): string {
  return `${o.k8sName}|${o.availableReplicas}|${o.health}`;
}
