// What a new revision copies of its environment's configuration and secrets, and how a
// revision's copy reaches the agents (names, keys, values of plain configuration; never a secret
// value). A revision keeps its copy for good, so `rollout undo` to it restores its configuration.
//
// Secrets are copied as ciphertexts (each still sealed with its environment's data key, bound to
// the environment and key): making a revision decrypts nothing. The revision's Secret is named
// after a digest of those ciphertexts, so every change of a value (always a fresh encryption)
// makes a new, immutable Secret, and the name reveals nothing about the values.
import { createHash } from "node:crypto";
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.js";
import type { ExternalRef, RevisionSettingsColumns, SealedSecrets } from "../payloads/revision-settings.js";

type Reader = Kysely<Database>;

/** The environment's current configuration and secrets, as a new revision's columns. */
export async function revisionSettings(db: Reader, environmentId: string): Promise<RevisionSettingsColumns> {
  const config = await db
    .selectFrom("environment_config")
    .select(["key", "value"])
    .where("environment_id", "=", environmentId)
    .orderBy("key")
    .execute();
  const secrets = await db
    .selectFrom("environment_secrets")
    .selectAll()
    .where("environment_id", "=", environmentId)
    .orderBy("key")
    .execute();
  const sealed: SealedSecrets = {};
  const external: ExternalRef[] = [];
  for (const s of secrets) {
    if (s.source === "external" && s.external_path !== null) external.push({ key: s.key, path: s.external_path });
    else if (s.ciphertext !== null) sealed[s.key] = Buffer.from(s.ciphertext).toString("base64");
  }
  const keys = Object.keys(sealed);
  const blob = keys.length > 0 ? Buffer.from(JSON.stringify(sealed), "utf8") : null;
  return {
    config: config.length > 0 ? JSON.stringify(config.map((c) => ({ name: c.key, value: c.value }))) : null,
    secrets: blob,
    secret_keys: blob ? JSON.stringify(keys) : null,
    secrets_digest: blob ? createHash("sha256").update(blob).digest("hex").slice(0, 10) : null,
    external_secrets: external.length > 0 ? JSON.stringify(external) : null,
  };
}
