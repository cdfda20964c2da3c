// What a region's agent may report on (measurements for rollout analysis, instance usage): the
// environments present in its region (with a sentinel there, or running there) and which
// environment each reported revision belongs to, read in chunks so a report of thousands stays
// within any database's parameter limit. The callers refuse what falls outside, naming the field.
import type { Store } from "../db/store.js";

const CHUNK = 500;

export interface ReportScope {
  /** The given environments present in the region. */
  readonly inRegion: ReadonlySet<string>;
  /** Each given revision's environment (absent: no such revision). */
  readonly envOf: ReadonlyMap<string, string>;
}

export async function reportScope(
  store: Store,
  region: string,
  presence: "sentinels" | "environment_regions",
  environmentIds: readonly string[],
  deploymentIds: readonly string[],
): Promise<ReportScope> {
  const envs = [...new Set(environmentIds)];
  const deps = [...new Set(deploymentIds)];
  const inRegion = new Set<string>();
  for (let i = 0; i < envs.length; i += CHUNK) {
    const rows = await store.db
      .selectFrom(presence)
      .select("environment_id")
      .where("region", "=", region)
      .where("environment_id", "in", envs.slice(i, i + CHUNK))
      .execute();
    for (const r of rows) inRegion.add(r.environment_id);
  }
  const envOf = new Map<string, string>();
  for (let i = 0; i < deps.length; i += CHUNK) {
    const rows = await store.db
      .selectFrom("deployments")
      .select(["id", "environment_id"])
      .where("id", "in", deps.slice(i, i + CHUNK))
      .execute();
    for (const r of rows) envOf.set(r.id, r.environment_id);
  }
  return { inRegion, envOf };
}
