// Releases of arbitrary objects (ReleaseService; tables releases, release_objects,
// release_kinds and release_status): each apply of an environment's release (by name) with
// different content is a new version, stored in one transaction with its objects (a Secret's
// data sealed with the environment's data key: ../secrets), the kinds it ever had
// (release_kinds: what the agents' prune sweep covers even after a kind leaves the set) and its
// desired state in each region (./environment-objects.ts). Identical content makes no version.
// Agents' reports of a release in their region (the version observed, each object's health) are
// recorded here too.
import { createHash, createHmac } from "node:crypto";
import type { WriteTx } from "../db/outbox.js";
import type { Store } from "../db/store.js";
import { DomainError, notFound } from "../errors.js";
import type { Keyring } from "../secrets/keyring.js";
import type { ReleaseObjectInput } from "../validate/release.js";
import type { EnvironmentRef } from "../validate/types.js";
import { dataKeyFor, releaseSecretAad, sealWith } from "./data-keys.js";
import { MAX_RELEASES_PER_ENVIRONMENT, refuseBeyondLimit, syncEnvironmentObjects } from "./environment-objects.js";
import { newId } from "./ids.js";
import { releasePayloads } from "../payloads/release.js";
import { findEnvironment } from "./tenancy.js";

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
): Promise<{ changed: boolean }> {
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
  return { changed };
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
    await dropReleases(tx, [release.id]);
    await syncEnvironmentObjects(tx, env.environment, env.workspace);
  });
}

/** Deletes releases with their objects, kinds and reported status. */
async function dropReleases(tx: WriteTx, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await tx.trx
    .deleteFrom("release_objects")
    .where("release_id", "in", [...ids])
    .execute();
  await tx.trx
    .deleteFrom("release_kinds")
    .where("release_id", "in", [...ids])
    .execute();
  await tx.trx
    .deleteFrom("release_status")
    .where("release_id", "in", [...ids])
    .execute();
  await tx.trx
    .deleteFrom("releases")
    .where("id", "in", [...ids])
    .execute();
}

/** Deletes an environment's releases (the end of its deletion). */
export async function purgeReleases(tx: WriteTx, environmentId: string): Promise<void> {
  const ids = (
    await tx.trx.selectFrom("releases").select("id").where("environment_id", "=", environmentId).execute()
  ).map((r) => r.id);
  await dropReleases(tx, ids);
}

// ---------------------------------------------------------------- reports

export type ObjectHealthName =
  "unknown" | "progressing" | "healthy" | "degraded" | "suspended" | "kind-missing" | "refused";

export interface ReportedObject {
  id: string;
  group: string;
  version: string;
  kind: string;
  namespace: string;
  name: string;
  health: ObjectHealthName;
  message: string;
}

/** A validated report of a release in a region (../kinds/release.ts). */
export type ReleaseReport =
  | { type: "update"; id: string; version: number; objects: ReportedObject[] }
  | { type: "delete"; id: string }
  | { type: "rejected"; id: string; reason: string };

export async function recordReleaseReport(store: Store, region: string, report: ReleaseReport): Promise<void> {
  await store.write(async (tx) => {
    const rel = await tx.trx
      .selectFrom("releases")
      .select(["id", "environment_id"])
      .where("id", "=", report.id)
      .executeTakeFirst();
    if (!rel) {
      if (report.type === "delete") return;
      throw notFound(`release "${report.id}"`);
    }
    const regions = await tx.trx
      .selectFrom("desired_objects")
      .select("region")
      .where("kind", "=", releasePayloads.name)
      .where("object_id", "=", rel.id)
      .execute();
    const pending = await tx.trx
      .selectFrom("pending_deletions")
      .select("region")
      .where("kind", "=", releasePayloads.name)
      .where("object_id", "=", rel.id)
      .execute();
    if (![...regions, ...pending].some((x) => x.region === region) && report.type !== "delete") {
      throw new DomainError("permission_denied", `release ${rel.id} is not desired in region ${region}`);
    }
    if (report.type === "delete") {
      await tx.trx.deleteFrom("release_status").where("release_id", "=", rel.id).where("region", "=", region).execute();
      return;
    }
    const values =
      report.type === "update"
        ? {
            observed_version: report.version,
            objects: JSON.stringify(report.objects),
            rejected_reason: null,
            reported_at: tx.now,
          }
        : { rejected_reason: report.reason, reported_at: tx.now };
    await tx.trx
      .insertInto("release_status")
      .values({ release_id: rel.id, region, observed_version: 0, objects: "[]", ...values })
      .onConflict((oc) => oc.columns(["release_id", "region"]).doUpdateSet(values))
      .execute();
  });
}
