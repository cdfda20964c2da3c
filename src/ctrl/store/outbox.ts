// The outbox: every change of desired state is written in the same transaction as a row whose
// version is allocated inside that transaction, per (region, kind) stream.
//
// Allocation is `UPDATE stream_versions SET version = version + n ... RETURNING version`. The row
// lock it takes is held until commit, so two writers of one stream commit in version order and
// a reader that sees version v has already been able to see every version below v. Writers
// allocate at the very end of their transaction, in a fixed (kind, region) order, so the lock is
// short and two multi-region writers cannot deadlock on it.
//
// Separate sequences per kind (rather than one per region with a kind column) keep each
// stream's versions dense — a gap is always a bug or a compaction, never "the other kind" — and
// keep deployment writers from queueing behind sentinel writers.
import { sql, type Kysely, type Transaction } from "kysely";
import type { DialectName } from "./database.js";
import { NOTIFY_CHANNEL, type Poke } from "./notify.js";
import type { ChangeOp, Database, ObjectKind } from "./schema.js";

export interface OutboxChange {
  region: string;
  kind: ObjectKind;
  version: number;
  objectId: string;
  op: ChangeOp;
  payload: Uint8Array;
}

interface PendingChange {
  region: string;
  kind: ObjectKind;
  objectId: string;
  op: ChangeOp;
  payload: Uint8Array;
}

/** better-sqlite3 binds Buffers, not bare Uint8Arrays; pg accepts both. */
export function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A write transaction that records desired-state changes and flushes them to the outbox. */
export class WriteTx {
  private readonly pending: PendingChange[] = [];

  constructor(
    readonly trx: Transaction<Database>,
    readonly dialect: DialectName,
    readonly now: number,
  ) {}

  /** Sets the desired state of one object in one region (create or replace). */
  async putDesired(region: string, kind: ObjectKind, objectId: string, payload: Uint8Array): Promise<void> {
    await this.trx
      .insertInto("desired_objects")
      .values({ region, kind, object_id: objectId, payload: toBuffer(payload) })
      .onConflict((oc) => oc.columns(["region", "kind", "object_id"]).doUpdateSet({ payload: toBuffer(payload) }))
      .execute();
    this.pending.push({ region, kind, objectId, op: "apply", payload });
  }

  /**
   * Removes an object from a region's desired state. The delete is streamed only when the object
   * was desired there; returns whether it was.
   */
  async removeDesired(region: string, kind: ObjectKind, objectId: string, payload: Uint8Array): Promise<boolean> {
    const res = await this.trx
      .deleteFrom("desired_objects")
      .where("region", "=", region)
      .where("kind", "=", kind)
      .where("object_id", "=", objectId)
      .executeTakeFirst();
    if (Number(res.numDeletedRows) === 0) return false;
    this.pending.push({ region, kind, objectId, op: "delete", payload });
    return true;
  }

  get changeCount(): number {
    return this.pending.length;
  }

  /** Portable path (SQLite, where a statement is a function call): three statements. */
  private async writeGeneric(region: string, kind: ObjectKind, changes: PendingChange[]): Promise<number> {
    const last = await allocateVersions(this.trx, region, kind, changes.length);
    const base = last - changes.length;
    const rows = changes.map((c, i) => ({
      region,
      kind,
      version: base + i + 1,
      object_id: c.objectId,
      op: c.op,
      payload: toBuffer(c.payload),
      created_at: this.now,
    }));
    // Bounded batches keep us under SQLite's bound-parameter limit.
    for (let i = 0; i < rows.length; i += 500) {
      await this.trx.insertInto("outbox").values(rows.slice(i, i + 500)).execute();
    }
    return last;
  }

