// The outbox: every change of desired state is written in the same transaction as a row whose
// version is allocated inside that transaction, per (region, kind) stream.
//
// Allocation is `UPDATE stream_versions SET version = version + n ... RETURNING version`. The row
// lock it takes is held until commit, so two writers of one stream commit in version order and
// a reader that sees version v has already been able to see every version below v. Allocation
// happens in a fixed (kind, region) order, so two multi-region writers cannot deadlock on it,
// and as late as possible: on SQLite at the end of the transaction (one writer at a time
// anyway), on PostgreSQL inside the COMMIT itself (commit-sequencer.ts).
//
// Separate sequences per kind (rather than one per region with a kind column) keep each
// stream's versions dense — a gap is always a bug or a compaction, never "the other kind" — and
// keep deployment writers from queueing behind sentinel writers.
import { sql, type Kysely, type Transaction } from "kysely";
import type { DialectName } from "./database.js";
import type { Poke } from "./notify.js";
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

/**
 * A write transaction that records desired-state changes with their outbox rows.
 *
 * SQLite: each change updates `desired_objects` at once and is kept in memory; `flush` (at the
 * end of the transaction) allocates the versions and writes the outbox rows.
 * PostgreSQL: each change is one statement that updates `desired_objects` and stages the outbox
 * row; versions are allocated by the commit trigger (commit-sequencer.ts).
 */
export class WriteTx {
  private readonly pending: PendingChange[] = [];
  /** Changes staged so far on PostgreSQL; numbers them in the order they were made. */
  private staged = 0;
  /** Streams staged to on PostgreSQL, as `kind/region`. */
  private readonly stagedStreams = new Map<string, Poke>();

  constructor(
    readonly trx: Transaction<Database>,
    readonly dialect: DialectName,
    readonly now: number,
  ) {}

  /** Sets the desired state of one object in one region (create or replace). */
  async putDesired(region: string, kind: ObjectKind, objectId: string, payload: Uint8Array): Promise<void> {
    const bytes = toBuffer(payload);
    if (this.dialect === "postgres") {
      await sql`
        WITH put AS (
          INSERT INTO desired_objects (region, kind, object_id, payload) VALUES (${region}, ${kind}, ${objectId}, ${bytes})
          ON CONFLICT (region, kind, object_id) DO UPDATE SET payload = excluded.payload
        )
        INSERT INTO outbox_staging (kind, region, seq, head, object_id, op, payload, created_at)
        VALUES (${kind}, ${region}, ${this.staged + 1}, ${this.staged === 0}, ${objectId}, 'apply', ${bytes}, ${this.now}::bigint)`.execute(this.trx);
      this.noteStaged(kind, region);
      return;
    }
    await this.trx
      .insertInto("desired_objects")
      .values({ region, kind, object_id: objectId, payload: bytes })
      .onConflict((oc) => oc.columns(["region", "kind", "object_id"]).doUpdateSet({ payload: bytes }))
      .execute();
    this.pending.push({ region, kind, objectId, op: "apply", payload });
  }

  /**
   * Removes an object from a region's desired state. The delete is streamed only when the object
   * was desired there; returns whether it was.
   */
  async removeDesired(region: string, kind: ObjectKind, objectId: string, payload: Uint8Array): Promise<boolean> {
    if (this.dialect === "postgres") {
      const res = await sql<{ n: number }>`
        WITH gone AS (
          DELETE FROM desired_objects WHERE region = ${region} AND kind = ${kind} AND object_id = ${objectId} RETURNING object_id
        ), staged AS (
          INSERT INTO outbox_staging (kind, region, seq, head, object_id, op, payload, created_at)
          SELECT ${kind}, ${region}, ${this.staged + 1}, ${this.staged === 0}, object_id, 'delete', ${toBuffer(payload)}, ${this.now}::bigint FROM gone
          RETURNING 1
        )
        SELECT count(*)::integer AS n FROM staged`.execute(this.trx);
      if ((res.rows[0]?.n ?? 0) === 0) return false;
      this.noteStaged(kind, region);
      return true;
    }
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

  private noteStaged(kind: ObjectKind, region: string): void {
    this.staged++;
    this.stagedStreams.set(`${kind}/${region}`, { kind, region });
  }

  /** SQLite: allocates the versions and writes the outbox rows of one stream. */
  private async writeOutbox(region: string, kind: ObjectKind, changes: PendingChange[]): Promise<number> {
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
   * Called last in the transaction; returns one poke per stream touched, for this process's
   * streams once committed. SQLite: writes the outbox first. PostgreSQL: nothing left to write,
   * and the pokes carry no version (the commit trigger allocates it and NOTIFYs it to every
   * ctrl replica, this one included).
   */
  async flush(): Promise<Poke[]> {
    if (this.dialect === "postgres") return [...this.stagedStreams.values()];
    if (this.pending.length === 0) return [];
    const groups = new Map<string, PendingChange[]>();
    for (const c of this.pending) {
      const key = `${c.kind}/${c.region}`;
      const g = groups.get(key);
      if (g) g.push(c);
      else groups.set(key, [c]);
    }
    const pokes: Poke[] = [];
    // A fixed (kind, region) order keeps two multi-stream writers from deadlocking.
    for (const key of [...groups.keys()].sort()) {
      const changes = groups.get(key) ?? [];
      const first = changes[0];
      if (!first) continue;
      const version = await this.writeOutbox(first.region, first.kind, changes);
      pokes.push({ kind: first.kind, region: first.region, version });
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
