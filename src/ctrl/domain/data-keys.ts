// Each environment's data key (envelope encryption, ../secrets/keyring.ts) — and, under the same
// column, a workspace's (its notification channels' URLs and keys) and the installation's (owner
// "installation": the SMTP password): created with its first secret, stored wrapped by the
// master key, unwrapped in memory when a secret is sealed or opened, rewrapped by
// `krane ctrl rotate-key`, and deleted with its owner (whatever copy of its ciphertexts survives
// can then no longer be read).
import type { Kysely } from "kysely";
import type { WriteTx } from "../db/outbox.js";
import type { Database } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { open, seal, type Keyring } from "../secrets/keyring.js";
import { newId } from "./ids.js";

type Reader = Kysely<Database>;

/** The environment's data key, created (wrapped under the current master key) when missing. */
export async function dataKeyFor(tx: WriteTx, keyring: Keyring, environmentId: string): Promise<Buffer> {
  const row = await tx.trx
    .selectFrom("data_keys")
    .selectAll()
    .where("environment_id", "=", environmentId)
    .executeTakeFirst();
  if (row) return keyring.unwrap(row.wrapped, row.master_key_id, environmentId);
  const k = keyring.newDataKey(environmentId);
  await tx.trx
    .insertInto("data_keys")
    .values({
      id: newId("dek"),
      environment_id: environmentId,
      wrapped: Buffer.from(k.wrapped),
      master_key_id: k.masterKeyId,
      created_at: tx.now,
      rotated_at: null,
    })
    .execute();
  return k.key;
}

/** The environment's data key to open its secrets; undefined when it never had one. */
export async function existingDataKey(
  db: Reader,
  keyring: Keyring,
  environmentId: string,
): Promise<Buffer | undefined> {
  const row = await db
    .selectFrom("data_keys")
    .selectAll()
    .where("environment_id", "=", environmentId)
    .executeTakeFirst();
  return row ? keyring.unwrap(row.wrapped, row.master_key_id, environmentId) : undefined;
}

/** Associated data of a secret value of an environment's working set. */
export function envSecretAad(environmentId: string, key: string): string {
  return `env secret ${environmentId} ${key}`;
}

/** Associated data of a sealed Secret object of a release. */
export function releaseSecretAad(releaseId: string, objectId: string): string {
  return `release secret ${releaseId} ${objectId}`;
}

export function sealWith(dataKey: Buffer, plaintext: string | Uint8Array, aad: string): Buffer {
  return Buffer.from(seal(dataKey, typeof plaintext === "string" ? Buffer.from(plaintext, "utf8") : plaintext, aad));
}

export function openWith(dataKey: Buffer, sealed: Uint8Array, aad: string): Buffer {
  return open(dataKey, sealed, aad);
}

/**
 * Rewraps every data key under the keyring's current master key, in one transaction (a few
 * rows; the secret values themselves are never rewritten). Returns how many were rewrapped;
 * keys already under the current master key are left alone.
 */
export async function rotateDataKeys(store: Store, keyring: Keyring): Promise<{ rewrapped: number; total: number }> {
  return store.write(async (tx) => {
    const rows = await tx.trx.selectFrom("data_keys").selectAll().execute();
    let rewrapped = 0;
    for (const r of rows) {
      if (r.master_key_id === keyring.currentId) continue;
      const wrapped = keyring.rewrap(r.wrapped, r.master_key_id, r.environment_id);
      await tx.trx
        .updateTable("data_keys")
        .set({ wrapped: Buffer.from(wrapped), master_key_id: keyring.currentId, rotated_at: tx.now })
        .where("id", "=", r.id)
        .execute();
      rewrapped++;
    }
    return { rewrapped, total: rows.length };
  });
}

/** Deletes an environment's data key (the end of its deletion: nothing sealed with it is left). */
export async function purgeDataKeys(tx: WriteTx, environmentId: string): Promise<void> {
  await tx.trx.deleteFrom("data_keys").where("environment_id", "=", environmentId).execute();
}