  /**
   * PostgreSQL: version allocation, the outbox rows and the notification in one statement, so
   * the counter's row lock is held for just that statement and the commit (one round trip
   * fewer each than separate statements, which is what bounds a region's write rate).
   */
  private async writePostgres(region: string, kind: ObjectKind, changes: PendingChange[]): Promise<number> {
    const n = changes.length;
    const ids = changes.map((c) => c.objectId);
    const ops = changes.map((c) => c.op);
    const payloads = changes.map((c) => toBuffer(c.payload));
    for (let attempt = 0; attempt < 2; attempt++) {
      const res = await sql<{ version: number }>`
        WITH v AS (
          UPDATE stream_versions SET version = version + ${n}::bigint
          WHERE region = ${region} AND kind = ${kind}
          RETURNING version
        ), x AS (
          SELECT * FROM unnest(${ids}::text[], ${ops}::text[], ${payloads}::bytea[]) WITH ORDINALITY AS x(object_id, op, payload, ord)
        ), ins AS (
          INSERT INTO outbox (region, kind, version, object_id, op, payload, created_at)
          SELECT ${region}, ${kind}, v.version - ${n}::bigint + x.ord, x.object_id, x.op, x.payload, ${this.now}::bigint FROM v, x
        )
        SELECT version, pg_notify(${NOTIFY_CHANNEL}, ${`${kind}/${region}/`} || version::text) FROM v`.execute(this.trx);
      const row = res.rows[0];
      if (row) return Number(row.version);
      await this.trx
        .insertInto("stream_versions")
        .values({ region, kind, version: 0, compacted_through: 0 })
        .onConflict((oc) => oc.columns(["region", "kind"]).doNothing())
        .execute();
    }
    throw new Error(`cannot allocate a version for ${kind}/${region}`);
  }

  /** Allocates versions and writes the outbox rows; returns one poke per stream touched. */
  async flush(): Promise<Poke[]> {
    if (this.pending.length === 0) return [];
    const groups = new Map<string, PendingChange[]>();
    for (const c of this.pending) {
      const key = `${c.kind}/${c.region}`;
      const g = groups.get(key);
      if (g) g.push(c);
      else groups.set(key, [c]);
    }
    const pokes: Poke[] = [];
    for (const key of [...groups.keys()].sort()) {
      const changes = groups.get(key) ?? [];
      const first = changes[0];
      if (!first) continue;
      const last =
        this.dialect === "postgres"
          ? await this.writePostgres(first.region, first.kind, changes)
          : await this.writeGeneric(first.region, first.kind, changes);
      const poke = { kind: first.kind, region: first.region, version: last };
      pokes.push(poke);
    }
    this.pending.length = 0;
    return pokes;
  }
}

/** Reserves n versions of a stream inside the caller's transaction; returns the last one. */
export async function allocateVersions(
  trx: Transaction<Database>,
  region: string,
  kind: ObjectKind,
  n: number,
): Promise<number> {
  for (let attempt = 0; attempt < 2; attempt++) {
    const row = await trx
      .updateTable("stream_versions")
      .set({ version: sql<number>`version + ${n}` })
      .where("region", "=", region)
      .where("kind", "=", kind)
      .returning("version")
      .executeTakeFirst();
    if (row) return Number(row.version);
    await trx
      .insertInto("stream_versions")
      .values({ region, kind, version: 0, compacted_through: 0 })
      .onConflict((oc) => oc.columns(["region", "kind"]).doNothing())
      .execute();
  }
  throw new Error(`cannot allocate a version for ${kind}/${region}`);
}

export interface StreamPosition {
  /** Highest committed version (0 when nothing was ever written). */
  head: number;
  /** Every version <= compactedThrough has been deleted from the outbox. */
  compactedThrough: number;
}

export async function streamPosition(db: Kysely<Database>, region: string, kind: ObjectKind): Promise<StreamPosition> {
  const row = await db
    .selectFrom("stream_versions")
    .select(["version", "compacted_through"])
    .where("region", "=", region)
    .where("kind", "=", kind)
    .executeTakeFirst();
  return row ? { head: Number(row.version), compactedThrough: Number(row.compacted_through) } : { head: 0, compactedThrough: 0 };
}

