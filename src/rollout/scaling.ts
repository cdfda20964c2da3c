// Writing a ReplicaSet's size: the new size plus the desired/max-replicas annotations, and the
// ScalingReplicaSet event when the size changes ("Scaled up|down replica set X from M to N", the
// direction of this ReplicaSet's own change, as Kubernetes v1.36 words it).
import { maxSurge } from "./fenceposts.js";
import type { Pass, ReplicaSet } from "./model.js";

/** Writes size and annotations when either differs; true when the size changed. */
export function scaleReplicaSet(pass: Pass, rs: ReplicaSet, newScale: number): boolean {
  const d = pass.d;
  const desired = d.replicas;
  const max = d.replicas + maxSurge(d);
  const sizeNeedsUpdate = rs.replicas !== newScale;
  const annotationsNeedUpdate = rs.desiredReplicas !== desired || rs.maxReplicas !== max;
  if (!sizeNeedsUpdate && !annotationsNeedUpdate) return false;
  const oldScale = rs.replicas;
  rs.replicas = newScale;
  rs.desiredReplicas = desired;
  rs.maxReplicas = max;
  if (!sizeNeedsUpdate) return false;
  pass.events.push({
    type: "Normal",
    reason: "ScalingReplicaSet",
    message: `Scaled ${oldScale < newScale ? "up" : "down"} replica set ${rs.name} from ${oldScale} to ${newScale}`,
  });
  return true;
}

/** Scale to `newScale` only if the size differs (Kubernetes' lazy update). */
export function scaleReplicaSetAndRecordEvent(pass: Pass, rs: ReplicaSet, newScale: number): boolean {
  if (rs.replicas === newScale) return false;
  return scaleReplicaSet(pass, rs, newScale);
}
