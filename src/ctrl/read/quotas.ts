// A workspace's quotas as the API answers with them: each limit in force (its own or the
// installation's default) beside what the workspace uses.
import type { Kysely } from "kysely";
import { QUOTA_NAMES, QUOTA_UNITS, type QuotaName } from "../../contracts/quotas.js";
import type { Database } from "../db/schema.js";
import { buildMinutesOf, limitsOf, workspaceUsage } from "../domain/quotas.js";

export interface QuotaView {
  name: QuotaName;
  unit: string;
  limit: number | null;
  used: number;
  own: boolean;
}

export async function quotaViews(db: Kysely<Database>, workspaceId: string): Promise<QuotaView[]> {
  const { limits, own } = await limitsOf(db, workspaceId);
  const used = {
    ...(await workspaceUsage(db, workspaceId)),
    build_minutes: await buildMinutesOf(db, workspaceId, Date.now()),
  };
  return QUOTA_NAMES.map((q) => ({
    name: q,
    unit: QUOTA_UNITS[q],
    limit: limits[q],
    used: used[q],
    own: own.has(q),
  }));
}