/** Outbox rows after a cursor, in version order. */
export async function readOutbox(
  db: Kysely<Database>,
  region: string,
  kind: ObjectKind,
  after: number,
  limit: number,
): Promise<OutboxChange[]> {
  const rows = await db
    .selectFrom("outbox")
    .select(["region", "kind", "version", "object_id", "op", "payload"])
    .where("region", "=", region)
    .where("kind", "=", kind)
    .where("version", ">", after)
    .orderBy("version")
    .limit(limit)
    .execute();
  return rows.map((r) => ({
    region: r.region,
    kind: r.kind,
    version: Number(r.version),
    objectId: r.object_id,
    op: r.op,
    payload: r.payload,
  }));
}

export interface Snapshot {
  head: number;
  objects: { objectId: string; payload: Uint8Array }[];
}

/** The full desired state of a region for one kind, and the head version it corresponds to. */
export async function readSnapshot(
  db: Kysely<Database>,
  dialect: DialectName,
  region: string,
  kind: ObjectKind,
): Promise<Snapshot> {
  // One transaction so the rows and the head belong together (a repeatable-read snapshot on
  // PostgreSQL; SQLite's single connection is serialized anyway).
  let builder = db.transaction();
  if (dialect === "postgres") builder = builder.setIsolationLevel("repeatable read");
  return builder.execute(async (trx) => {
    const pos = await trx
      .selectFrom("stream_versions")
      .select("version")
      .where("region", "=", region)
      .where("kind", "=", kind)
      .executeTakeFirst();
    const rows = await trx
      .selectFrom("desired_objects")
      .select(["object_id", "payload"])
      .where("region", "=", region)
      .where("kind", "=", kind)
      .orderBy("object_id")
      .execute();
    return {
      head: pos ? Number(pos.version) : 0,
      objects: rows.map((r) => ({ objectId: r.object_id, payload: r.payload })),
    };
  });
}

/** The current desired payload of one object in a region, or undefined. */
export async function readDesired(
  db: Kysely<Database>,
  region: string,
  kind: ObjectKind,
  objectIds: readonly string[],
): Promise<Map<string, Uint8Array>> {
  const out = new Map<string, Uint8Array>();
  if (objectIds.length === 0) return out;
  const rows = await db
    .selectFrom("desired_objects")
    .select(["object_id", "payload"])
    .where("region", "=", region)
    .where("kind", "=", kind)
    .where("object_id", "in", [...objectIds])
    .execute();
  for (const r of rows) out.set(r.object_id, r.payload);
  return out;
}

/**
 * Bounded retention: keeps the newest `retain` versions of every stream and deletes older rows.
 * A cursor at or below compacted_through can no longer be resumed and gets a snapshot instead.
 * Safe to run from several ctrl replicas at once.
 */
export async function compactOutbox(db: Kysely<Database>, retain: number): Promise<number> {
  const streams = await db.selectFrom("stream_versions").select(["region", "kind", "version", "compacted_through"]).execute();
  let deleted = 0;
  for (const s of streams) {
    const horizon = Number(s.version) - retain;
    if (horizon <= Number(s.compacted_through)) continue;
    // Raise the horizon first: a reader that reads the horizon and then finds rows missing
    // treats the gap as compaction, never as data loss.
    await db
      .updateTable("stream_versions")
      .set({ compacted_through: horizon })
      .where("region", "=", s.region)
      .where("kind", "=", s.kind)
      .where("compacted_through", "<", horizon)
      .execute();
    const res = await db
      .deleteFrom("outbox")
      .where("region", "=", s.region)
      .where("kind", "=", s.kind)
      .where("version", "<=", horizon)
      .executeTakeFirst();
    deleted += Number(res.numDeletedRows);
  }
  return deleted;
}
