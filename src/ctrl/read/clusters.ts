// The read model of regions, clusters and API tokens: keyset pages of each, and how far each
// cluster's streams are behind ctrl's (its agent's reported cursors against the outbox heads).
import type { Kysely } from "kysely";
import type { ClusterRow, Database } from "../db/schema.js";
import { streamName } from "../domain/clusters.js";
import { apiTokenRow, tokensWithOwners, type ApiTokenRow, type TokenScope } from "../domain/tokens.js";
import { KIND_NAMES } from "../payloads/registry.js";
import { limitToPage, takePage, type Page, type PageQuery } from "./page.js";

type Reader = Kysely<Database>;

/** By name; a page's key is the name of its last region. */
export async function listRegions(
  db: Reader,
  page?: PageQuery<string>,
): Promise<Page<{ name: string; created_at: number }>> {
  let q = db.selectFrom("regions").selectAll();
  if (page?.after !== undefined) q = q.where("name", ">", page.after);
  return takePage(await limitToPage(q, page).orderBy("name").execute(), page);
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
  return takePage(await limitToPage(q, page).orderBy("region").orderBy("name").execute(), page);
}

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

/** Where a page of API tokens ends: its last token's (created_at, id). */
export type ApiTokenKey = readonly [createdAt: number, id: string];

/** The tokens a caller's scope holds (every one, or one workspace's), oldest first: by created_at, then id. */
export async function listApiTokens(
  db: Reader,
  scope: TokenScope,
  page?: PageQuery<ApiTokenKey>,
): Promise<Page<ApiTokenRow>> {
  let q = tokensWithOwners(db);
  if (scope !== "installation") {
    q = q.where("t.workspace_id", "=", scope.workspaceId);
    if (scope.memberId !== undefined) q = q.where("t.member_id", "=", scope.memberId);
    else if (scope.serviceAccountId !== undefined) q = q.where("t.service_account_id", "=", scope.serviceAccountId);
  }
  if (page?.after !== undefined) {
    const [createdAt, id] = page.after;
    q = q.where((eb) => eb(eb.refTuple("t.created_at", "t.id"), ">", eb.tuple(createdAt, id)));
  }
  const rows = await limitToPage(q, page).orderBy("t.created_at").orderBy("t.id").execute();
  return takePage(rows.map(apiTokenRow), page);
}
