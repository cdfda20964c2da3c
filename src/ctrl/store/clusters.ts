// Regions, clusters and credentials: agent tokens (one per cluster, bound to its region) and
// user API tokens. Only SHA-256 hashes of tokens are stored; a token is shown once, when made.
//
// Revoking a cluster's token keeps the cluster (and its heartbeat record) but replaces the
// stored digest with a marker no token can hash to; CreateClusterToken later issues a new one.
// User tokens are deleted when revoked, never the last one, so the API cannot lock everyone out.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { sql, type Kysely } from "kysely";
import { alreadyExists, failedPrecondition, notFound } from "../errors.js";
import { newId } from "./ids.js";
import { OBJECT_KINDS, type ClusterRow, type Database } from "./schema.js";
import type { Store } from "./store.js";
import type { WriteTx } from "./outbox.js";

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

async function ensureRegion(tx: WriteTx, name: string): Promise<void> {
  await tx.trx
    .insertInto("regions")
    .values({ name, created_at: tx.now })
    .onConflict((oc) => oc.column("name").doNothing())
    .execute();
  // Counter rows exist from the start, so writers only ever UPDATE them.
  await tx.trx
    .insertInto("stream_versions")
    .values(OBJECT_KINDS.map((kind) => ({ region: name, kind, version: 0, compacted_through: 0 })))
    .onConflict((oc) => oc.columns(["region", "kind"]).doNothing())
    .execute();
}

export async function createRegion(store: Store, name: string): Promise<{ name: string; created_at: number }> {
  return store.write(async (tx) => {
    await ensureRegion(tx, name);
    return tx.trx.selectFrom("regions").selectAll().where("name", "=", name).executeTakeFirstOrThrow();
  });
}

export async function listRegions(db: Reader): Promise<{ name: string; created_at: number }[]> {
  return db.selectFrom("regions").selectAll().orderBy("name").execute();
}

/** Registers (or finds) a cluster in a region and gives it a new token, replacing the old one. */
export async function issueClusterToken(store: Store, region: string, clusterName: string): Promise<{ cluster: ClusterRow; token: string }> {
  const token = generateToken("agent");
  const tokenHash = hashToken(token);
  const cluster = await store.write(async (tx) => {
    await ensureRegion(tx, region);
    const existing = await tx.trx
      .selectFrom("clusters")
      .selectAll()
      .where("region", "=", region)
      .where("name", "=", clusterName)
      .executeTakeFirst();
    if (existing) {
      await tx.trx.updateTable("clusters").set({ token_hash: tokenHash }).where("id", "=", existing.id).execute();
      return { ...existing, token_hash: tokenHash };
    }
    const row: ClusterRow = {
      id: newId("cls"),
      region,
      name: clusterName,
      token_hash: tokenHash,
      created_at: tx.now,
      last_heartbeat_at: null,
      agent_id: "",
      build: "",
      deployments_version: 0,
      sentinels_version: 0,
    };
    await tx.trx.insertInto("clusters").values(row).execute();
    return row;
  });
  return { cluster, token };
}

/** Stored instead of a digest when a cluster's token is revoked: hex digests never start with it. */
const REVOKED_MARK = "revoked:";

export function clusterTokenRevoked(c: Pick<ClusterRow, "token_hash">): boolean {
  return c.token_hash.startsWith(REVOKED_MARK);
}

/** Cuts off a cluster's agent token (idempotent); the cluster stays registered. */
export async function revokeClusterToken(store: Store, region: string, clusterName: string): Promise<ClusterRow> {
  return store.write(async (tx) => {
    const c = await tx.trx.selectFrom("clusters").selectAll().where("region", "=", region).where("name", "=", clusterName).executeTakeFirst();
    if (!c) throw notFound(`cluster "${clusterName}" in region "${region}"`);
    // Unique per cluster, as the column requires.
    const mark = `${REVOKED_MARK}${c.id}`;
    await tx.trx.updateTable("clusters").set({ token_hash: mark }).where("id", "=", c.id).execute();
    return { ...c, token_hash: mark };
  });
}

export async function listClusters(db: Reader, region?: string): Promise<ClusterRow[]> {
  let q = db.selectFrom("clusters").selectAll();
  if (region !== undefined && region !== "") q = q.where("region", "=", region);
  return q.orderBy("region").orderBy("name").execute();
}

