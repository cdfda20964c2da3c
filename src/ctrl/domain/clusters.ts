// Regions and clusters: registering a region (with its stream counters, one per kind), the
// clusters of a region with their agent tokens (one per cluster, bound to its region; only the
// SHA-256 digest is stored, the token is shown once), and agents' heartbeats (with the kinds each
// agent runs, which deletions read).
//
// Revoking a cluster's token keeps the cluster (and its heartbeat record) but replaces the
// stored digest with a marker no token can hash to; CreateClusterToken later issues a new one.
import type { Kysely } from "kysely";
import { createStreams, type WriteTx } from "../db/outbox.js";
import type { ClusterRow, Database } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { notFound } from "../errors.js";
import { KIND_NAMES } from "../payloads/registry.js";
import { newId } from "./ids.js";
import { digestsEqual, generateToken, hashToken } from "./tokens.js";

type Reader = Kysely<Database>;

async function ensureRegion(tx: WriteTx, name: string): Promise<void> {
  await tx.trx
    .insertInto("regions")
    .values({ name, created_at: tx.now })
    .onConflict((oc) => oc.column("name").doNothing())
    .execute();
  await createStreams(tx, name, KIND_NAMES);
}

export async function createRegion(store: Store, name: string): Promise<{ name: string; created_at: number }> {
  return store.write(async (tx) => {
    await ensureRegion(tx, name);
    tx.clustersChanged(name);
    return tx.trx.selectFrom("regions").selectAll().where("name", "=", name).executeTakeFirstOrThrow();
  });
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
    tx.clustersChanged(region);
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
    tx.clustersChanged(region);
    // Unique per cluster, as the column requires.
    const mark = `${REVOKED_MARK}${c.id}`;
    await tx.trx.updateTable("clusters").set({ token_hash: mark }).where("id", "=", c.id).execute();
    return { ...c, token_hash: mark };
  });
}

export async function findClusterByTokenHash(db: Reader, tokenHash: string): Promise<ClusterRow | undefined> {
  const row = await db.selectFrom("clusters").selectAll().where("token_hash", "=", tokenHash).executeTakeFirst();
  // The index lookup already matched; the constant-time check guards against any collation or
  // normalisation surprise in the database comparing the strings.
  return row && digestsEqual(row.token_hash, tokenHash) ? row : undefined;
}

export interface HeartbeatInput {
  clusterId: string;
  /** The cluster's region (its live views are told; absent: nobody is). */
  region?: string;
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
  // Last seen and backlog on the overview and the environments' pages.
  if (hb.region !== undefined) await store.publishChanges([`c:${hb.region}`]);
  // Only kinds this ctrl streams: an agent newer than ctrl may name more.
  const known = (hb.cursors ?? []).flatMap((c) => {
    const kind = KIND_OF_STREAM.get(c.kind);
    return kind === undefined ? [] : [{ cluster_id: hb.clusterId, kind, version: c.version, reported_at: now }];
  });
  if (hb.cursors === undefined || hb.cursors.length === 0) return;
  // The heartbeat names every kind the agent runs now: a kind it no longer runs loses its row, so
  // the rows are the kinds this cluster runs (kindsNotRun; the deletions do not wait for the rest).
  let stale = store.db.deleteFrom("cluster_cursors").where("cluster_id", "=", hb.clusterId);
  if (known.length > 0)
    stale = stale.where(
      "kind",
      "not in",
      known.map((k) => k.kind),
    );
  await stale.execute();
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
 * Per region, the kinds no agent there runs, as the agents' last heartbeats said (each names the
 * streams its agent runs). A region is listed only when every cluster of it has told its kinds: a
 * cluster whose agent never did (an agent older than the per-kind cursors, or one that never
 * beat) might run any kind, so nothing of that region is ruled out. An agent that is down is
 * judged by its last heartbeat: the kinds it ran are still waited for (see --force-region).
 */
export async function kindsNotRun(db: Reader): Promise<Map<string, Set<string>>> {
  const clusters = await db.selectFrom("clusters").select(["id", "region"]).execute();
  const rows = await db.selectFrom("cluster_cursors").select(["cluster_id", "kind"]).execute();
  const runsOf = new Map<string, Set<string>>();
  for (const r of rows) {
    let s = runsOf.get(r.cluster_id);
    if (!s) runsOf.set(r.cluster_id, (s = new Set()));
    s.add(r.kind);
  }
  const byRegion = new Map<string, Set<string> | null>();
  for (const c of clusters) {
    const runs = runsOf.get(c.id);
    const acc = byRegion.get(c.region);
    if (acc === null) continue;
    if (runs === undefined) byRegion.set(c.region, null);
    else byRegion.set(c.region, new Set([...(acc ?? []), ...runs]));
  }
  const out = new Map<string, Set<string>>();
  for (const [region, runs] of byRegion) {
    if (runs === null || runs === undefined) continue;
    const notRun = KIND_NAMES.filter((k) => !runs.has(k));
    if (notRun.length > 0) out.set(region, new Set(notRun));
  }
  return out;
}

/**
 * A stream's name is its kind's in the plural, as its Watch method and the agent's controller
 * have it ("deployment" → WatchDeployments, controller "deployments"); heartbeats and lags use it.
 */
export function streamName(kind: string): string {
  return `${kind}s`;
}

const KIND_OF_STREAM: ReadonlyMap<string, string> = new Map(KIND_NAMES.map((k) => [streamName(k), k]));
