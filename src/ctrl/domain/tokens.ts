// Credentials: token generation and digests, and user API tokens (for the public API). Only
// SHA-256 digests are stored; a token is shown once, when made. A user token is an installation
// token (workspace_id null) or bound to one workspace by its id (a workspace created again under
// the same slug is another workspace). User tokens are deleted when revoked (their digests kept
// in revoked_tokens so a configured admin token is not registered again) — never the last
// installation token, so the API cannot lock everyone out — and with their workspace when its
// deletion ends. Names are unique per scope. Agent tokens belong to clusters (./clusters.ts).
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { Kysely } from "kysely";
import type { WriteTx } from "../db/outbox.js";
import { noteWriteSubject } from "../db/write-hook.js";
import type { Database } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { alreadyExists, failedPrecondition, notFound } from "../errors.js";
import { newId } from "./ids.js";
import { findWorkspace } from "./tenancy.js";

type Reader = Kysely<Database>;

export type TokenKind = "agent" | "user";

export function generateToken(kind: TokenKind): string {
  return `krane_${kind}_${randomBytes(32).toString("base64url")}`;
}

export function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** Constant-time comparison of two hex digests. */
export function digestsEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, "hex");
  const y = Buffer.from(b, "hex");
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}

/** The workspace a user token is bound to; null: an installation token. */
export interface TokenWorkspace {
  id: string;
  slug: string;
}

export interface UserToken {
  id: string;
  name: string;
  workspace: TokenWorkspace | null;
}

/**
 * The user token with this digest and its scope. A token bound to a workspace that no longer
 * exists is no token (its deletion also deletes it: this covers the moment in between).
 */
export async function findUserTokenByHash(db: Reader, tokenHash: string): Promise<UserToken | undefined> {
  const row = await db
    .selectFrom("api_tokens as t")
    .leftJoin("workspaces as w", "w.id", "t.workspace_id")
    .select(["t.id", "t.name", "t.token_hash", "t.workspace_id", "w.slug"])
    .where("t.token_hash", "=", tokenHash)
    .executeTakeFirst();
  if (!row || !digestsEqual(row.token_hash, tokenHash)) return undefined;
  if (row.workspace_id === null) return { id: row.id, name: row.name, workspace: null };
  if (row.slug === null) return undefined;
  return { id: row.id, name: row.name, workspace: { id: row.workspace_id, slug: row.slug } };
}

/**
 * Registers an installation token given in full (bootstrap, tests, `krane dev`); idempotent. A
 * token that was revoked is not registered again: returns false then.
 */
export async function addUserToken(store: Store, name: string, token: string): Promise<boolean> {
  const digest = hashToken(token);
  return store.write(async (tx) => {
    const revoked = await tx.trx
      .selectFrom("revoked_tokens")
      .select("token_hash")
      .where("token_hash", "=", digest)
      .executeTakeFirst();
    if (revoked) return false;
    await tx.trx
      .insertInto("api_tokens")
      .values({ id: newId("tok"), name, token_hash: digest, created_at: tx.now })
      .onConflict((oc) => oc.column("token_hash").doNothing())
      .execute();
    return true;
  });
}

