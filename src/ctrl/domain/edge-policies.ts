// An environment's ordered edge policies (environments.edge_policies): add at a position, remove,
// move. Each change is saved through saveEnvironment, so it is a new routing version and every
// sentinel of the environment is re-rendered with the list (../payloads/sentinel.ts). The whole
// list is checked again before it is stored (names unique, at most MAX_EDGE_POLICIES).
import type { Kysely } from "kysely";
import {
  formatEdgePolicies,
  parseEdgePolicies,
  PolicyFieldError,
  type EdgePolicy,
} from "../../contracts/edge-policy.js";
import type { Database, EnvironmentRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { alreadyExists, invalidArgument, notFound } from "../errors.js";
import type { EnvironmentRef } from "../validate/types.js";
import { saveEnvironment } from "./environments.js";
import { findEnvironment } from "./tenancy.js";

export interface PolicyList {
  readonly policies: EdgePolicy[];
  readonly routingVersion: number;
}

/** The stored list (a row that no longer parses is shown empty rather than failing the read). */
export function storedPolicies(e: Pick<EnvironmentRow, "edge_policies">): EdgePolicy[] {
  if (e.edge_policies === null) return [];
  try {
    return parseEdgePolicies("edge_policies", JSON.parse(e.edge_policies) as unknown);
  } catch {
    return [];
  }
}

/** Pure: `p` inserted at `position` (undefined or past the end: last). */
export function withPolicy(list: readonly EdgePolicy[], p: EdgePolicy, position: number | undefined): EdgePolicy[] {
  if (list.some((x) => x.name === p.name)) throw alreadyExists(`edge policy "${p.name}"`);
  const at = position === undefined ? list.length : Math.min(position, list.length);
  return [...list.slice(0, at), p, ...list.slice(at)];
}

/** Pure: the policy named `name` moved to `position` (past the end: last). */
export function movedPolicy(list: readonly EdgePolicy[], name: string, position: number): EdgePolicy[] {
  const p = list.find((x) => x.name === name);
  if (!p) throw notFound(`edge policy "${name}"`);
  const rest = list.filter((x) => x !== p);
  const at = Math.min(position, rest.length);
  return [...rest.slice(0, at), p, ...rest.slice(at)];
}

/** Pure: the list without the policy named `name`. */
export function withoutPolicy(list: readonly EdgePolicy[], name: string): EdgePolicy[] {
  if (!list.some((x) => x.name === name)) throw notFound(`edge policy "${name}"`);
  return list.filter((x) => x.name !== name);
}

/** Checks the list again as a whole (the field of a problem is the request's "policy"). */
function checked(list: EdgePolicy[]): EdgePolicy[] {
  try {
    return parseEdgePolicies("policies", JSON.parse(formatEdgePolicies(list)) as unknown);
  } catch (err) {
    if (err instanceof PolicyFieldError) throw invalidArgument("policy", err.message);
    throw err;
  }
}

/** Applies `change` to the environment's list in one transaction (nothing stored when it throws). */
export async function changePolicies(
  store: Store,
  ref: EnvironmentRef,
  change: (list: EdgePolicy[]) => EdgePolicy[],
): Promise<PolicyList> {
  return store.write(async (tx) => {
    const { project, environment } = await findEnvironment(tx.trx, ref);
    const next = checked(change(storedPolicies(environment)));
    const stored = await saveEnvironment(tx, project, environment, {
      ...environment,
      edge_policies: next.length === 0 ? null : formatEdgePolicies(next),
      updated_at: tx.now,
    });
    return { policies: next, routingVersion: Number(stored.routing_version) };
  });
}

export async function listPolicies(db: Kysely<Database>, ref: EnvironmentRef): Promise<PolicyList> {
  const { environment } = await findEnvironment(db, ref);
  return { policies: storedPolicies(environment), routingVersion: Number(environment.routing_version) };
}
