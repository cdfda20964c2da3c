// Members' sign-in sessions (tables oidc_logins, member_sessions), made by a sign-in through the
// installation's OpenID provider (../auth/oidc.ts).
//
// A sign-in under way is a row keyed by the digest of its `state`, holding the nonce and PKCE
// verifier its answer is checked with; taking it deletes it, so a state is good once (a replayed
// answer finds nothing) and only for a few minutes.
//
// A session belongs to one member, so to one workspace, and acts with that member's role as it
// is at each lookup (a removed member's sessions go with their row: ./access.ts). It has a
// short-lived access token (the bearer token of calls) and a refresh token that trades itself
// for a new pair until the session's own end; both are stored as SHA-256 digests only and the
// refresh token is replaced at each use, so a copied one works at most once. Revoking deletes the
// row: the next lookup of its access token finds nothing.
import { randomBytes } from "node:crypto";
import type { Kysely } from "kysely";
import { higherRole, isRoleName, type RoleName } from "../../contracts/roles.js";
import type { WriteTx } from "../db/outbox.js";
import type { Database } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { noteWriteSubject } from "../db/write-hook.js";
import { randomChars } from "./ids.js";
import type { MemberRecord } from "./members.js";
import { digestsEqual, hashToken, type UserToken } from "./tokens.js";

type Reader = Kysely<Database>;

export const SESSION_ACCESS_PREFIX = "krane_session_";
export const SESSION_REFRESH_PREFIX = "krane_refresh_";

/** A session's id (mss_…): what `krane session list` shows and `revoke` takes. */
export function isMemberSessionId(id: string): boolean {
  return id.startsWith("mss_");
}

export interface SessionLifetimes {
  /** How long an access token lasts (a refresh makes another). */
  accessMs: number;
  /** How long the session lasts, refreshed or not. */
  sessionMs: number;
}

/** Five minutes of access, twelve hours of session. */
export const DEFAULT_SESSION_LIFETIMES: SessionLifetimes = { accessMs: 5 * 60_000, sessionMs: 12 * 3600_000 };

/** A sign-in under way lasts this long (the person has that long at their provider). */
export const LOGIN_TTL_MS = 10 * 60_000;

export interface PendingLogin {
  nonce: string;
  codeVerifier: string;
  redirectUri: string;
  workspace: string;
}

export async function saveLogin(store: Store, state: string, login: PendingLogin): Promise<void> {
  await store.write(async (tx) => {
    // Sign-ins never finished are forgotten as new ones start.
    await tx.trx.deleteFrom("oidc_logins").where("expires_at", "<=", tx.now).execute();
    await tx.trx
      .insertInto("oidc_logins")
      .values({
        state_hash: hashToken(state),
        nonce: login.nonce,
        code_verifier: login.codeVerifier,
        redirect_uri: login.redirectUri,
        workspace: login.workspace,
        created_at: tx.now,
        expires_at: tx.now + LOGIN_TTL_MS,
      })
      .execute();
  });
}

/** The sign-in with this state, deleted as it is read: undefined when unknown, taken or expired. */
export async function takeLogin(store: Store, state: string): Promise<PendingLogin | undefined> {
  const digest = hashToken(state);
  return store.write(async (tx) => {
    const row = await tx.trx.selectFrom("oidc_logins").selectAll().where("state_hash", "=", digest).executeTakeFirst();
    if (!row || !digestsEqual(row.state_hash, digest)) return undefined;
    await tx.trx.deleteFrom("oidc_logins").where("state_hash", "=", digest).execute();
    if (Number(row.expires_at) <= tx.now) return undefined;
    return {
      nonce: row.nonce,
      codeVerifier: row.code_verifier,
      redirectUri: row.redirect_uri,
      workspace: row.workspace,
    };
  });
}

export interface SessionTokens {
  sessionId: string;
  accessToken: string;
  refreshToken: string;
  accessExpiresAt: number;
  expiresAt: number;
}

function secret(prefix: string): string {
  return `${prefix}${randomBytes(32).toString("base64url")}`;
}

