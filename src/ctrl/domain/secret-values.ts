// The one way a secret value leaves ctrl (ClusterService.GetSecretValues): decrypted in memory
// for the agent of a region where its owner is desired — a revision, a cron job (the secrets of
// the revision its payload names), the sealed Secrets of a release's current version (one, or
// all of them in one call), or the pull Secret of the workspace of a deployment or cron job (its
// registry credentials as a .dockerconfigjson) — and sent
// over the agent's authenticated connection. Streams, outbox rows, snapshots and reports carry
// only names and keys. Nothing here is logged.
import { fromBinary } from "@bufbuild/protobuf";
import type { Kysely } from "kysely";
import { dockerConfigJson, PULL_SECRET_KEY } from "../../contracts/images.js";
import { ApplyDeploymentSchema, ApplyJobSchema } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { Database } from "../db/schema.js";
import { DomainError, failedPrecondition, notFound } from "../errors.js";
import { sealedSecretsOf } from "../payloads/revision-settings.js";
import type { Keyring } from "../secrets/keyring.js";
import { envSecretAad, existingDataKey, openWith, releaseSecretAad } from "./data-keys.js";
import { registryCredentialsOf } from "./registries.js";

type Reader = Kysely<Database>;

export type SecretOwner =
  | { type: "deployment"; id: string }
  | { type: "job"; id: string }
  | { type: "release"; id: string; version: number; objectId: string }
  | { type: "pull-secret"; kind: "deployment" | "job"; id: string };

async function desiredPayload(db: Reader, region: string, kind: string, id: string): Promise<Uint8Array> {
  const row = await db
    .selectFrom("desired_objects")
    .select("payload")
    .where("region", "=", region)
    .where("kind", "=", kind)
    .where("object_id", "=", id)
    .executeTakeFirst();
  if (!row) throw new DomainError("permission_denied", `${kind} ${id} is not desired in region ${region}`);
  return row.payload;
}

/** A revision's secret values, opened in memory (GetSecretValues; the log archive's masking). */
export async function revisionSecrets(
  db: Reader,
  keyring: Keyring,
  deploymentId: string,
): Promise<{ key: string; value: Buffer }[]> {
  const d = await db
    .selectFrom("deployments")
    .select(["id", "environment_id", "secrets"])
    .where("id", "=", deploymentId)
    .executeTakeFirst();
  if (!d) throw notFound(`deployment "${deploymentId}"`);
  const sealed = sealedSecretsOf(d);
  const keys = Object.keys(sealed).sort();
  if (keys.length === 0) return [];
  const dataKey = await existingDataKey(db, keyring, d.environment_id);
  if (!dataKey)
    throw failedPrecondition(
      `the secrets of deployment ${d.id} have no data key (their environment's key was deleted)`,
    );
  return keys.map((key) => ({
    key,
    value: openWith(dataKey, Buffer.from(sealed[key] ?? "", "base64"), envSecretAad(d.environment_id, key)),
  }));
}

type Values = { key: string; value: Buffer }[];

/** A release's current version, desired in the region, with its environment's data key. */
async function releaseAt(
  db: Reader,
  keyring: Keyring,
  region: string,
  id: string,
  version: number,
): Promise<{ id: string; dataKey: Buffer }> {
  await desiredPayload(db, region, "release", id);
  const rel = await db
    .selectFrom("releases")
    .select(["id", "environment_id", "version"])
    .where("id", "=", id)
    .executeTakeFirst();
  if (!rel) throw notFound(`release "${id}"`);
  if (Number(rel.version) !== version)
    throw failedPrecondition(`release ${rel.id} is at version ${rel.version}, not ${version}`);
  const dataKey = await existingDataKey(db, keyring, rel.environment_id);
  if (!dataKey) throw failedPrecondition(`release ${rel.id} has no data key`);
  return { id: rel.id, dataKey };
}

function openReleaseObject(dataKey: Buffer, releaseId: string, objectId: string, sealed: Uint8Array): Values {
  const data = JSON.parse(openWith(dataKey, sealed, releaseSecretAad(releaseId, objectId)).toString("utf8")) as Record<
    string,
    string
  >;
  return Object.keys(data)
    .sort()
    .map((key) => ({ key, value: Buffer.from(data[key] ?? "", "base64") }));
}

/** Every sealed object of a release version desired in the region (one call per version for the agent). */
export async function releaseSecretValues(
  db: Reader,
  keyring: Keyring,
  region: string,
  id: string,
  version: number,
): Promise<{ objectId: string; values: Values }[]> {
  const rel = await releaseAt(db, keyring, region, id, version);
  const rows = await db
    .selectFrom("release_objects")
    .select(["object_id", "sealed"])
    .where("release_id", "=", rel.id)
    .where("sealed", "is not", null)
    .orderBy("seq")
    .execute();
  return rows.map((o) => ({
    objectId: o.object_id,
    values: openReleaseObject(rel.dataKey, rel.id, o.object_id, o.sealed as Uint8Array),
  }));
}

export async function secretValuesFor(
  db: Reader,
  keyring: Keyring,
  region: string,
  owner: SecretOwner,
): Promise<Values> {
  switch (owner.type) {
    case "deployment":
      await desiredPayload(db, region, "deployment", owner.id);
      return revisionSecrets(db, keyring, owner.id);
    case "job": {
      const job = fromBinary(ApplyJobSchema, await desiredPayload(db, region, "job", owner.id));
      if (job.deploymentId === "") return [];
      const d = await db
        .selectFrom("deployments")
        .select("environment_id")
        .where("id", "=", job.deploymentId)
        .executeTakeFirst();
      if (!d || d.environment_id !== job.environmentId)
        throw new DomainError("permission_denied", `job ${owner.id} does not run deployment ${job.deploymentId}`);
      return revisionSecrets(db, keyring, job.deploymentId);
    }
    case "pull-secret": {
      // Only for an object desired in the caller's region, and only its own workspace's
      // credentials (the workspace its stored payload names: ctrl wrote it).
      const payload = await desiredPayload(db, region, owner.kind, owner.id);
      const workspaceId = fromBinary(
        owner.kind === "job" ? ApplyJobSchema : ApplyDeploymentSchema,
        payload,
      ).workspaceId;
      const credentials = await registryCredentialsOf(db, keyring, workspaceId);
      return [{ key: PULL_SECRET_KEY, value: Buffer.from(dockerConfigJson(credentials), "utf8") }];
    }
    case "release": {
      const rel = await releaseAt(db, keyring, region, owner.id, owner.version);
      const obj = await db
        .selectFrom("release_objects")
        .select(["sealed"])
        .where("release_id", "=", rel.id)
        .where("object_id", "=", owner.objectId)
        .executeTakeFirst();
      if (!obj || obj.sealed === null) throw notFound(`sealed object "${owner.objectId}" of release ${rel.id}`);
      return openReleaseObject(rel.dataKey, rel.id, owner.objectId, obj.sealed);
    }
  }
}
