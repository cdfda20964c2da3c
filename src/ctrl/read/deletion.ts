// The read model of deletions: where one stands, per region (objects whose deletion its agent
// has not confirmed yet, by kind; regions an operator forced past).
import type { Kysely } from "kysely";
import { parseJsonList, type Database } from "../db/schema.js";
import type { DeletionScope, DeletionView } from "../domain/deletion.js";
import { notFound } from "../errors.js";

type Reader = Kysely<Database>;

/** Where a deletion stands (done when its target is gone). */
export async function deletionStatus(db: Reader, scope: DeletionScope, id: string): Promise<DeletionView> {
  const row = await db.selectFrom("deletions").selectAll().where("id", "=", id).executeTakeFirst();
  if (!row) {
    const table = scope === "environment" ? "environments" : scope === "project" ? "projects" : "workspaces";
    const alive = await db.selectFrom(table).select("id").where("id", "=", id).executeTakeFirst();
    if (alive) throw notFound(`a deletion of ${scope} ${id}`);
    return { scope, id, done: true, requestedAt: 0, regions: [], environmentIds: [] };
  }
  const col = scope === "environment" ? "id" : scope === "project" ? "project_id" : "workspace_id";
  const envIds = (await db.selectFrom("environments").select("id").where(col, "=", id).execute()).map((e) => e.id);
  const forced = new Set(parseJsonList<string>(row.forced_regions));
  const pending = envIds.length
    ? await db
        .selectFrom("pending_deletions")
        .select(["region", "kind"])
        .where("environment_id", "in", envIds)
        .execute()
    : [];
  const byRegion = new Map<string, Map<string, number>>();
  for (const p of pending) {
    let m = byRegion.get(p.region);
    if (!m) byRegion.set(p.region, (m = new Map()));
    m.set(p.kind, (m.get(p.kind) ?? 0) + 1);
  }
  for (const r of forced) if (r !== "*" && !byRegion.has(r)) byRegion.set(r, new Map());
  const regions = [...byRegion]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([region, kinds]) => ({
      region,
      remaining: [...kinds.values()].reduce((a, b) => a + b, 0),
      kinds: [...kinds].sort(([a], [b]) => a.localeCompare(b)).map(([kind, count]) => ({ kind, count })),
      forced: forced.has(region) || forced.has("*"),
    }));
  return {
    scope,
    id,
    done: false,
    requestedAt: Number(row.requested_at),
    regions,
    environmentIds: scope === "environment" ? [] : envIds,
  };
}
