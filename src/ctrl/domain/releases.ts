// Releases of arbitrary objects (ReleaseService): each apply of an environment's release (by
// name) with different content is a new version, stored in one transaction with its objects
// (a Secret's data sealed with the environment's data key: ../secrets), the kinds it ever had
// (release_kinds: what the agents' prune sweep covers even after a kind leaves the set) and its
// desired state in each region (./environment-objects.ts). Identical content makes no version.
import { createHash, createHmac } from "node:crypto";
import type { Kysely } from "kysely";
import type { Database, ReleaseRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { notFound } from "../errors.js";
import type { Keyring } from "../secrets/keyring.js";
import type { ReleaseObjectInput } from "../validate/release.js";
import type { EnvironmentRef } from "../validate/types.js";
import { dataKeyFor, releaseSecretAad, sealWith } from "./data-keys.js";
import { MAX_RELEASES_PER_ENVIRONMENT, refuseBeyondLimit, syncEnvironmentObjects } from "./environment-objects.js";
import { newId } from "./ids.js";
import { findEnvironment, type EnvironmentContext } from "./tenancy.js";

type Reader = Kysely<Database>;

export interface ReleaseView {
  environment: EnvironmentContext;
  release: ReleaseRow;
  objects: { id: string; group: string; version: string; kind: string; name: string }[];
  status: {
    region: string;
    observedVersion: number;
    rejectedReason: string | null;
    objects: unknown[];
    reportedAt: number;
  }[];
}

/** A Secret's data as one map of base64 values (stringData folded in, as the API server does). */
function secretData(o: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  if (typeof o.data === "object" && o.data !== null)
    for (const [k, v] of Object.entries(o.data)) if (typeof v === "string") out[k] = v;
  if (typeof o.stringData === "object" && o.stringData !== null) {
    for (const [k, v] of Object.entries(o.stringData))
      if (typeof v === "string") out[k] = Buffer.from(v, "utf8").toString("base64");
  }
  return out;
}

export async function applyRelease(
  store: Store,
  keyring: Keyring,
  ref: EnvironmentRef,
  name: string,
  objects: readonly ReleaseObjectInput[],
): Promise<{ view: ReleaseView; changed: boolean }> {
  const changed = await store.write(async (tx) => {
    const env = await findEnvironment(tx.trx, ref);
    const envId = env.environment.id;
    const existing = await tx.trx
      .selectFrom("releases")
      .selectAll()
      .where("environment_id", "=", envId)
      .where("name", "=", name)
      .executeTakeFirst();
    const id = existing?.id ?? newId("rel");
    const hasSecrets = objects.some((o) => o.group === "" && o.kind === "Secret");
    const dataKey = hasSecrets ? await dataKeyFor(tx, keyring, envId) : undefined;
    // Secrets take part in the digest only through a keyed hash: no digest of a value is stored.
    const canonical = JSON.stringify(objects.map((o) => [o.id, o.version, o.object]));
    const digest = dataKey
      ? createHmac("sha256", dataKey).update(canonical).digest("hex")
      : createHash("sha256").update(canonical).digest("hex");
    if (existing && existing.digest === digest) return false;
    const version = existing ? Number(existing.version) + 1 : 1;
    if (!existing) await refuseBeyondLimit(tx, "releases", envId, MAX_RELEASES_PER_ENVIRONMENT, "name", "releases");
    if (existing) {
      await tx.trx.updateTable("releases").set({ version, digest, updated_at: tx.now }).where("id", "=", id).execute();
      await tx.trx.deleteFrom("release_objects").where("release_id", "=", id).execute();
    } else {
      await tx.trx
        .insertInto("releases")
        .values({
          id,
          workspace_id: env.workspace.id,
          project_id: env.project.id,
          environment_id: envId,
          name,
          version,
          digest,
          created_at: tx.now,
          updated_at: tx.now,
        })
        .execute();
    }
    const rows = objects.map((o, seq) => {
      let manifest = o.object;
      let sealed: Buffer | null = null;
      if (o.group === "" && o.kind === "Secret" && dataKey) {
        const { data: _d, stringData: _s, ...rest } = o.object;
        manifest = rest;
        sealed = sealWith(dataKey, JSON.stringify(secretData(o.object)), releaseSecretAad(id, o.id));
      }
      return {
        release_id: id,
        object_id: o.id,
        seq,
        api_group: o.group,
        api_version: o.version,
        kind: o.kind,
        name: o.name,
        manifest: JSON.stringify(manifest),
        sealed,
      };
    });
    for (let i = 0; i < rows.length; i += 100)
      await tx.trx
        .insertInto("release_objects")
        .values(rows.slice(i, i + 100))
        .execute();
    const kinds = new Map(objects.map((o) => [`${o.group}/${o.version}/${o.kind}`, o]));
    for (const o of kinds.values()) {
      await tx.trx
        .insertInto("release_kinds")
        .values({ release_id: id, api_group: o.group, api_version: o.version, kind: o.kind })
        .onConflict((oc) => oc.columns(["release_id", "api_group", "api_version", "kind"]).doNothing())
        .execute();
    }
    await syncEnvironmentObjects(tx, env.environment, env.workspace);
    return true;
  });
  return { view: await getRelease(store.db, ref, name), changed };
}

export async function getRelease(db: Reader, ref: EnvironmentRef, name: string): Promise<ReleaseView> {
  const environment = await findEnvironment(db, ref);
  const release = await db
    .selectFrom("releases")
    .selectAll()
    .where("environment_id", "=", environment.environment.id)
    .where("name", "=", name)
    .executeTakeFirst();
  if (!release) throw notFound(`release "${name}" of environment "${environment.environment.slug}"`);
  return viewOf(db, environment, release);
}

async function viewOf(db: Reader, environment: EnvironmentContext, release: ReleaseRow): Promise<ReleaseView> {
  const objects = await db
    .selectFrom("release_objects")
    .select(["object_id", "api_group", "api_version", "kind", "name"])
    .where("release_id", "=", release.id)
    .orderBy("seq")
    .execute();
  const status = await db
    .selectFrom("release_status")
    .selectAll()
    .where("release_id", "=", release.id)
    .orderBy("region")
    .execute();
  return {
    environment,
    release,
    objects: objects.map((o) => ({
      id: o.object_id,
      group: o.api_group,
      version: o.api_version,
      kind: o.kind,
      name: o.name,
    })),
    status: status.map((s) => ({
      region: s.region,
      observedVersion: Number(s.observed_version),
      rejectedReason: s.rejected_reason,
      objects: JSON.parse(s.objects) as unknown[],
      reportedAt: Number(s.reported_at),
    })),
  };
}

export async function listReleases(db: Reader, ref: EnvironmentRef): Promise<ReleaseView[]> {
  const environment = await findEnvironment(db, ref);
  const releases = await db
    .selectFrom("releases")
    .selectAll()
    .where("environment_id", "=", environment.environment.id)
    .orderBy("name")
    .execute();
  const out: ReleaseView[] = [];
  for (const r of releases) out.push(await viewOf(db, environment, r));
  return out;
}

/** Removes a release from every region (its agents delete its objects) and from the store. */
export async function deleteRelease(store: Store, ref: EnvironmentRef, name: string): Promise<void> {
  await store.write(async (tx) => {
    const env = await findEnvironment(tx.trx, ref);
    const release = await tx.trx
      .selectFrom("releases")
      .selectAll()
      .where("environment_id", "=", env.environment.id)
      .where("name", "=", name)
      .executeTakeFirst();
    if (!release) throw notFound(`release "${name}" of environment "${env.environment.slug}"`);
    // Its rows go first, so the sync below streams the deletes (made from the stored payloads,
    // which carry every kind the release ever had).
    for (const t of ["release_objects", "release_kinds", "release_status"] as const)
      await tx.trx.deleteFrom(t).where("release_id", "=", release.id).execute();
    await tx.trx.deleteFrom("releases").where("id", "=", release.id).execute();
    await syncEnvironmentObjects(tx, env.environment, env.workspace);
  });
}
