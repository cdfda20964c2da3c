// Writing a ReplicaSet's size: the new size plus the desired/max-replicas annotations, and the
// ScalingReplicaSet event when the size changes.
import { maxSurge } from "./fenceposts.js";
import type { Pass, ReplicaSet } from "./model.js";

export function scaleReplicaSet(pass: Pass, rs: ReplicaSet, newScale: number, operation: "up" | "down" | ""): boolean {
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
    message: `Scaled ${operation} replica set ${rs.name} to ${newScale} from ${oldScale}`,
  });
  return true;
}

/** Scale to `newScale` if different; the direction names the event. */
export function scaleReplicaSetAndRecordEvent(pass: Pass, rs: ReplicaSet, newScale: number): boolean {
  if (rs.replicas === newScale) return false;
  return scaleReplicaSet(pass, rs, newScale, rs.replicas < newScale ? "up" : "down");
}