export async function findClusterByTokenHash(db: Reader, tokenHash: string): Promise<ClusterRow | undefined> {
  const row = await db.selectFrom("clusters").selectAll().where("token_hash", "=", tokenHash).executeTakeFirst();
  // The index lookup already matched; the constant-time check guards against any collation or
  // normalisation surprise in the database comparing the strings.
  return row && digestsEqual(row.token_hash, tokenHash) ? row : undefined;
}

export interface HeartbeatInput {
  clusterId: string;
  agentId: string;
  build: string;
  deploymentsVersion: number;
  sentinelsVersion: number;
}

export async function recordHeartbeat(store: Store, hb: HeartbeatInput): Promise<void> {
  const res = await store.db
    .updateTable("clusters")
    .set({
      last_heartbeat_at: store.clock(),
      agent_id: hb.agentId,
      build: hb.build,
      deployments_version: hb.deploymentsVersion,
      sentinels_version: hb.sentinelsVersion,
    })
    .where("id", "=", hb.clusterId)
    .executeTakeFirst();
  if (Number(res.numUpdatedRows) === 0) throw notFound("cluster");
}

export async function findUserTokenByHash(db: Reader, tokenHash: string): Promise<{ id: string; name: string } | undefined> {
  const row = await db.selectFrom("api_tokens").select(["id", "name", "token_hash"]).where("token_hash", "=", tokenHash).executeTakeFirst();
  return row && digestsEqual(row.token_hash, tokenHash) ? { id: row.id, name: row.name } : undefined;
}

/** Stores a user API token (idempotent for the same token). */
/**
 * Registers a user token given in full (bootstrap, tests, `krane dev`); idempotent. A token that
 * was revoked is not registered again: returns false then.
 */
export async function addUserToken(store: Store, name: string, token: string): Promise<boolean> {
  const digest = hashToken(token);
  return store.write(async (tx) => {
    const revoked = await tx.trx.selectFrom("revoked_tokens").select("token_hash").where("token_hash", "=", digest).executeTakeFirst();
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
  const row = await db.selectFrom("api_tokens").select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow();
  return Number(row.n);
}

// ---------------------------------------------------------------- user API tokens

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
  if (tx.dialect === "postgres") await sql`SELECT pg_advisory_xact_lock(hashtext('krane.api_tokens'))`.execute(tx.trx);
}

function apiTokenRow(r: { id: string; name: string; created_at: number; last_used_at: number | null }): ApiTokenRow {
  return { id: r.id, name: r.name, created_at: Number(r.created_at), last_used_at: r.last_used_at === null ? null : Number(r.last_used_at) };
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

/** Oldest first. */
export async function listApiTokens(db: Reader): Promise<ApiTokenRow[]> {
  const rows = await db.selectFrom("api_tokens").selectAll().orderBy("created_at").orderBy("id").execute();
  return rows.map(apiTokenRow);
}

/** Deletes a user token; refuses the last one (FailedPrecondition). */
export async function revokeApiToken(store: Store, tokenId: string): Promise<ApiTokenRow> {
  return store.write(async (tx) => {
    await lockApiTokens(tx);
    const row = await tx.trx.selectFrom("api_tokens").selectAll().where("id", "=", tokenId).executeTakeFirst();
    if (!row) throw notFound(`api token "${tokenId}"`);
    if ((await countUserTokens(tx.trx)) <= 1) {
      throw failedPrecondition(`api token "${row.name}" is the last one: create another before revoking it, or nobody could use the API`);
    }
    await tx.trx.deleteFrom("api_tokens").where("id", "=", tokenId).execute();
    await tx.trx.insertInto("revoked_tokens").values({ token_hash: row.token_hash, revoked_at: tx.now }).onConflict((oc) => oc.column("token_hash").doNothing()).execute();
    return apiTokenRow(row);
  });
}

/**
 * Records that a user token was used at `now`, unless a use less than `minIntervalMs` ago is
 * already recorded (several ctrl replicas then write at most about once per interval).
 */
export async function recordApiTokenUse(db: Reader, tokenId: string, now: number, minIntervalMs: number): Promise<void> {
  await db
    .updateTable("api_tokens")
    .set({ last_used_at: now })
    .where("id", "=", tokenId)
    .where((eb) => eb.or([eb("last_used_at", "is", null), eb("last_used_at", "<=", now - minIntervalMs)]))
    .execute();
}
