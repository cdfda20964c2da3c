// The audit page's choices (pure): which chains the session is offered, which chain a bare
// #/audit opens, the filter a chain asks ctrl for, and what the page shows meanwhile.
import type { AuditEvent } from "../../gen/krane/ctrl/v1/audit_pb.js";

/** The installation's chain, as the route and the chain selector name it. */
export const INSTALLATION = "*";

/**
 * The chains offered, in order: the workspaces listed, then the route's own chain when it is not
 * listed (another workspace's: ctrl refuses it, and the page shows that refusal), then, to an
 * installation session only, the installation's (a workspace session would be refused it).
 */
export function chainOptions(
  listed: readonly string[],
  chain: string,
  installation: boolean,
): { value: string; label: string }[] {
  const workspaces = [...listed];
  if (chain !== "" && chain !== INSTALLATION && !workspaces.includes(chain)) workspaces.push(chain);
  const out = workspaces.map((w) => ({ value: w, label: `workspace ${w}` }));
  if (installation) out.push({ value: INSTALLATION, label: "the installation" });
  return out;
}

/** The chain a bare #/audit shows: the first workspace listed, else the installation's if offered, else none (""). */
export function firstChain(listed: readonly string[], installation: boolean): string {
  return listed[0] ?? (installation ? INSTALLATION : "");
}

/** ListAuditEvents' filter for `chain`. */
export function auditFilter(
  chain: string,
  refusedOnly: boolean,
): { installation: true; refusedOnly: boolean } | { workspace: string; refusedOnly: boolean } {
  return chain === INSTALLATION ? { installation: true, refusedOnly } : { workspace: chain, refusedOnly };
}

/**
 * What the page shows under its controls: ctrl's refusal (of the listing or of the chain), that
 * there is no chain to show, the wait, or the events (the quotas page reads its workspace's
 * quotas by the same rule).
 */
export function auditBody(
  error: string,
  chain: string,
  listed: readonly string[] | undefined,
  events: readonly unknown[] | undefined,
): "refused" | "none" | "loading" | "events" {
  if (error) return "refused";
  if (chain === "" && listed !== undefined) return "none";
  return events === undefined ? "loading" : "events";
}

/** Whether an event has details to open: what it changed, or ctrl's message. */
export function hasDetails(e: AuditEvent): boolean {
  return e.changes.length > 0 || e.message !== "";
}
