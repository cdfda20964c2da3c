// API keys (table api_keys, migration 0044): an environment's keys for its "apikey" edge policy;
// the only writer of that table and of environments.edge_api_keys. A key is made here, answered
// once and stored as its SHA-256 only. Each create or revoke rewrites the environment's carried
// list (the keys neither revoked nor expired, src/contracts/api-keys.ts) through saveEnvironment,
// so it is a new routing version and every sentinel of the environment gets the same keys with
// it (../payloads/sentinel.ts); a revoked key is one its sentinels no longer carry.
import type { Kysely } from "kysely";
import { hashApiKey, MAX_API_KEYS, newApiKey, type CarriedApiKey } from "../../contracts/api-keys.js";
import type { WriteTx } from "../db/outbox.js";
import type { ApiKeyRow, Database, EnvironmentRow, ProjectRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { noteWriteSubject } from "../db/write-hook.js";
import { failedPrecondition, notFound } from "../errors.js";
import type { ApiKeyInput } from "../validate/api-keys.js";
import type { EnvironmentRef } from "../validate/types.js";
import { saveEnvironment } from "./environments.js";
import { newId } from "./ids.js";
import { findEnvironment } from "./tenancy.js";

type Reader = Kysely<Database>;

/** The carried list's size at most: it travels in the routing ConfigMap (≤ 1 MiB with the rest). */
export const MAX_CARRIED_KEYS_BYTES = 512 * 1024;

/** Pure: the keys a sentinel carries at `now` (neither revoked nor expired), oldest first. */
export function carriedKeys(rows: readonly ApiKeyRow[], now: number): CarriedApiKey[] {
  return rows
    .filter((r) => r.revoked_at === null && (r.expires_at === null || Number(r.expires_at) > now))
    .sort((a, b) => Number(a.created_at) - Number(b.created_at) || a.id.localeCompare(b.id))
    .map((r) => ({
      id: r.id,
      hash: r.digest,
      name: r.name,
      expiresAt: r.expires_at === null ? null : Number(r.expires_at),
      limit: r.rate_limit === null ? null : Number(r.rate_limit),
      windowSeconds: r.rate_window_seconds === null ? null : Number(r.rate_window_seconds),
      metadata: JSON.parse(r.metadata) as Record<string, string>,
    }));
}

/** Pure: the stored and carried form (null: none). */
export function carriedJson(keys: readonly CarriedApiKey[]): string | null {
  return keys.length === 0 ? null : JSON.stringify(keys);
}

/** Rewrites the environment's carried list (a new routing version when it changed). */
async function carry(tx: WriteTx, project: ProjectRow, environment: EnvironmentRow): Promise<EnvironmentRow> {
  const rows = await tx.trx.selectFrom("api_keys").selectAll().where("environment_id", "=", environment.id).execute();
  const keys = carriedKeys(rows, tx.now);
  const json = carriedJson(keys);
  if (keys.length > MAX_API_KEYS)
    throw failedPrecondition(`environment "${environment.slug}" has ${MAX_API_KEYS} keys in use already`);
  if (json !== null && Buffer.byteLength(json) > MAX_CARRIED_KEYS_BYTES)
    throw failedPrecondition(
      `environment "${environment.slug}"'s keys in use would take more than ${MAX_CARRIED_KEYS_BYTES} bytes: revoke some or use less metadata`,
    );
  return saveEnvironment(tx, project, environment, { ...environment, edge_api_keys: json, updated_at: tx.now });
}

export interface CreatedApiKey {
  readonly row: ApiKeyRow;
  /** The key itself: never stored. */
  readonly secret: string;
  readonly routingVersion: number;
}

export async function createApiKey(store: Store, input: ApiKeyInput, createdBy: string): Promise<CreatedApiKey> {
  const secret = newApiKey();
  return store.write(async (tx) => {
    const { project, environment } = await findEnvironment(tx.trx, input.ref);
    const row: ApiKeyRow = {
      id: newId("key"),
      workspace_id: environment.workspace_id,
      environment_id: environment.id,
      name: input.name,
      digest: hashApiKey(secret),
      hint: secret.slice(-4),
      expires_at: input.expiresAt,
      rate_limit: input.limit,
      rate_window_seconds: input.windowSeconds,
      metadata: JSON.stringify(input.metadata),
      created_by: createdBy,
      created_at: tx.now,
      revoked_at: null,
    };
    await tx.trx.insertInto("api_keys").values(row).execute();
    await noteWriteSubject(tx, row.id);
    const stored = await carry(tx, project, environment);
    return { row, secret, routingVersion: Number(stored.routing_version) };
  });
}

/** An environment's keys, newest first (revoked ones included). */
export async function listApiKeys(db: Reader, ref: EnvironmentRef): Promise<ApiKeyRow[]> {
  const { environment } = await findEnvironment(db, ref);
  return db
    .selectFrom("api_keys")
    .selectAll()
    .where("environment_id", "=", environment.id)
    .orderBy("created_at", "desc")
    .orderBy("id", "desc")
    .execute();
}

/** Revokes a key of the environment (not_found for another environment's); a repeat changes nothing. */
export async function revokeApiKey(
  store: Store,
  ref: EnvironmentRef,
  keyId: string,
): Promise<{ row: ApiKeyRow; routingVersion: number }> {
  return store.write(async (tx) => {
    const { project, environment } = await findEnvironment(tx.trx, ref);
    const row = await tx.trx
      .selectFrom("api_keys")
      .selectAll()
      .where("environment_id", "=", environment.id)
      .where("id", "=", keyId)
      .executeTakeFirst();
    if (!row) throw notFound(`API key "${keyId}" in environment "${environment.slug}"`);
    if (row.revoked_at !== null) return { row, routingVersion: Number(environment.routing_version) };
    await tx.trx.updateTable("api_keys").set({ revoked_at: tx.now }).where("id", "=", row.id).execute();
    const stored = await carry(tx, project, environment);
    return { row: { ...row, revoked_at: tx.now }, routingVersion: Number(stored.routing_version) };
  });
}

/** Deletes an environment's keys (the end of its deletion). */
export async function purgeApiKeys(tx: WriteTx, environmentId: string): Promise<void> {
  await tx.trx.deleteFrom("api_keys").where("environment_id", "=", environmentId).execute();
}
