// Rollback: point the deployment at an earlier revision (0 = the previous one). The pass only
// switches the target; the following passes roll out to it, and it gets the newest revision number.
import { quote } from "./conditions.js";
import type { Pass } from "./model.js";
import { syncRevision } from "./newrs.js";
import { lastRevision } from "./replicasets.js";

export function rollback(pass: Pass, rollbackTo: number): void {
  const d = pass.d;
  const { newRS, oldRSs } = syncRevision(pass, true);
  const allRSs = newRS === undefined ? oldRSs : [...oldRSs, newRS];
  let revision = rollbackTo;
  if (revision === 0) {
    revision = lastRevision(allRSs);
    if (revision === 0) {
      warn(pass, "DeploymentRollbackRevisionNotFound", "Unable to find last revision.");
      return;
    }
  }
  const found = allRSs.find((rs) => rs.revision === revision);
  if (found === undefined) {
    warn(pass, "DeploymentRollbackRevisionNotFound", "Unable to find the revision to rollback to.");
    return;
  }
  if (found === newRS) {
    warn(
      pass,
      "DeploymentRollbackTemplateUnchanged",
      `The rollback revision contains the same template as current deployment ${quote(d.name)}`,
    );
    return;
  }
  d.target = found.name;
  pass.events.push({
    type: "Normal",
    reason: "DeploymentRollback",
    message: `Rolled back deployment ${quote(d.name)} to revision ${revision}`,
  });
}

function warn(pass: Pass, reason: string, message: string): void {
  pass.events.push({ type: "Warning", reason, message });
}
