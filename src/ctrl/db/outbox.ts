// The outbox: every change of desired state is written in the same transaction as a row whose
// version is allocated inside that transaction, per (region, kind) stream. Streams read it by
// cursor; compaction keeps a bounded tail.
//
// Where versions are allocated depends on the database (the dialect's OutboxWriter): SQLite at
// the end of the write transaction (./sqlite.ts, allocateVersions), PostgreSQL inside the COMMIT
// (the trigger of ./migrations/0003_commit_sequencer.ts, fed by ./postgres.ts). Either way the
// counter row lock orders commits of one stream by version, so a reader that sees version v has
// already been able to see every version below v, and streams are taken in a fixed (kind,
// region) order, so two multi-region writers cannot deadlock on them.
//
// Separate sequences per kind (rather than one per region with a kind column) keep each
// stream's versions dense — a gap is always a bug or a compaction, never "the other kind" — and
// keep deployment writers from queueing behind sentinel writers.
import type { Kysely, Transaction } from "kysely";
import type { Dialect, OutboxWriter } from "./dialect.js";
import type { ChangeTopic, Poke } from "./notify.js";
import type { ChangeOp, Database, KindName } from "./schema.js";

export interface OutboxChange {
  region: string;
  kind: KindName;
  version: number;
  objectId: string;
  op: ChangeOp;
  payload: Uint8Array;
}

/**
 * One write transaction (Store.write makes it): the Kysely transaction for the caller's own
 * queries, the dialect for anything database-specific, the transaction's clock, and the only
 * way to change desired state (with its outbox rows).
 */
export class WriteTx {
  private readonly outbox: OutboxWriter;
  /** Live-view topics this transaction touched (./notify.ts ChangeTopic). */
  readonly changes = new Set<ChangeTopic>();

  constructor(
    readonly trx: Transaction<Database>,
    readonly dialect: Dialect,
    readonly now: number,
  ) {
    this.outbox = dialect.outboxWriter(trx, now);
  }

  /**
   * Sets the desired state of one object in one region (create or replace): its encoded Apply
   * message, for kinds sized per region its desired replicas (null otherwise), and the
   * environment it belongs to (deleting the environment finds it by that; null keeps the one
   * stored, and ../domain/deletion.ts falls back to the payload's environment_id field).
   */
  putDesired(
    region: string,
    kind: KindName,
    objectId: string,
    payload: Uint8Array,
    replicas: number | null = null,
    environmentId: string | null = null,
  ): Promise<void> {
    // Every change of desired state is one of its environment's pages too.
    if (environmentId !== null) this.environmentChanged(environmentId);
    return this.outbox.put({ region, kind, objectId, payload, replicas, environmentId });
  }

  /**
   * Removes an object from a region's desired state. The delete (payload: the encoded Delete
   * message) is streamed only when the object was desired there; returns whether it was.
   */
  removeDesired(region: string, kind: KindName, objectId: string, payload: Uint8Array): Promise<boolean> {
    return this.outbox.remove(region, kind, objectId, payload);
  }

  /**
   * Notes that what an environment's pages show changed (the live views, ../live): said by the
   * owner of every table those pages read, in the transaction of the change.
   */
  environmentChanged(environmentId: string): void {
    this.changes.add(`e:${environmentId}`);
  }

  /** Notes that a region's clusters changed (the overview's clusters, an environment's). */
  clustersChanged(region: string): void {
    this.changes.add(`c:${region}`);
  }

  /** Called last in the transaction (by Store.write): pokes for this process's streams. */
  flush(): Promise<Poke[]> {
    return this.outbox.flush();
  }
}

/**
 * Creates the version counters of a region's streams, one per kind (idempotent): they exist from
 * the start, so writers only ever UPDATE them.
 */
export async function createStreams(tx: WriteTx, region: string, kinds: readonly KindName[]): Promise<void> {
  if (kinds.length === 0) return;
  await tx.trx
    .insertInto("stream_versions")
    .values(kinds.map((kind) => ({ region, kind, version: 0, compacted_through: 0 })))
    .onConflict((oc) => oc.columns(["region", "kind"]).doNothing())
    .execute();
}

/**
 * Forgets whatever desired rows an environment still has, without streaming anything: for the end
 * of its deletion, once every object was removed from its region's desired state (with its
 * Delete) and its agents confirmed, so any row left is one nothing will stream again.
 */
export async function forgetDesiredOf(tx: WriteTx, environmentId: string): Promise<void> {
  await tx.trx.deleteFrom("desired_objects").where("environment_id", "=", environmentId).execute();
}

export interface StreamPosition {
  /** Highest committed version (0 when nothing was ever written). */
  head: number;
  /** Every version <= compactedThrough has been deleted from the outbox. */
  compactedThrough: number;
}

export async function streamPosition(db: Kysely<Database>, region: string, kind: KindName): Promise<StreamPosition> {
  const row = await db
    .selectFrom("stream_versions")
    .select(["version", "compacted_through"])
    .where("region", "=", region)
    .where("kind", "=", kind)
    .executeTakeFirst();
  return row
    ? { head: Number(row.version), compactedThrough: Number(row.compacted_through) }
    : { head: 0, compactedThrough: 0 };
}

/** Outbox rows after a cursor, in version order. */
export async function readOutbox(
  db: Kysely<Database>,
  region: string,
  kind: KindName,
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
  dialect: Dialect,
  region: string,
  kind: KindName,
): Promise<Snapshot> {
  // One transaction so the rows and the head belong together.
  return dialect.snapshot(db).execute(async (trx) => {
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

/** The current desired payloads of some objects in a region, by object id (absent: not desired). */
export async function readDesired(
  db: Kysely<Database>,
  region: string,
  kind: KindName,
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
  const streams = await db
    .selectFrom("stream_versions")
    .select(["region", "kind", "version", "compacted_through"])
    .execute();
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
