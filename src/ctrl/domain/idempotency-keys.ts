// Idempotency keys (table idempotency_keys): the claim a keyed API call makes inside the
// transaction of its change, what the change created (its subject), the call's sealed answer, and
// forgetting old keys. What the keys mean to a call and its repeats is ../server/idempotency.ts.
import type { Kysely } from "kysely";
import type { WriteTx } from "../db/outbox.js";
import type { Database } from "../db/schema.js";

type Reader = Kysely<Database>;

/** A key: whose (the caller), for which method, and the key itself. */
export interface KeyId {
  readonly scope: string;
  readonly method: string;
  readonly key: string;
}

/** The record of a key, as a repeat finds it. */
export interface KeyRecord {
  readonly digest: string;
  readonly createdAt: number;
  readonly owner: string;
  readonly answer: Uint8Array | null;
  readonly answeredAt: number | null;
  /** What the call created, when it said (noteWriteSubject). */
  readonly subject: string | null;
}

export async function findKey(db: Reader, id: KeyId): Promise<KeyRecord | undefined> {
  const row = await db
    .selectFrom("idempotency_keys")
    .select(["request_digest", "created_at", "owner", "answer", "answered_at", "subject"])
    .where("scope", "=", id.scope)
    .where("method", "=", id.method)
    .where("idempotency_key", "=", id.key)
    .executeTakeFirst();
  return (
    row && {
      digest: row.request_digest,
      createdAt: Number(row.created_at),
      owner: row.owner,
      answer: row.answer,
      answeredAt: row.answered_at === null ? null : Number(row.answered_at),
      subject: row.subject,
    }
  );
}

/**
 * Claims a key in the caller's transaction; false when it is claimed already (on PostgreSQL the
 * insert waits for a concurrent claim of the same key to commit or roll back first).
 */
export async function claimKey(
  tx: WriteTx,
  id: KeyId,
  claim: { digest: string; createdAt: number; owner: string },
): Promise<boolean> {
  const res = await tx.trx
    .insertInto("idempotency_keys")
    .values({
      scope: id.scope,
      method: id.method,
      idempotency_key: id.key,
      request_digest: claim.digest,
      created_at: claim.createdAt,
      owner: claim.owner,
    })
    .onConflict((oc) => oc.columns(["scope", "method", "idempotency_key"]).doNothing())
    .executeTakeFirst();
  return Number(res.numInsertedOrUpdatedRows ?? 0n) > 0;
}

/** Keeps with the claim what the call created, in the transaction that creates it. */
export async function setKeySubject(tx: WriteTx, id: KeyId, subject: string): Promise<void> {
  await tx.trx
    .updateTable("idempotency_keys")
    .set({ subject })
    .where("scope", "=", id.scope)
    .where("method", "=", id.method)
    .where("idempotency_key", "=", id.key)
    .execute();
}

/** Stores a claimed call's sealed answer (null: the call ended without one). */
export async function recordAnswer(db: Reader, id: KeyId, sealed: Uint8Array | null, at: number): Promise<void> {
  await db
    .updateTable("idempotency_keys")
    .set({ answer: sealed, answered_at: at })
    .where("scope", "=", id.scope)
    .where("method", "=", id.method)
    .where("idempotency_key", "=", id.key)
    .execute();
}

/** Forgets keys older than `before` (unix ms); returns how many. */
export async function pruneIdempotencyKeys(db: Reader, before: number): Promise<number> {
  const res = await db.deleteFrom("idempotency_keys").where("created_at", "<", before).executeTakeFirst();
  return Number(res.numDeletedRows);
}
