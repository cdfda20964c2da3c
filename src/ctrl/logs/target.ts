// What a StreamLogs request reads, from the database: the environment's namespace, its regions and
// revisions, checked against the request (an unknown revision or region is invalid_argument; an
// instance that is not one of the environment's running or recent instances is not_found, with
// where its lines went).
import { DomainError, invalidArgument } from "../errors.js";
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.js";
import { environmentRegions } from "../domain/environments.js";
import { findEnvironment } from "../domain/tenancy.js";
import type { LogQuery } from "../validate/logs.js";

export interface LogTarget {
  namespace: string;
  environmentId: string;
  environmentSlug: string;
  regions: string[];
  /** deployment id → revision, every revision of the environment. */
  revisions: Map<string, number>;
  /** The deployments asked for (empty: every one). */
  deploymentIds: string[];
  /** The instance asked for is gone (a history read: its lines are kept, there is nothing live). */
  instanceGone: boolean;
}

export async function logTarget(db: Kysely<Database>, q: LogQuery): Promise<LogTarget> {
  const { workspace, environment } = await findEnvironment(db, q.ref);
  const rows = await db
    .selectFrom("deployments")
    .select(["id", "revision"])
    .where("environment_id", "=", environment.id)
    .execute();
  const revisions = new Map(rows.map((r) => [r.id, r.revision]));
  let deploymentIds: string[] = [];
  if (q.revision !== 0) {
    const d = rows.find((r) => r.revision === q.revision);
    if (!d) throw invalidArgument("revision", `environment "${environment.slug}" has no revision ${q.revision}`);
    deploymentIds = [d.id];
  }
  let regions = (await environmentRegions(db, environment.id)).map((r) => r.region);
  if (q.region !== undefined) {
    if (!regions.includes(q.region))
      throw invalidArgument(
        "region",
        `environment "${environment.slug}" does not run in region "${q.region}" (its regions: ${regions.join(", ") || "none"})`,
      );
    regions = [q.region];
  }
  let instanceGone = false;
  if (q.instance !== undefined) {
    const ids = deploymentIds.length > 0 ? deploymentIds : [...revisions.keys()];
    const found =
      ids.length === 0
        ? undefined
        : await db
            .selectFrom("instances")
            .select(["region"])
            .where("deployment_id", "in", ids)
            .where("k8s_name", "=", q.instance)
            .executeTakeFirst();
    if (!found && q.history) instanceGone = true;
    else if (!found)
      throw new DomainError(
        "not_found",
        `instance "${q.instance}" no longer exists in environment "${environment.slug}" (or never did): without ` +
          "--since or --grep krane reads running instances only; the lines of an instance that is gone are in the " +
          "log history (see docs/using.md: Logs)",
      );
    else regions = regions.filter((r) => r === found.region);
  }
  return {
    namespace: workspace.k8s_namespace,
    environmentId: environment.id,
    environmentSlug: environment.slug,
    regions,
    revisions,
    deploymentIds,
    instanceGone,
  };
}

/** The revisions of deployments of the environment among `ids` (a revision created after the call began). */
export async function revisionsOf(
  db: Kysely<Database>,
  environmentId: string,
  ids: readonly string[],
): Promise<Map<string, number>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom("deployments")
    .select(["id", "revision"])
    .where("environment_id", "=", environmentId)
    .where("id", "in", [...ids])
    .execute();
  return new Map(rows.map((r) => [r.id, r.revision]));
}
