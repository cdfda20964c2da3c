// What a rolling pass's outcome says to people (pure): the region's Progressing condition turning
// NewReplicaSetAvailable is a deploy that succeeded there, turning False with
// ProgressDeadlineExceeded one that failed. A condition already in that state says nothing again
// (a resync of a finished rollout keeps it as it is), so each rollout of a region notifies once.
import type { Condition } from "../../rollout/index.js";
import type { Notice } from "../domain/notifications.js";

const AVAILABLE = "NewReplicaSetAvailable";
const DEADLINE = "ProgressDeadlineExceeded";

export function passOutcome(before: readonly Condition[], after: readonly Condition[]): "succeeded" | "failed" | null {
  const was = before.find((c) => c.type === "Progressing");
  const now = after.find((c) => c.type === "Progressing");
  if (now === undefined) return null;
  const failed = (c: Condition | undefined): boolean => c?.status === "False" && c.reason === DEADLINE;
  if (now.reason === AVAILABLE && now.status === "True" && was?.reason !== AVAILABLE) return "succeeded";
  if (failed(now) && !failed(was)) return "failed";
  return null;
}

/** The notice of a pass that finished or failed a region's rollout of `target`; null: nothing to say. */
export function passNotice(
  env: { conditions: readonly Condition[]; progressDeadlineSeconds: number | null },
  after: readonly Condition[],
  region: string,
  target: { id: string; revision: number | string; image: string },
): Omit<Notice, "environmentId"> | null {
  const outcome = passOutcome(env.conditions, after);
  if (outcome === null) return null;
  const revision = Number(target.revision);
  const progressing = after.find((c) => c.type === "Progressing");
  const ok = outcome === "succeeded";
  return {
    type: ok ? "deploy.succeeded" : "deploy.failed",
    severity: ok ? "success" : "critical",
    summary: ok ? `revision ${revision} available in ${region}` : `deploy failed in ${region}`,
    text: ok
      ? `Revision ${revision} (${target.image}) finished rolling out in region ${region}.`
      : `Revision ${revision} (${target.image}) made no progress in region ${region} within its progress deadline${env.progressDeadlineSeconds === null ? "" : ` (${env.progressDeadlineSeconds} s)`}: ${progressing?.message ?? ""}`,
    region,
    deployment: { id: target.id, revision },
    details: { image: target.image, reason: progressing?.reason ?? null },
  };
}
