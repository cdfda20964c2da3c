// What rollouts say to people (pure). A rolling pass: the region's Progressing condition turning
// NewReplicaSetAvailable is a deploy that succeeded there, turning False with
// ProgressDeadlineExceeded one that failed. A condition already in that state says nothing again
// (a resync of a finished rollout keeps it as it is), so each rollout of a region notifies once.
// A progressive decision: its events (RolloutCompleted after a canary: promoted; aborted: the
// verdict that did it; RolledBack: a rollback), each once, as the engine emits them once.
import type { Condition } from "../../rollout/index.js";
import type { Decision, ProgressiveState, Verdict } from "../../rollout/progressive/index.js";
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

/** What a progressive decision says to people (pure): its events read against the revisions. */
export function progressiveNotices(
  before: ProgressiveState,
  d: Pick<Decision, "state" | "events" | "aborted">,
  revisions: readonly { id: string; revision: number | string; image: string }[],
): Omit<Notice, "environmentId">[] {
  const rev = (id: string | null) => (id === null ? undefined : revisions.find((r) => r.id === id));
  const about = (id: string | null) => {
    const r = rev(id);
    return r === undefined ? {} : { deployment: { id: r.id, revision: Number(r.revision) } };
  };
  const name = (id: string | null) => {
    const r = rev(id);
    return r === undefined ? "the previous revision" : `revision ${Number(r.revision)}`;
  };
  const verdict = (v: Verdict | null) =>
    v === null ? { verdict: null, verdict_reason: null } : { verdict: v.result, verdict_reason: v.reason };
  const out: Omit<Notice, "environmentId">[] = [];
  const has = (reason: string) => d.events.find((e) => e.reason === reason);
  const rolledBack = has("RolledBack");
  if (rolledBack) {
    out.push({
      type: "rollback",
      severity: "warning",
      summary: `rolled back to ${name(d.state.stable)}`,
      text: rolledBack.message,
      ...about(d.state.stable),
      details: { from: rev(before.stable)?.image ?? null },
    });
  } else if (d.aborted) {
    const v = d.state.analysis.last ?? d.state.lastVerdict;
    out.push({
      type: "canary.aborted",
      severity: "critical",
      summary: `rollout of ${name(d.state.canary)} aborted`,
      text: d.state.reason,
      ...about(d.state.canary),
      details: { image: rev(d.state.canary)?.image ?? null, ...verdict(v) },
    });
  }
  if (has("RolloutCompleted") && before.canary !== null) {
    out.push({
      type: "canary.promoted",
      severity: "success",
      summary: `${name(d.state.stable)} promoted`,
      text: `${name(d.state.stable)} serves all traffic in every region${
        before.lastVerdict === null
          ? ""
          : ` (last analysis: ${before.lastVerdict.result}, ${before.lastVerdict.reason})`
      }.`,
      ...about(d.state.stable),
      details: { image: rev(d.state.stable)?.image ?? null, ...verdict(d.state.lastVerdict ?? before.lastVerdict) },
    });
  }
  return out;
}

/** `krane rollout undo`: a rolling rollback asked for in every region. */
export function rollbackNotice(toRevision: number | null): Omit<Notice, "environmentId"> {
  const to = toRevision === null ? "the previous revision" : `revision ${toRevision}`;
  return {
    type: "rollback",
    severity: "warning",
    summary: `rolling back to ${to}`,
    text: `A rollback to ${to} was asked for (krane rollout undo); every region rolls back.`,
    details: { to_revision: toRevision },
  };
}
