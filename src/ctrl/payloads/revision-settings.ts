// A revision's configuration and secrets as the agents see them: the names of its immutable
// ConfigMap, Secret and SecretProviderClass (content-hashed), its plain values, its secret keys
// and external references — never a secret value. Pure, over the deployments row's columns
// (what a new revision copies is ../domain/revision-settings.ts).
import { createHash } from "node:crypto";
import { parseJsonList, type DeploymentRow } from "../db/schema.js";
import type { StoredEnvVar } from "../validate/types.js";

/** The settings columns of a deployments row. */
export type RevisionSettingsColumns = Pick<
  DeploymentRow,
  "config" | "secrets" | "secret_keys" | "secrets_digest" | "external_secrets"
>;

export interface ExternalRef {
  key: string;
  path: string;
}

/** A revision's sealed secrets: key → base64 of the ciphertext (sealed for its environment). */
export type SealedSecrets = Record<string, string>;

/** A short content hash for object names. */
export function contentHash(text: string): string {
  return createHash("sha256").update(text).digest("hex").slice(0, 10);
}

/** `<revision>-<what>-<hash>`: a DNS subdomain (revision names are at most 63 characters). */
export function revisionObjectName(k8sName: string, what: "config" | "secrets" | "external", hash: string): string {
  return `${k8sName}-${what}-${hash}`;
}

export interface RevisionSettingsView {
  config: { name: string; values: StoredEnvVar[] } | null;
  secrets: { name: string; keys: string[] } | null;
  external: { name: string; refs: ExternalRef[] } | null;
}

/** What the agent is told about a revision's settings (no secret value). */
export function revisionSettingsView(
  d: Pick<DeploymentRow, "k8s_name"> & RevisionSettingsColumns,
): RevisionSettingsView {
  const values = d.config === null ? [] : parseJsonList<StoredEnvVar>(d.config);
  const keys = d.secret_keys === null ? [] : parseJsonList<string>(d.secret_keys);
  const refs = d.external_secrets === null ? [] : parseJsonList<ExternalRef>(d.external_secrets);
  return {
    config:
      values.length > 0
        ? { name: revisionObjectName(d.k8s_name, "config", contentHash(d.config ?? "")), values }
        : null,
    secrets:
      keys.length > 0 && d.secrets_digest !== null
        ? { name: revisionObjectName(d.k8s_name, "secrets", d.secrets_digest), keys }
        : null,
    external:
      refs.length > 0
        ? { name: revisionObjectName(d.k8s_name, "external", contentHash(d.external_secrets ?? "")), refs }
        : null,
  };
}

/** A revision's sealed secrets (ciphertexts), to open for an agent. */
export function sealedSecretsOf(d: Pick<DeploymentRow, "secrets">): SealedSecrets {
  if (d.secrets === null) return {};
  const v: unknown = JSON.parse(Buffer.from(d.secrets).toString("utf8"));
  return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as SealedSecrets) : {};
}
