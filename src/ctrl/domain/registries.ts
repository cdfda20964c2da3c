// Private registries (table registry_credentials): a workspace's user name and password (or
// token) per registry host, for ctrl to resolve its deploys' tags to digests and for the agents'
// pull secrets. The password is sealed (AES-256-GCM) with a data key of its own, wrapped by the
// master key, with the row's identity as associated data: a ciphertext moved to another row or
// workspace does not open. Nothing here returns or logs a password except `registryCredential`,
// which ctrl calls in memory to ask a registry.
import { createHash } from "node:crypto";
import type { Kysely } from "kysely";
import { PULL_SECRET_NAME } from "../../contracts/images.js";
import type { WriteTx } from "../db/outbox.js";
import type { Database, RegistryCredentialsTable } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { notFound } from "../errors.js";
import type { Keyring } from "../secrets/keyring.js";
import { openWith, sealWith } from "./data-keys.js";
import { newId } from "./ids.js";
import { findWorkspace } from "./tenancy.js";

type Reader = Kysely<Database>;

/** A stored credential without its secret: what the API may answer. */
export interface RegistryCredentialInfo {
  readonly host: string;
  readonly username: string;
  readonly createdAt: number;
  readonly updatedAt: number;
}

function keyOwner(id: string): string {
  return `registry credential ${id}`;
}

function passwordAad(row: { id: string; workspace_id: string; host: string; username: string }): string {
  return `registry password ${row.id} ${row.workspace_id} ${row.host} ${row.username}`;
}

function info(
  r: Pick<RegistryCredentialsTable, "host" | "username" | "created_at" | "updated_at">,
): RegistryCredentialInfo {
  return { host: r.host, username: r.username, createdAt: r.created_at, updatedAt: r.updated_at };
}

/**
 * Stores the workspace's credential for `host` (already canonical), replacing one it had: a new
 * data key and ciphertext each time, so nothing of the old password survives in the row.
 */
export async function putRegistryCredentialIn(
  tx: WriteTx,
  keyring: Keyring,
  workspaceRef: string,
  host: string,
  username: string,
  password: string,
): Promise<{ credential: RegistryCredentialInfo; replaced: boolean; workspaceId: string }> {
  const ws = await findWorkspace(tx.trx, workspaceRef);
  const old = await tx.trx
    .selectFrom("registry_credentials")
    .select(["id", "created_at"])
    .where("workspace_id", "=", ws.id)
    .where("host", "=", host)
    .executeTakeFirst();
  if (old) await tx.trx.deleteFrom("registry_credentials").where("id", "=", old.id).execute();
  const id = newId("rcr");
  const k = keyring.newDataKey(keyOwner(id));
  const row: RegistryCredentialsTable = {
    id,
    workspace_id: ws.id,
    host,
    username,
    sealed_password: sealWith(k.key, password, passwordAad({ id, workspace_id: ws.id, host, username })),
    wrapped_key: Buffer.from(k.wrapped),
    master_key_id: k.masterKeyId,
    created_at: old?.created_at ?? tx.now,
    updated_at: tx.now,
  };
  await tx.trx.insertInto("registry_credentials").values(row).execute();
  return { credential: info(row), replaced: old !== undefined, workspaceId: ws.id };
}

/** The workspace's registries, by host. */
export async function listRegistryCredentials(db: Reader, workspaceRef: string): Promise<RegistryCredentialInfo[]> {
  const ws = await findWorkspace(db, workspaceRef);
  const rows = await db
    .selectFrom("registry_credentials")
    .select(["host", "username", "created_at", "updated_at"])
    .where("workspace_id", "=", ws.id)
    .orderBy("host")
    .execute();
  return rows.map(info);
}

/** Forgets the workspace's credential for `host`; not_found when it has none. Returns the workspace's id. */
export async function removeRegistryCredentialIn(tx: WriteTx, workspaceRef: string, host: string): Promise<string> {
  const ws = await findWorkspace(tx.trx, workspaceRef);
  const r = await tx.trx
    .deleteFrom("registry_credentials")
    .where("workspace_id", "=", ws.id)
    .where("host", "=", host)
    .executeTakeFirst();
  if (Number(r.numDeletedRows) === 0) throw notFound(`registry "${host}" of workspace "${ws.slug}"`);
  return ws.id;
}

/**
 * The workspace's pull Secret as its deployments' and cron jobs' payloads name it: the Secret's
 * name and a version that changes with every add, replacement or removal (a digest of the
 * credentials' ids: each put makes a new row, so a new id). Undefined when it has no credential.
 * Never derived from a password.
 */
