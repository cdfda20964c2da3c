// The audit log (tables audit_events, audit_chains, audit_sink_cursors, audit_sink_leases):
// appending an event to its chain, retention, and the bookkeeping of the sinks that deliver the
// log elsewhere. What an event holds and how the chain is hashed: src/contracts/audit.ts; who
// records which event: ../audit.
//
// Appending takes the chain's head row for update, so on PostgreSQL the events of one chain are
// numbered in commit order (a second writer of the same workspace waits for the first to commit);
// the head is written last in the change's transaction, after everything the change does, so the
// wait is only the rest of that transaction. Different workspaces never wait for each other.
import type { Kysely } from "kysely";
import {
  auditHash,
  GENESIS_HASH,
  type ActorKind,
  type AuditChange,
  type AuditRecord,
  type ChainHead,
} from "../../contracts/audit.js";
import type { WriteTx } from "../db/outbox.js";
import { parseJsonList, type AuditEventRow, type Database } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { newId } from "./ids.js";

type Reader = Kysely<Database>;

/** An event before its chain numbers and hashes it. */
export type AuditDraft = Omit<AuditRecord, "id" | "seq" | "at" | "prevHash" | "hash">;

export const INSTALLATION_CHAIN = "";

/** Stored text fields are bounded: a hostile header cannot make the log grow without end. */
const MAX_TEXT = 512;
const MAX_MESSAGE = 2048;

function bounded(s: string, max = MAX_TEXT): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

export function recordOfRow(r: AuditEventRow): AuditRecord {
  return {
    id: r.id,
    workspaceId: r.workspace_id,
    seq: Number(r.seq),
    at: Number(r.at),
    actorKind: r.actor_kind as ActorKind,
    actorId: r.actor_id,
    actorName: r.actor_name,
    method: r.method,
    targets: parseJsonList<string>(r.targets),
    requestId: r.request_id,
    clientIp: r.client_ip,
    userAgent: r.user_agent,
    idempotencyKey: r.idempotency_key,
    code: r.code,
    message: r.message,
    changes: parseJsonList<AuditChange>(r.changes),
    prevHash: r.prev_hash,
    hash: r.hash,
    ...(r.actor_scope === null ? {} : { actorScope: r.actor_scope }),
    ...(r.actor_owner === null ? {} : { actorOwner: r.actor_owner }),
  };
}

/** The head of a chain (seq 0 and the genesis hash when it has no event yet). */
export async function chainHead(db: Reader, workspaceId: string): Promise<ChainHead> {
  const row = await db
    .selectFrom("audit_chains")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .executeTakeFirst();
  return row
    ? {
        workspaceId,
        seq: Number(row.seq),
        hash: row.hash,
        prunedThroughSeq: Number(row.pruned_through_seq),
        prunedThroughHash: row.pruned_through_hash,
      }
    : { workspaceId, seq: 0, hash: GENESIS_HASH, prunedThroughSeq: 0, prunedThroughHash: GENESIS_HASH };
}

/**
 * Appends an event to its workspace's chain inside the caller's transaction (so it commits with
 * the change it records, or not at all) and returns it as stored.
 */
