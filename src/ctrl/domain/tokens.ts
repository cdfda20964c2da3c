// Credentials: token generation and digests, and user API tokens (for the public API). Only
// SHA-256 digests are stored; a token is shown once, when made. A user token is an installation
// token (workspace_id null) or bound to one workspace by its id (a workspace created again under
// the same slug is another workspace) and owned by one of its members or service accounts
// (./members.ts), whose role it acts with, as it is at each lookup. User tokens are deleted when revoked (their digests kept
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
import { higherRole, isRoleName, type RoleName } from "../../contracts/roles.js";
import { newId } from "./ids.js";
import { checkGrant, findServiceAccount, insertServiceAccount, serviceAccountRecord, type Granter } from "./members.js";
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

/** Who owns a workspace token, and so what it may do. */
export interface TokenOwner {
  /** The role it acts with now (its member's, or its service account's). */
  role: RoleName;
  member?: { id: string; email: string; subject: string };
  serviceAccount?: { id: string; name: string };
}

export interface UserToken {
  id: string;
  name: string;
  workspace: TokenWorkspace | null;
  /** Absent for an installation token. */
  owner?: TokenOwner;
}

/** A token's row with its workspace and owner, for lookups and lists. */
export function tokensWithOwners(db: Reader) {
  return db
    .selectFrom("api_tokens as t")
    .leftJoin("workspaces as w", "w.id", "t.workspace_id")
    .leftJoin("members as m", "m.id", "t.member_id")
    .leftJoin("service_accounts as sa", "sa.id", "t.service_account_id")
    .select([
      "t.id",
      "t.name",
      "t.token_hash",
      "t.created_at",
      "t.last_used_at",
      "t.workspace_id",
      "w.slug as workspace_slug",
      "t.member_id",
      "m.email as member_email",
      "m.subject as member_subject",
      "m.granted_role as member_granted_role",
      "m.group_role as member_group_role",
      "t.service_account_id",
      "sa.name as service_account_name",
      "sa.role as service_account_role",
    ]);
}

type TokenJoinRow = {
  id: string;
  name: string;
  workspace_id: string | null;
  workspace_slug: string | null;
  member_id: string | null;
  member_email: string | null;
  member_subject: string | null;
  member_granted_role: string | null;
  member_group_role: string | null;
  service_account_id: string | null;
  service_account_name: string | null;
  service_account_role: string | null;
};

function asRole(v: string | null): RoleName | null {
  return v !== null && isRoleName(v) ? v : null;
}

/**
 * The owner of a workspace token as it is now; undefined when it has none that holds (its
 * member removed, its service account deleted: such a token is no token).
 */
export function ownerOf(r: TokenJoinRow): TokenOwner | undefined {
  if (r.member_id !== null) {
    const role = higherRole(asRole(r.member_granted_role), asRole(r.member_group_role));
    if (role === null || r.member_email === null) return undefined;
    return { role, member: { id: r.member_id, email: r.member_email, subject: r.member_subject ?? "" } };
  }
  if (r.service_account_id !== null) {
    const role = asRole(r.service_account_role);
    if (role === null || r.service_account_name === null) return undefined;
    return { role, serviceAccount: { id: r.service_account_id, name: r.service_account_name } };
  }
  return undefined;
}

/** A token row as a principal's token: undefined when its workspace or owner is gone. */
export function userTokenOf(r: TokenJoinRow): UserToken | undefined {
  if (r.workspace_id === null) return { id: r.id, name: r.name, workspace: null };
  if (r.workspace_slug === null) return undefined;
  const owner = ownerOf(r);
  if (!owner) return undefined;
  return { id: r.id, name: r.name, workspace: { id: r.workspace_id, slug: r.workspace_slug }, owner };
}

/**
 * The user token with this digest, its scope and owner. A token bound to a workspace that no
 * longer exists, or whose owner is gone, is no token (their removal also deletes it: this covers
 * the moment in between).
 */
export async function findUserTokenByHash(db: Reader, tokenHash: string): Promise<UserToken | undefined> {
  const row = await tokensWithOwners(db).where("t.token_hash", "=", tokenHash).executeTakeFirst();
  if (!row || !digestsEqual(row.token_hash, tokenHash)) return undefined;
  return userTokenOf(row);
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
  /** A workspace token's owner as it is now (undefined: an installation token's, or gone). */
  owner: TokenOwner | undefined;
}

/**
 * Serializes changes to the set of user tokens. On PostgreSQL two revocations could otherwise
 * each see the other's token still there and together remove the last two; SQLite has one
 * writer at a time anyway.
 */
async function lockApiTokens(tx: WriteTx): Promise<void> {
  await tx.dialect.lockNamed(tx.trx, "krane.api_tokens");
}

export function apiTokenRow(r: TokenJoinRow & { created_at: number; last_used_at: number | null }): ApiTokenRow {
  return {
    id: r.id,
    name: r.name,
    created_at: Number(r.created_at),
    last_used_at: r.last_used_at === null ? null : Number(r.last_used_at),
    workspace: r.workspace_id === null ? null : { id: r.workspace_id, slug: r.workspace_slug ?? "" },
    owner: r.workspace_id === null ? undefined : ownerOf(r),
  };
}