/** A new session for a member who just signed in, in the sign-in's transaction. */
export async function insertMemberSession(
  tx: WriteTx,
  member: MemberRecord,
  client: "cli" | "dashboard",
  lifetimes: SessionLifetimes,
  ip = "",
): Promise<SessionTokens> {
  const t: SessionTokens = {
    sessionId: `mss_${randomChars(20)}`,
    accessToken: secret(SESSION_ACCESS_PREFIX),
    refreshToken: secret(SESSION_REFRESH_PREFIX),
    accessExpiresAt: tx.now + Math.min(lifetimes.accessMs, lifetimes.sessionMs),
    expiresAt: tx.now + lifetimes.sessionMs,
  };
  await tx.trx
    .insertInto("member_sessions")
    .values({
      id: t.sessionId,
      member_id: member.id,
      workspace_id: member.workspaceId,
      subject: member.subject ?? "",
      client,
      access_hash: hashToken(t.accessToken),
      access_expires_at: t.accessExpiresAt,
      refresh_hash: hashToken(t.refreshToken),
      expires_at: t.expiresAt,
      created_at: tx.now,
      refreshed_at: tx.now,
      ip: ip.slice(0, 64),
    })
    .execute();
  await noteWriteSubject(tx, t.sessionId);
  return t;
}

function sessionsWithMembers(db: Reader) {
  return db
    .selectFrom("member_sessions as s")
    .innerJoin("members as m", (j) =>
      j.onRef("m.id", "=", "s.member_id").onRef("m.workspace_id", "=", "s.workspace_id"),
    )
    .innerJoin("workspaces as w", "w.id", "s.workspace_id")
    .select([
      "s.id",
      "s.access_hash",
      "s.refresh_hash",
      "s.access_expires_at",
      "s.expires_at",
      "s.workspace_id",
      "w.slug as workspace_slug",
      "s.member_id",
      "m.email",
      "m.subject",
      "m.granted_role",
      "m.group_role",
    ]);
}

function roleOf(granted: string | null, group: string | null): RoleName | null {
  const r = (v: string | null): RoleName | null => (v !== null && isRoleName(v) ? v : null);
  return higherRole(r(granted), r(group));
}

/**
 * The live session whose access token has this digest, as the token it stands for: its id (mss_…),
 * its workspace, and its member with their role now. Undefined when expired, revoked, or its
 * member is gone or has no role.
 */
export async function findSessionByAccess(db: Reader, digest: string, now: number): Promise<UserToken | undefined> {
  const s = await sessionsWithMembers(db)
    .where("s.access_hash", "=", digest)
    .where("s.access_expires_at", ">", now)
    .where("s.expires_at", ">", now)
    .executeTakeFirst();
  if (!s || !digestsEqual(s.access_hash, digest)) return undefined;
  return sessionToken(s);
}

function sessionToken(s: {
  id: string;
  email: string;
  subject: string | null;
  member_id: string;
  workspace_id: string;
  workspace_slug: string;
  granted_role: string | null;
  group_role: string | null;
}): UserToken | undefined {
  const role = roleOf(s.granted_role, s.group_role);
  if (role === null) return undefined;
  return {
    id: s.id,
    name: `session of ${s.email}`,
    workspace: { id: s.workspace_id, slug: s.workspace_slug },
    owner: { role, member: { id: s.member_id, email: s.email, subject: s.subject ?? "" } },
  };
}

/**
 * The live session with this id as the token it stands for (the dashboard's cookie sessions of
 * a sign-in, ./sessions.ts, act as their member session): undefined when over, revoked, or its
 * member gone or without a role.
 */
export async function findMemberSessionById(db: Reader, id: string, now: number): Promise<UserToken | undefined> {
  const s = await sessionsWithMembers(db).where("s.id", "=", id).where("s.expires_at", ">", now).executeTakeFirst();
  return s ? sessionToken(s) : undefined;
}

/**
 * Trades a refresh token for a new access and refresh token of the same session (the old pair
 * stops working); undefined when the session is over, revoked, or its member gone.
 */