export async function appendAuditEvent(tx: WriteTx, draft: AuditDraft): Promise<AuditRecord> {
  const ws = draft.workspaceId;
  const lockHead = () =>
    tx.dialect
      .lockRows(tx.trx.selectFrom("audit_chains").select(["seq", "hash"]).where("workspace_id", "=", ws), "update")
      .executeTakeFirst();
  let head = await lockHead();
  if (!head) {
    // A chain's first event (on PostgreSQL a concurrent first insert waits for this one).
    await tx.trx
      .insertInto("audit_chains")
      .values({
        workspace_id: ws,
        seq: 0,
        hash: GENESIS_HASH,
        pruned_through_seq: 0,
        pruned_through_hash: GENESIS_HASH,
        updated_at: tx.now,
      })
      .onConflict((oc) => oc.column("workspace_id").doNothing())
      .execute();
    head = await lockHead();
    if (!head) throw new Error(`audit chain "${ws}" could not be created`);
  }
  const { actorScope, actorOwner, ...rest } = draft;
  const unhashed: Omit<AuditRecord, "hash"> = {
    ...rest,
    // An empty scope is no scope (what an export of it says: src/cli/audit-records.ts).
    ...(actorScope ? { actorScope } : {}),
    ...(actorOwner ? { actorOwner: bounded(actorOwner) } : {}),
    actorName: bounded(draft.actorName),
    method: bounded(draft.method),
    targets: draft.targets.slice(0, 32).map((t) => bounded(t, 256)),
    requestId: bounded(draft.requestId, 128),
    clientIp: bounded(draft.clientIp, 128),
    userAgent: bounded(draft.userAgent),
    idempotencyKey: bounded(draft.idempotencyKey, 255),
    message: bounded(draft.message, MAX_MESSAGE),
    id: newId("aud"),
    seq: Number(head.seq) + 1,
    at: tx.now,
    prevHash: head.hash,
  };
  const record: AuditRecord = { ...unhashed, hash: auditHash(unhashed) };
  await tx.trx
    .insertInto("audit_events")
    .values({
      id: record.id,
      workspace_id: record.workspaceId,
      seq: record.seq,
      at: record.at,
      actor_kind: record.actorKind,
      actor_id: record.actorId,
      actor_name: record.actorName,
      method: record.method,
      targets: JSON.stringify(record.targets),
      request_id: record.requestId,
      client_ip: record.clientIp,
      user_agent: record.userAgent,
      idempotency_key: record.idempotencyKey,
      code: record.code,
      message: record.message,
      changes: JSON.stringify(record.changes),
      prev_hash: record.prevHash,
      hash: record.hash,
      actor_scope: record.actorScope ?? null,
      actor_owner: record.actorOwner ?? null,
    })
    .execute();
  await tx.trx
    .updateTable("audit_chains")
    .set({ seq: record.seq, hash: record.hash, updated_at: tx.now })
    .where("workspace_id", "=", ws)
    .execute();
  return record;
}

/** Records an event in a transaction of its own (a refused call changed nothing to join). */
export async function recordAuditEvent(store: Store, draft: AuditDraft): Promise<AuditRecord> {
  return store.write((tx) => appendAuditEvent(tx, draft));
}

/**
 * Removes events older than `before` (unix ms) from every chain, at most `batch` per chain and
 * transaction, never past `keepFrom` (per chain: the first event a sink still has to deliver).
 * Only a chain's oldest events go (the ones before its first event at or after `before`), and the
 * last one removed becomes the chain's anchor. Returns how many were removed.
 */
export async function pruneAuditEvents(
  store: Store,
  before: number,
  opts: { batch?: number; keepFrom?: (workspaceId: string) => Promise<number | undefined> } = {},
): Promise<number> {
  const batch = opts.batch ?? 5_000;
  const chains = await store.db
    .selectFrom("audit_events")
    .select("workspace_id")
    .where("at", "<", before)
    .groupBy("workspace_id")
    .execute();
  let removed = 0;
  for (const { workspace_id: ws } of chains) {
    const keep = await opts.keepFrom?.(ws);
    for (;;) {
      const n = await store.write(async (tx) => {
        const head = await tx.dialect
          .lockRows(tx.trx.selectFrom("audit_chains").selectAll().where("workspace_id", "=", ws), "update")
          .executeTakeFirst();
        if (!head) return 0;
        const firstKept = await tx.trx
          .selectFrom("audit_events")
          .select((eb) => eb.fn.min("seq").as("seq"))
          .where("workspace_id", "=", ws)
          .where("at", ">=", before)
          .executeTakeFirst();
        let limit =
          firstKept?.seq === null || firstKept?.seq === undefined ? Number(head.seq) + 1 : Number(firstKept.seq);
        if (keep !== undefined) limit = Math.min(limit, keep);
        const from = Number(head.pruned_through_seq) + 1;
        const through = Math.min(limit - 1, from + batch - 1);
        if (through < from) return 0;
        const last = await tx.trx
          .selectFrom("audit_events")
          .select("hash")
          .where("workspace_id", "=", ws)
          .where("seq", "=", through)
          .executeTakeFirst();
        if (!last) return 0;
        const res = await tx.trx
          .deleteFrom("audit_events")
          .where("workspace_id", "=", ws)
          .where("seq", ">=", from)
          .where("seq", "<=", through)
          .executeTakeFirst();
        await tx.trx
          .updateTable("audit_chains")
          .set({ pruned_through_seq: through, pruned_through_hash: last.hash })
          .where("workspace_id", "=", ws)
          .execute();
        return Number(res.numDeletedRows);
      });
      removed += n;
      if (n < batch) break;
    }
  }
  return removed;
}

