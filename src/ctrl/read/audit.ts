// The audit log as the API reads it: which chain a request means, pages of its events by number
// with filters, the chain's head, and the whole chain in batches for an export (one keyset page
// at a time, so an export's memory does not grow with the log).
import { sql, type Kysely } from "kysely";
import type { AuditRecord, ChainHead } from "../../contracts/audit.js";
import type { Database } from "../db/schema.js";
import { chainHead, INSTALLATION_CHAIN, recordOfRow } from "../domain/audit.js";
import { invalidArgument, notFound } from "../errors.js";
import { limitToPage, takePage, type Page, type PageQuery } from "./page.js";

export { chainHead } from "../domain/audit.js";

type Reader = Kysely<Database>;

export interface AuditQuery {
  /** The chain: a workspace's id, or "" for the installation's. */
  workspaceId: string;
  actor?: string;
  method?: string;
  target?: string;
  since?: number;
  until?: number;
  refusedOnly?: boolean;
}

/**
 * The chain a request names: a workspace by slug or id (a workspace deleted since keeps its chain,
 * found by its id), or the installation's.
 */
export async function auditChainOf(db: Reader, workspace: string, installation: boolean): Promise<string> {
  if (installation) {
    if (workspace !== "") throw invalidArgument("filter.installation", "not together with filter.workspace");
    return INSTALLATION_CHAIN;
  }
  if (workspace === "") throw invalidArgument("filter.workspace", "is required (or filter.installation)");
  if (workspace.startsWith("ws_")) {
    const known =
      (await db.selectFrom("workspaces").select("id").where("id", "=", workspace).executeTakeFirst()) ??
      (await db
        .selectFrom("audit_chains")
        .select("workspace_id as id")
        .where("workspace_id", "=", workspace)
        .executeTakeFirst());
    if (!known) throw notFound(`workspace "${workspace}"`);
    return workspace;
  }
  const w = await db.selectFrom("workspaces").select("id").where("slug", "=", workspace).executeTakeFirst();
  if (!w) throw notFound(`workspace "${workspace}"`);
  return w.id;
}

/** LIKE with its wildcards escaped (\ is the escape character). */
function likeLiteral(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

function filtered(db: Reader, q: AuditQuery) {
  let s = db.selectFrom("audit_events").selectAll().where("workspace_id", "=", q.workspaceId);
  if (q.actor !== undefined) {
    const actor = q.actor;
    s = s.where((eb) => eb.or([eb("actor_id", "=", actor), eb("actor_name", "=", actor)]));
  }
  if (q.method !== undefined) {
    const m = q.method;
    if (m.endsWith("/")) s = s.where(sql<boolean>`method LIKE ${`${likeLiteral(m)}%`} ESCAPE '\\'`);
    else if (m.includes("/")) s = s.where("method", "=", m);
    else s = s.where(sql<boolean>`method LIKE ${`%/${likeLiteral(m)}`} ESCAPE '\\'`);
  }
  if (q.target !== undefined)
    s = s.where(sql<boolean>`targets LIKE ${`%${likeLiteral(JSON.stringify(q.target))}%`} ESCAPE '\\'`);
  if (q.since !== undefined) s = s.where("at", ">=", q.since);
  if (q.until !== undefined) s = s.where("at", "<", q.until);
  if (q.refusedOnly) s = s.where("code", "!=", "ok");
  return s;
}

/** A page of a chain's events by number; a page's key is the number of its last event. */
export async function listAuditEvents(db: Reader, q: AuditQuery, page?: PageQuery<number>): Promise<Page<AuditRecord>> {
  let s = filtered(db, q);
  if (page?.after !== undefined) s = s.where("seq", ">", page.after);
  const rows = await limitToPage(s, page).orderBy("seq").execute();
  return takePage(rows.map(recordOfRow), page);
}

/**
 * The chain's head as of now, then every event of the chain matching `q` up to that head, in
 * batches of `batch` (oldest first).
 */
export async function* exportAuditEvents(
  db: Reader,
  q: AuditQuery,
  batch = 1000,
): AsyncGenerator<{ events: AuditRecord[]; head?: ChainHead }> {
  const head = await chainHead(db, q.workspaceId);
  let after = 0;
  let first = true;
  for (;;) {
    const rows = await filtered(db, q)
      .where("seq", ">", after)
      .where("seq", "<=", head.seq)
      .orderBy("seq")
      .limit(batch)
      .execute();
    const events = rows.map(recordOfRow);
    yield first ? { events, head } : { events };
    first = false;
    const last = events[events.length - 1];
    if (events.length < batch || last === undefined) return;
    after = last.seq;
  }
}