export async function refreshMemberSession(
  store: Store,
  refreshToken: string,
  accessMs: number,
  ip = "",
): Promise<SessionTokens | undefined> {
  const digest = hashToken(refreshToken);
  return store.write(async (tx) => {
    const s = await sessionsWithMembers(tx.trx)
      .where("s.refresh_hash", "=", digest)
      .where("s.expires_at", ">", tx.now)
      .executeTakeFirst();
    if (!s || !digestsEqual(s.refresh_hash, digest) || roleOf(s.granted_role, s.group_role) === null) return undefined;
    const expiresAt = Number(s.expires_at);
    const t: SessionTokens = {
      sessionId: s.id,
      accessToken: secret(SESSION_ACCESS_PREFIX),
      refreshToken: secret(SESSION_REFRESH_PREFIX),
      accessExpiresAt: Math.min(tx.now + accessMs, expiresAt),
      expiresAt,
    };
    await tx.trx
      .updateTable("member_sessions")
      .set({
        access_hash: hashToken(t.accessToken),
        access_expires_at: t.accessExpiresAt,
        refresh_hash: hashToken(t.refreshToken),
        refreshed_at: tx.now,
        ip: ip.slice(0, 64),
      })
      .where("id", "=", s.id)
      .where("refresh_hash", "=", digest)
      .execute();
    return t;
  });
}

export interface MemberSessionRecord {
  id: string;
  memberId: string;
  email: string;
  subject: string;
  client: string;
  ip: string;
  createdAt: number;
  refreshedAt: number;
  expiresAt: number;
}

/** A workspace's live sessions (of one member when memberId is given), newest first. */
export async function listMemberSessions(
  db: Reader,
  workspaceId: string,
  now: number,
  memberId?: string,
): Promise<MemberSessionRecord[]> {
  let q = db
    .selectFrom("member_sessions as s")
    .innerJoin("members as m", "m.id", "s.member_id")
    .select([
      "s.id",
      "s.member_id",
      "m.email",
      "s.subject",
      "s.client",
      "s.ip",
      "s.created_at",
      "s.refreshed_at",
      "s.expires_at",
    ])
    .where("s.workspace_id", "=", workspaceId)
    .where("s.expires_at", ">", now);
  if (memberId !== undefined) q = q.where("s.member_id", "=", memberId);
  const rows = await q.orderBy("s.created_at", "desc").orderBy("s.id").execute();
  return rows.map((r) => ({
    id: r.id,
    memberId: r.member_id,
    email: r.email,
    subject: r.subject,
    client: r.client,
    ip: r.ip,
    createdAt: Number(r.created_at),
    refreshedAt: Number(r.refreshed_at),
    expiresAt: Number(r.expires_at),
  }));
}

/** A session of the workspace by id, or undefined. */
export async function findMemberSession(
  db: Reader,
  workspaceId: string,
  id: string,
): Promise<{ id: string; memberId: string } | undefined> {
  const r = await db
    .selectFrom("member_sessions")
    .select(["id", "member_id"])
    .where("workspace_id", "=", workspaceId)
    .where("id", "=", id)
    .executeTakeFirst();
  return r ? { id: r.id, memberId: r.member_id } : undefined;
}

/** Ends a session (revocation), in the caller's transaction; false when there was none. */
export async function deleteMemberSession(tx: WriteTx, id: string): Promise<boolean> {
  const r = await tx.trx.deleteFrom("member_sessions").where("id", "=", id).executeTakeFirst();
  return Number(r.numDeletedRows) > 0;
}

/** Ends every session of a member, or of a workspace; answers their ids. */
export async function deleteMemberSessions(
  tx: WriteTx,
  of: { memberId: string } | { workspaceId: string },
): Promise<string[]> {
  const [column, id] =
    "memberId" in of ? (["member_id", of.memberId] as const) : (["workspace_id", of.workspaceId] as const);
  const rows = await tx.trx.selectFrom("member_sessions").select("id").where(column, "=", id).execute();
  if (rows.length > 0) await tx.trx.deleteFrom("member_sessions").where(column, "=", id).execute();
  return rows.map((r) => r.id);
}

/** Which of these sessions are still there (the stream re-check of other replicas' revocations). */
export async function memberSessionsPresent(db: Reader, ids: string[], now: number): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db
    .selectFrom("member_sessions")
    .select("id")
    .where("id", "in", ids)
    .where("expires_at", ">", now)
    .execute();
  return new Set(rows.map((r) => r.id));
}

/** Forgets sessions past their end and sign-ins never finished. */
export async function pruneMemberSessions(store: Store, now: number): Promise<number> {
  return store.write(async (tx) => {
    const s = await tx.trx.deleteFrom("member_sessions").where("expires_at", "<=", now).executeTakeFirst();
    const l = await tx.trx.deleteFrom("oidc_logins").where("expires_at", "<=", now).executeTakeFirst();
    return Number(s.numDeletedRows) + Number(l.numDeletedRows);
  });
}