// ---------------------------------------------------------------- sinks

/** Takes or renews the delivery lease of a sink for `owner`; false while another replica holds it. */
export async function leaseSink(store: Store, sink: string, owner: string, ttlMs: number): Promise<boolean> {
  return store.write(async (tx) => {
    await tx.trx
      .insertInto("audit_sink_leases")
      .values({ sink, owner, expires_at: tx.now + ttlMs })
      .onConflict((oc) => oc.column("sink").doNothing())
      .execute();
    const lease = await tx.dialect
      .lockRows(tx.trx.selectFrom("audit_sink_leases").selectAll().where("sink", "=", sink), "update")
      .executeTakeFirstOrThrow();
    if (lease.owner !== owner && Number(lease.expires_at) > tx.now) return false;
    await tx.trx
      .updateTable("audit_sink_leases")
      .set({ owner, expires_at: tx.now + ttlMs })
      .where("sink", "=", sink)
      .execute();
    return true;
  });
}

/** The chains with events a sink has not delivered yet, and where its cursor is in each. */
export async function sinkBacklog(db: Reader, sink: string): Promise<{ workspaceId: string; delivered: number }[]> {
  const rows = await db
    .selectFrom("audit_chains as c")
    .leftJoin("audit_sink_cursors as s", (j) =>
      j.onRef("s.workspace_id", "=", "c.workspace_id").on("s.sink", "=", sink),
    )
    .select(["c.workspace_id", "c.seq", "s.seq as delivered"])
    .execute();
  return rows
    .filter((r) => Number(r.seq) > Number(r.delivered ?? 0))
    .map((r) => ({ workspaceId: r.workspace_id, delivered: Number(r.delivered ?? 0) }));
}

/** The first event of a chain a sink has not delivered (undefined: no such sink position). */
export async function sinkPosition(db: Reader, sink: string, workspaceId: string): Promise<number> {
  const row = await db
    .selectFrom("audit_sink_cursors")
    .select("seq")
    .where("sink", "=", sink)
    .where("workspace_id", "=", workspaceId)
    .executeTakeFirst();
  return Number(row?.seq ?? 0) + 1;
}

/** Moves a sink's cursor forward to `seq` (never back). */
export async function advanceSinkCursor(store: Store, sink: string, workspaceId: string, seq: number): Promise<void> {
  await store.write(async (tx) => {
    await tx.trx
      .insertInto("audit_sink_cursors")
      .values({ sink, workspace_id: workspaceId, seq })
      .onConflict((oc) => oc.columns(["sink", "workspace_id"]).doNothing())
      .execute();
    await tx.trx
      .updateTable("audit_sink_cursors")
      .set({ seq })
      .where("sink", "=", sink)
      .where("workspace_id", "=", workspaceId)
      .where("seq", "<", seq)
      .execute();
  });
}