/** How many installation tokens there are (workspace tokens cannot stand in for one). */
export async function countInstallationTokens(db: Reader): Promise<number> {
  const row = await db
    .selectFrom("api_tokens")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("workspace_id", "is", null)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export interface ApiTokenRow {
  id: string;
  name: string;
  created_at: number;
  /** null until the first recorded use. */
  last_used_at: number | null;
  /** null: an installation token. */
  workspace: TokenWorkspace | null;
}

/**
 * Serializes changes to the set of user tokens. On PostgreSQL two revocations could otherwise
 * each see the other's token still there and together remove the last two; SQLite has one
 * writer at a time anyway.
 */
async function lockApiTokens(tx: WriteTx): Promise<void> {
  await tx.dialect.lockNamed(tx.trx, "krane.api_tokens");
}

export function apiTokenRow(r: {
  id: string;
  name: string;
  created_at: number;
  last_used_at: number | null;
  workspace_id: string | null;
  workspace_slug: string | null;
}): ApiTokenRow {
  return {
    id: r.id,
    name: r.name,
    created_at: Number(r.created_at),
    last_used_at: r.last_used_at === null ? null : Number(r.last_used_at),
    workspace: r.workspace_id === null ? null : { id: r.workspace_id, slug: r.workspace_slug ?? "" },
  };
}

/** Whose tokens a caller manages: every token (installation), or one workspace's. */
export type TokenScope = { workspaceId: string } | "installation";

function apiTokenRowsIn(db: Reader) {
  return db
    .selectFrom("api_tokens as t")
    .leftJoin("workspaces as w", "w.id", "t.workspace_id")
    .select([
      "t.id",
      "t.name",
      "t.token_hash",
      "t.created_at",
      "t.last_used_at",
      "t.workspace_id",
      "w.slug as workspace_slug",
    ]);
}

/**
 * Creates a user token with a name unique in its scope, bound to `workspaceRef`'s workspace (slug
 * or id; null: an installation token); returns its record and the token (shown once).
 */
export async function createApiToken(
  store: Store,
  name: string,
  workspaceRef: string | null = null,
): Promise<{ row: ApiTokenRow; token: string }> {
  const token = generateToken("user");
  const row = await store.write(async (tx) => {
    await lockApiTokens(tx);
    const workspace = workspaceRef === null ? null : await findWorkspace(tx.trx, workspaceRef);
    const taken = await tx.trx
      .selectFrom("api_tokens")
      .select("id")
      .where("name", "=", name)
      .where("workspace_id", workspace === null ? "is" : "=", workspace?.id ?? null)
      .executeTakeFirst();
    if (taken) throw alreadyExists(`api token "${name}"${workspace ? ` in workspace "${workspace.slug}"` : ""}`);
    const r = {
      id: newId("tok"),
      name,
      token_hash: hashToken(token),
      created_at: tx.now,
      workspace_id: workspace?.id ?? null,
    };
    await tx.trx.insertInto("api_tokens").values(r).execute();
    // The audit log's target (by id: a name is unique only within its scope).
    await noteWriteSubject(tx, r.id);
    return apiTokenRow({ ...r, last_used_at: null, workspace_slug: workspace?.slug ?? null });
  });
  return { row, token };
}

/**
 * Deletes a user token the caller's scope holds (another workspace's: not_found, as if it did not
 * exist); refuses the last installation token (FailedPrecondition).
 */
export async function revokeApiToken(
  store: Store,
  tokenId: string,
  scope: TokenScope = "installation",
): Promise<ApiTokenRow> {
  return store.write(async (tx) => {
    await lockApiTokens(tx);
    const row = await apiTokenRowsIn(tx.trx).where("t.id", "=", tokenId).executeTakeFirst();
    if (!row || (scope !== "installation" && row.workspace_id !== scope.workspaceId))
      throw notFound(`api token "${tokenId}"`);
    if (row.workspace_id === null && (await countInstallationTokens(tx.trx)) <= 1) {
      throw failedPrecondition(
        `api token "${row.name}" is the last installation token: create another before revoking it, or nobody could manage the installation`,
      );
    }
    await tx.trx.deleteFrom("api_tokens").where("id", "=", tokenId).execute();
    await tx.trx
      .insertInto("revoked_tokens")
      .values({ token_hash: row.token_hash, revoked_at: tx.now })
      .onConflict((oc) => oc.column("token_hash").doNothing())
      .execute();
    return apiTokenRow(row);
  });
}

/**
 * Revokes every token bound to a workspace, in the transaction that ends the workspace's
 * deletion: a workspace created again under the same slug starts with no token of the old one.
 */
export async function revokeWorkspaceTokens(tx: WriteTx, workspaceId: string): Promise<string[]> {
  const rows = await tx.trx
    .selectFrom("api_tokens")
    .select(["id", "token_hash"])
    .where("workspace_id", "=", workspaceId)
    .execute();
  if (rows.length === 0) return [];
  await tx.trx.deleteFrom("api_tokens").where("workspace_id", "=", workspaceId).execute();
  for (const r of rows)
    await tx.trx
      .insertInto("revoked_tokens")
      .values({ token_hash: r.token_hash, revoked_at: tx.now })
      .onConflict((oc) => oc.column("token_hash").doNothing())
      .execute();
  return rows.map((r) => r.id);
}

/** Which of these user tokens still exist (open streams are checked against it). */
export async function userTokensPresent(db: Reader, ids: readonly string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db
    .selectFrom("api_tokens")
    .select("id")
    .where("id", "in", [...ids])
    .execute();
  return new Set(rows.map((r) => r.id));
}

/**
 * Records that a user token was used at `now`, unless a use less than `minIntervalMs` ago is
 * already recorded (several ctrl replicas then write at most about once per interval).
 */
export async function recordApiTokenUse(
  db: Reader,
  tokenId: string,
  now: number,
  minIntervalMs: number,
): Promise<void> {
  await db
    .updateTable("api_tokens")
    .set({ last_used_at: now })
    .where("id", "=", tokenId)
    .where((eb) => eb.or([eb("last_used_at", "is", null), eb("last_used_at", "<=", now - minIntervalMs)]))
    .execute();
}
