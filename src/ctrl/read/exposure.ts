// The read model of exposure: an environment's endpoints and custom domains, and the agents'
// gateway reports of them per region (what status shows as each address's readiness).
import type { Kysely } from "kysely";
import type { Database, DomainRow, EndpointRow } from "../db/schema.js";
import type { StoredRouteStatus } from "../domain/exposure.js";
import { findEnvironment, type EnvironmentContext } from "../domain/tenancy.js";
import type { EnvironmentRef } from "../validate/types.js";

export { findDomain } from "../domain/domains.js";

type Reader = Kysely<Database>;

export async function listEndpoints(
  db: Reader,
  ref: EnvironmentRef,
): Promise<{ context: EnvironmentContext; endpoints: EndpointRow[] }> {
  const context = await findEnvironment(db, ref);
  const endpoints = await db
    .selectFrom("endpoints")
    .selectAll()
    .where("environment_id", "=", context.environment.id)
    .orderBy("visibility")
    .execute();
  return { context, endpoints };
}

export async function listDomains(
  db: Reader,
  ref: EnvironmentRef,
): Promise<{ context: EnvironmentContext; domains: DomainRow[] }> {
  const context = await findEnvironment(db, ref);
  const domains = await db
    .selectFrom("domains")
    .selectAll()
    .where("environment_id", "=", context.environment.id)
    .orderBy("hostname")
    .execute();
  return { context, domains };
}

/** An environment's endpoints, domains and gateway reports by region, for its status. */
export async function exposureOf(
  db: Reader,
  environmentId: string,
): Promise<{
  endpoints: EndpointRow[];
  domains: DomainRow[];
  reports: Map<string, { routes: StoredRouteStatus[]; rejected: string | null }>;
}> {
  const endpoints = await db
    .selectFrom("endpoints")
    .selectAll()
    .where("environment_id", "=", environmentId)
    .orderBy("visibility")
    .execute();
  const domains = await db
    .selectFrom("domains")
    .selectAll()
    .where("environment_id", "=", environmentId)
    .orderBy("hostname")
    .execute();
  const rows = await db.selectFrom("gateway_reports").selectAll().where("environment_id", "=", environmentId).execute();
  const reports = new Map(
    rows.map((r) => [r.region, { routes: JSON.parse(r.routes) as StoredRouteStatus[], rejected: r.rejected_reason }]),
  );
  return { endpoints, domains, reports };
}