/**
 * Whose tokens a caller manages: every token (installation), one workspace's (its admins), or
 * one owner's own within a workspace (any other member or service account).
 */
export type TokenScope = "installation" | { workspaceId: string; memberId?: string; serviceAccountId?: string };

/** Whom a new workspace token belongs to. */
export type NewTokenOwner =
  | { memberId: string }
  /** A service account of the workspace by name or id (not_found when it has none). */
  | { serviceAccount: string; granter: Granter }
  /** A service account of the token's own name (role admin), made when missing. */
  | { ownServiceAccount: true };

/**
 * Creates a user token with a name unique in its scope, bound to `workspaceRef`'s workspace (slug
 * or id; null: an installation token) and owned by `owner` (default: a service account of its name);
 * returns its record and the token (shown once).
 */
export async function createApiToken(
  store: Store,
  name: string,
  workspaceRef: string | null = null,
  owner?: NewTokenOwner,
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
    let memberId: string | null = null;
    let serviceAccountId: string | null = null;
    if (workspace !== null) {
      // Unnamed, the owner is a service account of the token's own name (what a workspace token
      // was before roles).
      owner ??= { ownServiceAccount: true };
      if ("memberId" in owner) memberId = owner.memberId;
      else if ("serviceAccount" in owner) {
        const sa = await findServiceAccount(tx.trx, workspace.id, owner.serviceAccount);
        if (!sa) throw notFound(`service account "${owner.serviceAccount}" of workspace "${workspace.slug}"`);
        // Nobody mints a token of a role above their own.
        checkGrant(owner.granter, serviceAccountRecord(sa).role);
        serviceAccountId = sa.id;
      } else {
        const sa =
          (await findServiceAccount(tx.trx, workspace.id, name)) ??
          (await insertServiceAccount(tx, workspace.id, name, "admin"));
        serviceAccountId = sa.id;
      }
    }
    const r = {
      id: newId("tok"),
      name,
      token_hash: hashToken(token),
      created_at: tx.now,
      workspace_id: workspace?.id ?? null,
      member_id: memberId,
      service_account_id: serviceAccountId,
    };
    await tx.trx.insertInto("api_tokens").values(r).execute();
    // The audit log's target (by id: a name is unique only within its scope).
    await noteWriteSubject(tx, r.id);
    const stored = await tokensWithOwners(tx.trx).where("t.id", "=", r.id).executeTakeFirstOrThrow();
    return apiTokenRow(stored);
  });
  return { row, token };
}

/** Whether a token is within `scope` (an owner's scope holds only that owner's tokens). */
function inScope(
  row: { workspace_id: string | null; member_id: string | null; service_account_id: string | null },
  scope: TokenScope,
): boolean {
  if (scope === "installation") return true;
  if (row.workspace_id !== scope.workspaceId) return false;
  if (scope.memberId !== undefined) return row.member_id === scope.memberId;
  if (scope.serviceAccountId !== undefined) return row.service_account_id === scope.serviceAccountId;
  return true;
}

/**
 * Deletes a user token the caller's scope holds (another's: not_found, as if it did not
 * exist); refuses the last installation token (FailedPrecondition), and an owner's token to
 * anyone but an owner (or the installation, or the token's own owner).
 */
export async function revokeApiToken(
  store: Store,
  tokenId: string,
  scope: TokenScope = "installation",
  granter: Granter = "installation",
): Promise<ApiTokenRow> {
  return store.write(async (tx) => {
    await lockApiTokens(tx);
    const row = await tokensWithOwners(tx.trx).where("t.id", "=", tokenId).executeTakeFirst();
    if (!row || !inScope(row, scope)) throw notFound(`api token "${tokenId}"`);
    // An owner's token is an owner's to revoke (besides its own holder's).
    const owner = ownerOf(row);
    const own = scope !== "installation" && (scope.memberId !== undefined || scope.serviceAccountId !== undefined);
    if (owner && !own) checkGrant(granter, null, owner.role);
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

/** Revokes every token of a member or of a service account (their removal); returns their ids. */
export async function revokeOwnedTokens(
  tx: WriteTx,
  owner: { memberId: string } | { serviceAccountId: string },
): Promise<string[]> {
  return "memberId" in owner
    ? revokeTokensWhere(tx, "member_id", owner.memberId)
    : revokeTokensWhere(tx, "service_account_id", owner.serviceAccountId);
}

/**
 * Revokes every token bound to a workspace, in the transaction that ends the workspace's
 * deletion: a workspace created again under the same slug starts with no token of the old one.
 */
export async function revokeWorkspaceTokens(tx: WriteTx, workspaceId: string): Promise<string[]> {
  return revokeTokensWhere(tx, "workspace_id", workspaceId);
}

/** Deletes the tokens whose `column` is `id`, their hashes kept as revoked; returns their ids. */
async function revokeTokensWhere(
  tx: WriteTx,
  column: "member_id" | "service_account_id" | "workspace_id",
  id: string,
): Promise<string[]> {
  const rows = await tx.trx.selectFrom("api_tokens").select(["id", "token_hash"]).where(column, "=", id).execute();
  if (rows.length === 0) return [];
  await tx.trx.deleteFrom("api_tokens").where(column, "=", id).execute();
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
