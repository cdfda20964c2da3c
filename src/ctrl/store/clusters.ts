// Regions, clusters and credentials: agent tokens (one per cluster, bound to its region) and
// user API tokens. Only SHA-256 hashes of tokens are stored; a token is shown once, when made.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { Kysely } from "kysely";
import { notFound } from "../errors.js";
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
export async function addUserToken(store: Store, name: string, token: string): Promise<void> {
  await store.db
    .insertInto("api_tokens")
    .values({ id: newId("tok"), name, token_hash: hashToken(token), created_at: store.clock() })
    .onConflict((oc) => oc.column("token_hash").doNothing())
    .execute();
}

export async function countUserTokens(db: Reader): Promise<number> {
  const row = await db.selectFrom("api_tokens").select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow();
  return Number(row.n);
}
