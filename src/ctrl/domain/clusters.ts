// Regions and clusters: registering a region (with its stream counters, one per kind), the
// clusters of a region with their agent tokens (one per cluster, bound to its region; only the
// SHA-256 digest is stored, the token is shown once), and agents' heartbeats.
//
// Revoking a cluster's token keeps the cluster (and its heartbeat record) but replaces the
// stored digest with a marker no token can hash to; CreateClusterToken later issues a new one.
import type { Kysely } from "kysely";
import type { WriteTx } from "../db/outbox.js";
import type { ClusterRow, Database } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { notFound } from "../errors.js";
import { KIND_NAMES } from "../kinds/registry.js";
import { newId } from "./ids.js";
import { readLimit, takePage, type Page, type PageQuery } from "./page.js";
import { digestsEqual, generateToken, hashToken } from "./tokens.js";

type Reader = Kysely<Database>;

async function ensureRegion(tx: WriteTx, name: string): Promise<void> {
  await tx.trx
    .insertInto("regions")
    .values({ name, created_at: tx.now })
    .onConflict((oc) => oc.column("name").doNothing())
    .execute();
  // Counter rows exist from the start, so writers only ever UPDATE them.
  await tx.trx
    .insertInto("stream_versions")
    .values(KIND_NAMES.map((kind) => ({ region: name, kind, version: 0, compacted_through: 0 })))
    .onConflict((oc) => oc.columns(["region", "kind"]).doNothing())
    .execute();
}

export async function createRegion(store: Store, name: string): Promise<{ name: string; created_at: number }> {
  return store.write(async (tx) => {
    await ensureRegion(tx, name);
    return tx.trx.selectFrom("regions").selectAll().where("name", "=", name).executeTakeFirstOrThrow();
  });
}

/** By name; a page's key is the name of its last region. */
export async function listRegions(
  db: Reader,
  page?: PageQuery<string>,
): Promise<Page<{ name: string; created_at: number }>> {
  let q = db.selectFrom("regions").selectAll();
  if (page?.after !== undefined) q = q.where("name", ">", page.after);
  const limit = readLimit(page);
  if (limit !== undefined) q = q.limit(limit);
  return takePage(await q.orderBy("name").execute(), page);
}

/** Registers (or finds) a cluster in a region and gives it a new token, replacing the old one. */
export async function issueClusterToken(
  store: Store,
  region: string,
  clusterName: string,
): Promise<{ cluster: ClusterRow; token: string }> {
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
    const c = await tx.trx
      .selectFrom("clusters")
      .selectAll()
      .where("region", "=", region)
      .where("name", "=", clusterName)
      .executeTakeFirst();
    if (!c) throw notFound(`cluster "${clusterName}" in region "${region}"`);
    // Unique per cluster, as the column requires.
    const mark = `${REVOKED_MARK}${c.id}`;
    await tx.trx.updateTable("clusters").set({ token_hash: mark }).where("id", "=", c.id).execute();
    return { ...c, token_hash: mark };
  });
}

/** Where a page of clusters ends: its last cluster's (region, name). */
export type ClusterKey = readonly [region: string, name: string];

/** By region, then name. */
export async function listClusters(
  db: Reader,
  region?: string,
  page?: PageQuery<ClusterKey>,
): Promise<Page<ClusterRow>> {
  let q = db.selectFrom("clusters").selectAll();
  if (region !== undefined && region !== "") q = q.where("region", "=", region);
  if (page?.after !== undefined) {
    const [r, n] = page.after;
    q = q.where((eb) => eb(eb.refTuple("region", "name"), ">", eb.tuple(r, n)));
  }
  const limit = readLimit(page);
  if (limit !== undefined) q = q.limit(limit);
  return takePage(await q.orderBy("region").orderBy("name").execute(), page);
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
  /** Every stream's cursor by kind (agents before this field send none: the two columns stand in). */
  cursors?: readonly { kind: string; version: number }[];
}

export async function recordHeartbeat(store: Store, hb: HeartbeatInput): Promise<void> {
  const now = store.clock();
  const res = await store.db
    .updateTable("clusters")
    .set({
      last_heartbeat_at: now,
      agent_id: hb.agentId,
      build: hb.build,
      deployments_version: hb.deploymentsVersion,
      sentinels_version: hb.sentinelsVersion,
    })
    .where("id", "=", hb.clusterId)
    .executeTakeFirst();
  if (Number(res.numUpdatedRows) === 0) throw notFound("cluster");
  // Only kinds this ctrl streams: an agent newer than ctrl may name more.
  const known = (hb.cursors ?? []).flatMap((c) => {
    const kind = KIND_OF_STREAM.get(c.kind);
    return kind === undefined ? [] : [{ cluster_id: hb.clusterId, kind, version: c.version, reported_at: now }];
  });
  if (known.length === 0) return;
  await store.db
    .insertInto("cluster_cursors")
    .values(known)
    .onConflict((oc) =>
      oc
        .columns(["cluster_id", "kind"])
        .doUpdateSet((eb) => ({ version: eb.ref("excluded.version"), reported_at: eb.ref("excluded.reported_at") })),
    )
    .execute();
}

/**
 * A stream's name is its kind's in the plural, as its Watch method and the agent's controller
 * have it ("deployment" → WatchDeployments, controller "deployments"); heartbeats and lags use it.
 */
export function streamName(kind: string): string {
  return `${kind}s`;
}

const KIND_OF_STREAM: ReadonlyMap<string, string> = new Map(KIND_NAMES.map((k) => [streamName(k), k]));

/** How far one stream of a cluster is behind: ctrl's newest version against the agent's cursor. */
export interface StreamLag {
  kind: string;
  head: number;
  agent: number;
  behind: number;
}

/**
 * Per cluster (by id), per kind ctrl streams: the newest version of the region's stream and the
 * cursor the cluster's agent last reported (the per-kind cursors, else the columns older agents
 * fill, else 0). Two reads however many clusters.
 */
export async function clusterLag(db: Reader, clusters: readonly ClusterRow[]): Promise<Map<string, StreamLag[]>> {
  const out = new Map<string, StreamLag[]>();
  if (clusters.length === 0) return out;
  const regions = [...new Set(clusters.map((c) => c.region))];
  const heads = await db
    .selectFrom("stream_versions")
    .select(["region", "kind", "version"])
    .where("region", "in", regions)
    .execute();
  const cursors = await db
    .selectFrom("cluster_cursors")
    .select(["cluster_id", "kind", "version"])
    .where(
      "cluster_id",
      "in",
      clusters.map((c) => c.id),
    )
    .execute();
  const headOf = new Map(heads.map((h) => [`${h.region}\u0000${h.kind}`, Number(h.version)]));
  const cursorOf = new Map(cursors.map((c) => [`${c.cluster_id}\u0000${c.kind}`, Number(c.version)]));
  for (const c of clusters) {
    const legacy: Record<string, number> = {
      deployment: Number(c.deployments_version),
      sentinel: Number(c.sentinels_version),
    };
    out.set(
      c.id,
      KIND_NAMES.map((kind) => {
        const head = headOf.get(`${c.region}\u0000${kind}`) ?? 0;
        const agent = cursorOf.get(`${c.id}\u0000${kind}`) ?? legacy[kind] ?? 0;
        return { kind: streamName(kind), head, agent, behind: Math.max(0, head - agent) };
      }),
    );
  }
  return out;
}