export async function pullSecretOf(
  db: Reader,
  workspaceId: string,
): Promise<{ secretName: string; version: string } | undefined> {
  const rows = await db
    .selectFrom("registry_credentials")
    .select(["id", "host"])
    .where("workspace_id", "=", workspaceId)
    .orderBy("host")
    .execute();
  if (rows.length === 0) return undefined;
  const digest = createHash("sha256").update(rows.map((r) => `${r.host} ${r.id}`).join("\n"));
  return { secretName: PULL_SECRET_NAME, version: digest.digest("hex").slice(0, 16) };
}

/** Deletes every credential of a workspace, in the transaction that ends its deletion. */
export async function purgeRegistryCredentials(tx: WriteTx, workspaceId: string): Promise<void> {
  await tx.trx.deleteFrom("registry_credentials").where("workspace_id", "=", workspaceId).execute();
}

/** The workspace's credential for `host`, opened in memory; undefined when it has none. */
export async function registryCredential(
  db: Reader,
  keyring: Keyring | undefined,
  workspaceId: string,
  host: string,
): Promise<{ username: string; password: string } | undefined> {
  const row = await db
    .selectFrom("registry_credentials")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .where("host", "=", host)
    .executeTakeFirst();
  if (!row) return undefined;
  if (!keyring) return undefined;
  const key = keyring.unwrap(row.wrapped_key, row.master_key_id, keyOwner(row.id));
  return { username: row.username, password: openWith(key, row.sealed_password, passwordAad(row)).toString("utf8") };
}

/** Every credential of the workspace, opened in memory (the agents' pull secret). */
export async function registryCredentialsOf(
  db: Reader,
  keyring: Keyring,
  workspaceId: string,
): Promise<{ host: string; username: string; password: string }[]> {
  const rows = await db
    .selectFrom("registry_credentials")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .orderBy("host")
    .execute();
  return rows.map((row) => {
    const key = keyring.unwrap(row.wrapped_key, row.master_key_id, keyOwner(row.id));
    return {
      host: row.host,
      username: row.username,
      password: openWith(key, row.sealed_password, passwordAad(row)).toString("utf8"),
    };
  });
}

/**
 * Rewraps every credential's data key under the keyring's current master key (`krane ctrl
 * rotate-key`, beside the environments' data keys); the sealed passwords are never rewritten.
 */
export async function rewrapRegistryKeys(
  store: Store,
  keyring: Keyring,
): Promise<{ rewrapped: number; total: number }> {
  return store.write(async (tx) => {
    const rows = await tx.trx
      .selectFrom("registry_credentials")
      .select(["id", "wrapped_key", "master_key_id"])
      .execute();
    let rewrapped = 0;
    for (const r of rows) {
      if (r.master_key_id === keyring.currentId) continue;
      const wrapped = keyring.rewrap(r.wrapped_key, r.master_key_id, keyOwner(r.id));
      await tx.trx
        .updateTable("registry_credentials")
        .set({ wrapped_key: Buffer.from(wrapped), master_key_id: keyring.currentId })
        .where("id", "=", r.id)
        .execute();
      rewrapped++;
    }
    return { rewrapped, total: rows.length };
  });
}

// ---------------------------------------------------------------- the build registry's pull identity

const BUILD_PULL_PREFIX = "krane-pull-";

/**
 * The user name of a workspace's pull identity at the build registry (token mode): it names the
 * workspace's id, which the token endpoint reads back (`buildPullWorkspace`).
 */
export function buildPullUsername(workspaceId: string): string {
  return `${BUILD_PULL_PREFIX}${workspaceId}`;
}

/** The workspace id a build-registry pull user name names; undefined for any other name. Pure. */
export function buildPullWorkspace(username: string): string | undefined {
  if (!username.startsWith(BUILD_PULL_PREFIX)) return undefined;
  const id = username.slice(BUILD_PULL_PREFIX.length);
  return /^ws_[A-Za-z0-9]{1,64}$/.test(id) ? id : undefined;
}

/**
 * Whether the workspace's credential for the build registry `host` is ctrl's own pull identity
 * (a workspace's `krane registry add` of that host replaces it; the next build puts it back).
 */
export async function hasBuildPullCredential(db: Reader, workspaceId: string, host: string): Promise<boolean> {
  const row = await db
    .selectFrom("registry_credentials")
    .select("username")
    .where("workspace_id", "=", workspaceId)
    .where("host", "=", host)
    .executeTakeFirst();
  return row?.username === buildPullUsername(workspaceId);
}
