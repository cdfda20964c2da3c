// Configuration and secrets of an environment (ConfigService; tables environment_config and
// environment_secrets): the working set new revisions
// copy (./revision-settings.ts), and — since configuration belongs to a revision — a change
// that alters the working set makes a new revision in the same transaction: a copy of the
// revision the environment runs (image, command, resources …) with the new values, which the
// rollout driver then rolls out like any new deployment. Before the first deployment only the
// working set changes.
//
// Secret values are sealed with the environment's data key before they are stored (./data-keys.ts);
// lists show keys, sources and times, never values.
import type { Kysely } from "kysely";
import type { WriteTx } from "../db/outbox.js";
import type { Database, DeploymentRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { failedPrecondition, invalidArgument } from "../errors.js";
import type { DeploymentContext } from "../payloads/deployment.js";
import type { Keyring } from "../secrets/keyring.js";
import type { ConfigValueInput, SecretInputValue } from "../validate/settings.js";
import { SETTINGS_LIMITS } from "../validate/settings.js";
import type { EnvironmentRef } from "../validate/types.js";
import { dataKeyFor, envSecretAad, existingDataKey, openWith, sealWith } from "./data-keys.js";
import { insertDeployment, revisionCopyOf } from "./deployments.js";
import { findEnvironment, type EnvironmentContext } from "./tenancy.js";

type Reader = Kysely<Database>;

export interface SettingsChange {
  environmentId: string;
  /** The revision made for the change; null when nothing changed or nothing is deployed yet. */
  revision: DeploymentContext | null;
  changed: boolean;
}

/** The revision the environment runs: the first region's rollout target, else the newest. */
export async function currentRevision(db: Reader, environmentId: string): Promise<DeploymentRow | undefined> {
  const target = await db
    .selectFrom("rollouts")
    .select("target_deployment_id")
    .where("environment_id", "=", environmentId)
    .where("target_deployment_id", "is not", null)
    .orderBy("region")
    .executeTakeFirst();
  if (target?.target_deployment_id) {
    const d = await db
      .selectFrom("deployments")
      .selectAll()
      .where("id", "=", target.target_deployment_id)
      .executeTakeFirst();
    if (d) return d;
  }
  return db
    .selectFrom("deployments")
    .selectAll()
    .where("environment_id", "=", environmentId)
    .orderBy("revision", "desc")
    .executeTakeFirst();
}

/** A new revision copying the current one, with the environment's (changed) settings. */
async function newRevision(tx: WriteTx, env: EnvironmentContext): Promise<DeploymentContext | null> {
  const d = await currentRevision(tx.trx, env.environment.id);
  if (!d) return null;
  return insertDeployment(tx, env, revisionCopyOf(d));
}

async function keysOf(
  db: Reader,
  table: "environment_config" | "environment_secrets",
  environmentId: string,
): Promise<Set<string>> {
  const rows = await db.selectFrom(table).select("key").where("environment_id", "=", environmentId).execute();
  return new Set(rows.map((r) => r.key));
}

async function checkTotals(tx: WriteTx, environmentId: string): Promise<void> {
  const config = await tx.trx
    .selectFrom("environment_config")
    .select(["value"])
    .where("environment_id", "=", environmentId)
    .execute();
  if (config.length > SETTINGS_LIMITS.keysMax)
    throw invalidArgument("values", `an environment has at most ${SETTINGS_LIMITS.keysMax} config keys`);
  const bytes = config.reduce((n, c) => n + Buffer.byteLength(c.value, "utf8"), 0);
  if (bytes > SETTINGS_LIMITS.totalMax)
    throw invalidArgument(
      "values",
      `an environment's config values add up to at most ${SETTINGS_LIMITS.totalMax / 1024} KiB`,
    );
  const secrets = await tx.trx
    .selectFrom("environment_secrets")
    .select(["ciphertext"])
    .where("environment_id", "=", environmentId)
    .execute();
  if (secrets.length > SETTINGS_LIMITS.keysMax)
    throw invalidArgument("secrets", `an environment has at most ${SETTINGS_LIMITS.keysMax} secrets`);
  // A ciphertext is its value plus 29 bytes.
  const sealed = secrets.reduce((n, s) => n + (s.ciphertext ? s.ciphertext.length - 29 : 0), 0);
  if (sealed > SETTINGS_LIMITS.totalMax)
    throw invalidArgument(
      "secrets",
      `an environment's secret values add up to at most ${SETTINGS_LIMITS.totalMax / 1024} KiB`,
    );
}

async function finish(tx: WriteTx, env: EnvironmentContext, changed: boolean): Promise<SettingsChange> {
  if (!changed) return { environmentId: env.environment.id, revision: null, changed: false };
  await checkTotals(tx, env.environment.id);
  return { environmentId: env.environment.id, revision: await newRevision(tx, env), changed: true };
}

export async function setConfig(
  store: Store,
  ref: EnvironmentRef,
  values: readonly ConfigValueInput[],
): Promise<SettingsChange> {
  return store.write(async (tx) => {
    const env = await findEnvironment(tx.trx, ref);
    const id = env.environment.id;
    const secretKeys = await keysOf(tx.trx, "environment_secrets", id);
    const current = new Map(
      (
        await tx.trx
          .selectFrom("environment_config")
          .select(["key", "value"])
          .where("environment_id", "=", id)
          .execute()
      ).map((r) => [r.key, r.value]),
    );
    let changed = false;
    for (const [i, v] of values.entries()) {
      if (secretKeys.has(v.key))
        throw invalidArgument(`values[${i}].key`, `"${v.key}" is a secret of this environment: unset the secret first`);
      if (current.get(v.key) === v.value) continue;
      changed = true;
      await tx.trx
        .insertInto("environment_config")
        .values({ environment_id: id, key: v.key, value: v.value, updated_at: tx.now })
        .onConflict((oc) => oc.columns(["environment_id", "key"]).doUpdateSet({ value: v.value, updated_at: tx.now }))
        .execute();
    }
    return finish(tx, env, changed);
  });
}

export async function unsetConfig(store: Store, ref: EnvironmentRef, keys: readonly string[]): Promise<SettingsChange> {
  return store.write(async (tx) => {
    const env = await findEnvironment(tx.trx, ref);
    const res = await tx.trx
      .deleteFrom("environment_config")
      .where("environment_id", "=", env.environment.id)
      .where("key", "in", [...keys])
      .executeTakeFirst();
    return finish(tx, env, Number(res.numDeletedRows) > 0);
  });
}

/**
 * Seals and stores secret values (or external references). A value is sealed afresh each time,
 * so setting the same value again still makes a new revision (the store cannot tell it is the
 * same without keeping something derived from it).
 */
export async function setSecrets(
  store: Store,
  keyring: Keyring,
  ref: EnvironmentRef,
  secrets: readonly SecretInputValue[],
): Promise<SettingsChange> {
  return store.write(async (tx) => {
    const env = await findEnvironment(tx.trx, ref);
    const id = env.environment.id;
    const configKeys = await keysOf(tx.trx, "environment_config", id);
    let dataKey: Buffer | undefined;
    for (const [i, s] of secrets.entries()) {
      if (configKeys.has(s.key))
        throw invalidArgument(`secrets[${i}].key`, `"${s.key}" is a config value of this environment: unset it first`);
      let row: { source: string; ciphertext: Buffer | null; external_path: string | null };
      if (s.source === "value") {
        dataKey ??= await dataKeyFor(tx, keyring, id);
        row = { source: "value", ciphertext: sealWith(dataKey, s.value, envSecretAad(id, s.key)), external_path: null };
      } else {
        row = { source: "external", ciphertext: null, external_path: s.path };
      }
      await tx.trx
        .insertInto("environment_secrets")
        .values({ environment_id: id, key: s.key, ...row, updated_at: tx.now })
        .onConflict((oc) => oc.columns(["environment_id", "key"]).doUpdateSet({ ...row, updated_at: tx.now }))
        .execute();
    }
    return finish(tx, env, true);
  });
}

export async function unsetSecrets(
  store: Store,
  ref: EnvironmentRef,
  keys: readonly string[],
): Promise<SettingsChange> {
  return store.write(async (tx) => {
    const env = await findEnvironment(tx.trx, ref);
    const res = await tx.trx
      .deleteFrom("environment_secrets")
      .where("environment_id", "=", env.environment.id)
      .where("key", "in", [...keys])
      .executeTakeFirst();
    return finish(tx, env, Number(res.numDeletedRows) > 0);
  });
}

/** What a krane.yaml leaves an environment's configuration and secrets as (../domain/project-file.ts). */
export interface WantedSettings {
  /** Every configuration value, exactly. */
  config: Readonly<Record<string, string>>;
  /** The secrets with values to keep (values are never set from a file; others go). */
  secrets: readonly string[];
  /** Every external secret (name → path in the store), exactly. */
  external: Readonly<Record<string, string>>;
}

/**
 * Sets the working set to `want` inside the caller's transaction, without making a revision (the
 * caller makes at most one for everything it changed). Returns whether anything changed.
 */
export async function replaceSettingsIn(tx: WriteTx, environmentId: string, want: WantedSettings): Promise<boolean> {
  let changed = false;
  const config = await tx.trx
    .selectFrom("environment_config")
    .select(["key", "value"])
    .where("environment_id", "=", environmentId)
    .execute();
  const gone = config.filter((c) => !(c.key in want.config)).map((c) => c.key);
  if (gone.length > 0) {
    await tx.trx
      .deleteFrom("environment_config")
      .where("environment_id", "=", environmentId)
      .where("key", "in", gone)
      .execute();
    changed = true;
  }
  const have = new Map(config.map((c) => [c.key, c.value]));
  for (const [key, value] of Object.entries(want.config)) {
    if (have.get(key) === value) continue;
    changed = true;
    await tx.trx
      .insertInto("environment_config")
      .values({ environment_id: environmentId, key, value, updated_at: tx.now })
      .onConflict((oc) => oc.columns(["environment_id", "key"]).doUpdateSet({ value, updated_at: tx.now }))
      .execute();
  }
  const secrets = await tx.trx
    .selectFrom("environment_secrets")
    .select(["key", "source", "external_path"])
    .where("environment_id", "=", environmentId)
    .execute();
  const keep = new Set(want.secrets);
  const drop = secrets
    .filter((x) =>
      x.source === "external" ? !(x.key in want.external) : !keep.has(x.key) && !(x.key in want.external),
    )
    .map((x) => x.key);
  if (drop.length > 0) {
    await tx.trx
      .deleteFrom("environment_secrets")
      .where("environment_id", "=", environmentId)
      .where("key", "in", drop)
      .execute();
    changed = true;
  }
  for (const [key, path] of Object.entries(want.external)) {
    const cur = secrets.find((x) => x.key === key);
    if (cur?.source === "external" && cur.external_path === path) continue;
    changed = true;
    const row = { source: "external", ciphertext: null, external_path: path };
    await tx.trx
      .insertInto("environment_secrets")
      .values({ environment_id: environmentId, key, ...row, updated_at: tx.now })
      .onConflict((oc) => oc.columns(["environment_id", "key"]).doUpdateSet({ ...row, updated_at: tx.now }))
      .execute();
  }
  if (changed) await checkTotals(tx, environmentId);
  return changed;
}

/** Deletes an environment's configuration and secrets (the end of its deletion). */
export async function purgeSettings(tx: WriteTx, environmentId: string): Promise<void> {
  await tx.trx.deleteFrom("environment_config").where("environment_id", "=", environmentId).execute();
  await tx.trx.deleteFrom("environment_secrets").where("environment_id", "=", environmentId).execute();
}

/**
 * Copies an environment's configuration into another (a preview of it), and its secrets when
 * asked: each value opened with the source's data key and sealed afresh with the target's (an
 * external secret is copied as the reference it is). Inside the caller's transaction.
 */
export async function copySettings(
  tx: WriteTx,
  keyring: Keyring | undefined,
  fromId: string,
  toId: string,
  withSecrets: boolean,
): Promise<{ config: number; secrets: number }> {
  const config = await tx.trx
    .selectFrom("environment_config")
    .select(["key", "value"])
    .where("environment_id", "=", fromId)
    .execute();
  if (config.length > 0)
    await tx.trx
      .insertInto("environment_config")
      .values(config.map((c) => ({ environment_id: toId, key: c.key, value: c.value, updated_at: tx.now })))
      .execute();
  if (!withSecrets) return { config: config.length, secrets: 0 };
  const secrets = await tx.trx
    .selectFrom("environment_secrets")
    .select(["key", "source", "ciphertext", "external_path"])
    .where("environment_id", "=", fromId)
    .execute();
  if (secrets.length === 0) return { config: config.length, secrets: 0 };
  let from: Buffer | undefined;
  let to: Buffer | undefined;
  for (const s of secrets) {
    let ciphertext: Buffer | null = null;
    if (s.source === "value" && s.ciphertext !== null) {
      if (!keyring) throw failedPrecondition("copying secrets needs ctrl's master key (--master-key-file)");
      from ??= await existingDataKey(tx.trx, keyring, fromId);
      if (!from) throw failedPrecondition("the base environment's secrets have no data key");
      to ??= await dataKeyFor(tx, keyring, toId);
      ciphertext = sealWith(to, openWith(from, s.ciphertext, envSecretAad(fromId, s.key)), envSecretAad(toId, s.key));
    }
    await tx.trx
      .insertInto("environment_secrets")
      .values({
        environment_id: toId,
        key: s.key,
        source: s.source,
        ciphertext,
        external_path: s.external_path,
        updated_at: tx.now,
      })
      .execute();
  }
  return { config: config.length, secrets: secrets.length };
}
