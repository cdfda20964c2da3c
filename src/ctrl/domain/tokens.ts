// Credentials: token generation and digests, and user API tokens (for the public API). Only
// SHA-256 digests are stored; a token is shown once, when made. User tokens are deleted when
// revoked (their digests kept in revoked_tokens so a configured admin token is not registered
// again), never the last one, so the API cannot lock everyone out. Agent tokens belong to
// clusters (./clusters.ts).
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { Kysely } from "kysely";
import type { WriteTx } from "../db/outbox.js";
import type { Database } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { alreadyExists, failedPrecondition, notFound } from "../errors.js";
import { newId } from "./ids.js";

type Reader = Kysely<Database>;

export type TokenKind = "agent" | "user";

export function generateToken(kind: TokenKind): string {
  return `krane_${kind}_${randomBytes(32).toString("base64url")}`;
}

export function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** Constant-time comparison of two hex digests. */
export function digestsEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, "hex");
  const y = Buffer.from(b, "hex");
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}

export async function findUserTokenByHash(
  db: Reader,
  tokenHash: string,
): Promise<{ id: string; name: string } | undefined> {
  const row = await db
    .selectFrom("api_tokens")
    .select(["id", "name", "token_hash"])
    .where("token_hash", "=", tokenHash)
    .executeTakeFirst();
  return row && digestsEqual(row.token_hash, tokenHash) ? { id: row.id, name: row.name } : undefined;
}

/**
 * Registers a user token given in full (bootstrap, tests, `krane dev`); idempotent. A token that
 * was revoked is not registered again: returns false then.
 */
export async function addUserToken(store: Store, name: string, token: string): Promise<boolean> {
  const digest = hashToken(token);
  return store.write(async (tx) => {
    const revoked = await tx.trx
      .selectFrom("revoked_tokens")
      .select("token_hash")
      .where("token_hash", "=", digest)
      .executeTakeFirst();
    if (revoked) return false;
    await tx.trx
      .insertInto("api_tokens")
      .values({ id: newId("tok"), name, token_hash: digest, created_at: tx.now })
      .onConflict((oc) => oc.column("token_hash").doNothing())
      .execute();
    return true;
  });
}

export async function countUserTokens(db: Reader): Promise<number> {
  const row = await db
    .selectFrom("api_tokens")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export interface ApiTokenRow {
  id: string;
  name: string;
  created_at: number;
  /** null until the first recorded use. */
  last_used_at: number | null;
}

/**
 * Serializes changes to the set of user tokens. On PostgreSQL two revocations could otherwise
 * each see the other's token still there and together remove the last two; SQLite has one
 * writer at a time anyway.
 */
async function lockApiTokens(tx: WriteTx): Promise<void> {
  await tx.dialect.lockNamed(tx.trx, "krane.api_tokens");
}

export function apiTokenRow(r: {
  id: string;
  name: string;
  created_at: number;
  last_used_at: number | null;
}): ApiTokenRow {
  return {
    id: r.id,
    name: r.name,
    created_at: Number(r.created_at),
    last_used_at: r.last_used_at === null ? null : Number(r.last_used_at),
  };
}

/** Creates a user token with a unique name; returns its record and the token (shown once). */
export async function createApiToken(store: Store, name: string): Promise<{ row: ApiTokenRow; token: string }> {
  const token = generateToken("user");
  const row = await store.write(async (tx) => {
    await lockApiTokens(tx);
    const taken = await tx.trx.selectFrom("api_tokens").select("id").where("name", "=", name).executeTakeFirst();
    if (taken) throw alreadyExists(`api token "${name}"`);
    const r = { id: newId("tok"), name, token_hash: hashToken(token), created_at: tx.now };
    await tx.trx.insertInto("api_tokens").values(r).execute();
    return apiTokenRow({ ...r, last_used_at: null });
  });
  return { row, token };
}

/** Deletes a user token; refuses the last one (FailedPrecondition). */
export async function revokeApiToken(store: Store, tokenId: string): Promise<ApiTokenRow> {
  return store.write(async (tx) => {
    await lockApiTokens(tx);
    const row = await tx.trx.selectFrom("api_tokens").selectAll().where("id", "=", tokenId).executeTakeFirst();
    if (!row) throw notFound(`api token "${tokenId}"`);
    if ((await countUserTokens(tx.trx)) <= 1) {
      throw failedPrecondition(
        `api token "${row.name}" is the last one: create another before revoking it, or nobody could use the API`,
      );
    }
    await tx.trx.deleteFrom("api_tokens").where("id", "=", tokenId).execute();
    await tx.trx
      .insertInto("revoked_tokens")
      .values({ token_hash: row.token_hash, revoked_at: tx.now })
      .onConflict((oc) => oc.column("token_hash").doNothing())
      .execute();
    return apiTokenRow(row);
  });
}

/**
 * Records that a user token was used at `now`, unless a use less than `minIntervalMs` ago is
 * already recorded (several ctrl replicas then write at most about once per interval).
 */
export async function recordApiTokenUse(
  db: Reader,
  tokenId: string,
  now: number,
  minIntervalMs: number,
): Promise<void> {
  await db
    .updateTable("api_tokens")
    .set({ last_used_at: now })
    .where("id", "=", tokenId)
    .where((eb) => eb.or([eb("last_used_at", "is", null), eb("last_used_at", "<=", now - minIntervalMs)]))
    .execute();
}
