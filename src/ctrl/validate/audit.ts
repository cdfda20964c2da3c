// Validation of the audit log's filters (ListAuditEvents, ExportAuditEvents). Pure.
import { invalidArgument } from "../errors.js";
import { text } from "./rules.js";

export interface AuditFilterInput {
  workspace: string;
  installation: boolean;
  actor?: string;
  method?: string;
  target?: string;
  since?: number;
  until?: number;
  refusedOnly: boolean;
}

const METHOD = /^([A-Za-z][A-Za-z0-9]*\/?|[A-Za-z][A-Za-z0-9]*\/[A-Za-z][A-Za-z0-9]*)$/;
const TARGET = /^[A-Za-z0-9_.:@/-]{1,256}$/;

function time(field: string, v: bigint): number | undefined {
  if (v === 0n) return undefined;
  if (v < 0n || v > BigInt(Number.MAX_SAFE_INTEGER)) throw invalidArgument(field, "must be unix milliseconds");
  return Number(v);
}

export function validateAuditFilter(
  f:
    | {
        workspace: string;
        installation: boolean;
        actor: string;
        method: string;
        target: string;
        sinceUnixMs: bigint;
        untilUnixMs: bigint;
        refusedOnly: boolean;
      }
    | undefined,
): AuditFilterInput {
  if (f === undefined)
    throw invalidArgument("filter", "is required (at least filter.workspace or filter.installation)");
  const workspace = text("filter.workspace", f.workspace, 64);
  const actor = f.actor === "" ? undefined : text("filter.actor", f.actor, 128);
  if (f.method !== "" && !METHOD.test(f.method))
    throw invalidArgument("filter.method", 'must be a method ("CreateDeployment"), "Service/Method" or "Service/"');
  if (f.target !== "" && !TARGET.test(f.target))
    throw invalidArgument("filter.target", "must be an id (letters, digits and _.:@/-, at most 256)");
  const since = time("filter.since_unix_ms", f.sinceUnixMs);
  const until = time("filter.until_unix_ms", f.untilUnixMs);
  if (since !== undefined && until !== undefined && until <= since)
    throw invalidArgument("filter.until_unix_ms", "must be after filter.since_unix_ms");
  return {
    workspace,
    installation: f.installation,
    actor,
    method: f.method === "" ? undefined : f.method,
    target: f.target === "" ? undefined : f.target,
    since,
    until,
    refusedOnly: f.refusedOnly,
  };
}
