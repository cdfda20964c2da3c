// Endpoints: an environment exposes its sentinel with a visibility (`public`, the platform's
// external Gateway; `organization`, the internal one), at a generated hostname of its own or
// under a path prefix of its workspace's shared host, optionally with JWT authentication at the
// edge. One endpoint per (environment, visibility); setting it again replaces it (idempotent).
// Addresses are unique in the installation: a generated hostname that is taken gets a hash of
// the environment id, and prefixes on a shared host may not overlap (segment-wise, as Gateway
// API PathPrefix matches). Every write refreshes the environment's exposure (./exposure.ts).
import type { Kysely } from "kysely";
import type { WriteTx } from "../db/outbox.js";
import type { Database, EndpointRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { failedPrecondition, invalidArgument, notFound } from "../errors.js";
import { prefixesOverlap, type EndpointInput, type Visibility } from "../validate/exposure.js";
import type { EnvironmentRef } from "../validate/types.js";
import { apexOf, disambiguated, hostLabel, refreshExposure, type ExposureSettings } from "./exposure.js";
import { newId } from "./ids.js";
import { findEnvironment, type EnvironmentContext } from "./tenancy.js";

type Reader = Kysely<Database>;

/** Endpoints that use a hostname (any prefix), other than the environment's own of a visibility. */
async function othersOnHost(
  db: Reader,
  hostname: string,
  environmentId: string,
  visibility: Visibility,
): Promise<EndpointRow[]> {
  const rows = await db.selectFrom("endpoints").selectAll().where("hostname", "=", hostname).execute();
  return rows.filter((e) => !(e.environment_id === environmentId && e.visibility === visibility));
}

async function hostTakenByDomain(db: Reader, hostname: string): Promise<boolean> {
  return (
    (await db.selectFrom("domains").select("id").where("hostname", "=", hostname).executeTakeFirst()) !== undefined
  );
}

export async function setEndpoint(
  store: Store,
  input: EndpointInput,
  settings: ExposureSettings,
): Promise<{ context: EnvironmentContext; endpoint: EndpointRow }> {
  return store.write(async (tx) => {
    const context = await findEnvironment(tx.trx, input.ref);
    return { context, endpoint: await putEndpoint(tx, context, input, settings) };
  });
}

/** Creates or replaces the endpoint of a visibility inside the caller's transaction, and refreshes the exposure. */
export async function putEndpoint(
  tx: WriteTx,
  context: EnvironmentContext,
  input: Omit<EndpointInput, "ref">,
  settings: ExposureSettings,
): Promise<EndpointRow> {
  const { workspace, project, environment } = context;
  const slugs = { env: environment.slug, project: project.slug, workspace: workspace.slug };
  const apex = apexOf(settings, input.visibility);
  const existing = await tx.trx
    .selectFrom("endpoints")
    .selectAll()
    .where("environment_id", "=", environment.id)
    .where("visibility", "=", input.visibility)
    .executeTakeFirst();

  let hostname: string;
  let pathPrefix: string;
  if (input.pathRouting) {
    hostname = `${hostLabel(settings.sharedHostPattern, slugs, workspace.id)}.${apex}`;
    pathPrefix = input.pathPrefix ?? `/${project.slug}/${environment.slug}`;
    for (const other of await othersOnHost(tx.trx, hostname, environment.id, input.visibility)) {
      if (other.path_prefix === "/") {
        throw failedPrecondition(
          `the shared host ${hostname} is another endpoint's own hostname; path routing is not available for this workspace`,
        );
      }
      if (prefixesOverlap(other.path_prefix, pathPrefix)) {
        throw invalidArgument(
          input.pathPrefix === undefined ? "path_routing" : "path_prefix",
          `${pathPrefix} overlaps ${other.path_prefix}, already routed on ${hostname}`,
        );
      }
    }
  } else {
    pathPrefix = "/";
    // A host of its own: keep the one it has (addresses are stable), else generate one.
    if (existing && existing.path_prefix === "/") {
      hostname = existing.hostname;
    } else {
      const label = hostLabel(settings.hostPattern, slugs, environment.id);
      hostname = `${label}.${apex}`;
      if (
        (await othersOnHost(tx.trx, hostname, environment.id, input.visibility)).length > 0 ||
        (await hostTakenByDomain(tx.trx, hostname))
      ) {
        hostname = `${disambiguated(label, environment.id)}.${apex}`;
        if ((await othersOnHost(tx.trx, hostname, environment.id, input.visibility)).length > 0) {
          throw failedPrecondition(`no free hostname for this endpoint (${hostname} is taken)`);
        }
      }
    }
  }
  const auth = input.auth === null ? null : JSON.stringify(input.auth);
  let endpoint: EndpointRow;
  if (existing) {
    endpoint = {
      ...existing,
      hostname,
      path_prefix: pathPrefix,
      auth,
      updated_at:
        existing.hostname === hostname && existing.path_prefix === pathPrefix && existing.auth === auth
          ? existing.updated_at
          : tx.now,
    };
    await tx.trx
      .updateTable("endpoints")
      .set({ hostname, path_prefix: pathPrefix, auth, updated_at: endpoint.updated_at })
      .where("id", "=", existing.id)
      .execute();
  } else {
    endpoint = {
      id: newId("ept"),
      environment_id: environment.id,
      workspace_id: workspace.id,
      project_id: project.id,
      visibility: input.visibility,
      hostname,
      path_prefix: pathPrefix,
      auth,
      created_at: tx.now,
      updated_at: tx.now,
    };
    await tx.trx.insertInto("endpoints").values(endpoint).execute();
  }
  await refreshExposure(tx, environment.id);
  return endpoint;
}

export async function deleteEndpoint(store: Store, ref: EnvironmentRef, visibility: Visibility): Promise<void> {
  await store.write(async (tx) => deleteEndpointIn(tx, (await findEnvironment(tx.trx, ref)).environment, visibility));
}

/** deleteEndpoint as a step of the caller's transaction. */
export async function deleteEndpointIn(
  tx: WriteTx,
  environment: { id: string; slug: string },
  visibility: Visibility,
): Promise<void> {
  const res = await tx.trx
    .deleteFrom("endpoints")
    .where("environment_id", "=", environment.id)
    .where("visibility", "=", visibility)
    .executeTakeFirst();
  if (Number(res.numDeletedRows) === 0) throw notFound(`${visibility} endpoint of environment "${environment.slug}"`);
  await refreshExposure(tx, environment.id);
}
