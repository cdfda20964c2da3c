// Recreate: scale every old ReplicaSet to 0, wait until none of their pods exist (terminating
// ones included), then create and scale the new ReplicaSet to the full count (Kubernetes'
// recreate.go, which looks at the old ReplicaSets' pods for this).
import { cleanupDeployment } from "./history.js";
import type { Pass } from "./model.js";
import { syncRevision } from "./newrs.js";
import { filterActive, sumStatus } from "./replicasets.js";
import { scaleReplicaSetAndRecordEvent } from "./scaling.js";
import { deploymentComplete, syncRolloutStatus } from "./status.js";

export function rolloutRecreate(pass: Pass): void {
  // Not created yet: the new ReplicaSet must not get pods before the old ones are gone.
  let { newRS, oldRSs } = syncRevision(pass, false);
  let allRSs = newRS === undefined ? [...oldRSs] : [...oldRSs, newRS];

  let scaledDown = false;
  for (const old of filterActive(oldRSs)) {
    if (scaleReplicaSetAndRecordEvent(pass, old, 0)) scaledDown = true;
  }
  if (scaledDown) return syncRolloutStatus(pass, allRSs, newRS);

  // Old pods still there: running or starting (status.replicas), or shutting down.
  if (sumStatus(oldRSs, "replicas") + sumStatus(oldRSs, "terminatingReplicas") > 0) {
    return syncRolloutStatus(pass, allRSs, newRS);
  }

  if (newRS === undefined) {
    ({ newRS, oldRSs } = syncRevision(pass, true));
    if (newRS === undefined) throw new Error("recreate could not create the new ReplicaSet");
    allRSs = [...oldRSs, newRS];
  }
  scaleReplicaSetAndRecordEvent(pass, newRS, pass.d.replicas);

  if (deploymentComplete(pass.d, pass.status)) cleanupDeployment(pass, oldRSs);
  syncRolloutStatus(pass, allRSs, newRS);
}
