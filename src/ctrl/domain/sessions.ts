// The web dashboard's sign-in sessions: an API token traded for a session whose id lives in an
// HttpOnly cookie. Only the id's SHA-256 digest is stored. A session acts as the token it was
// made from and ends with it: the lookup reads api_tokens, whose row a revocation deletes. A
// session carries its token's scope (an installation token's, or one workspace's) and its
// owner's role. Members' sign-in sessions are ./member-sessions.ts; the dashboard's sign-in
// through the provider makes one (client "dashboard") and a cookie session here acting as it, so
// revoking the member session (`krane session revoke`) ends the browser's access.
import { randomBytes } from "node:crypto";
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { deleteMemberSession, findMemberSessionById, isMemberSessionId } from "./member-sessions.js";
import { digestsEqual, hashToken, tokensWithOwners, userTokenOf, type UserToken } from "./tokens.js";

type Reader = Kysely<Database>;

export interface Session {
  /** The token it acts as: its id, name, scope and owner. */
  token: UserToken;
  expiresAt: number;
}

/**
 * A new session for a user token, or for a member session (mss_…, a sign-in through the
 * provider); returns the id for the cookie (shown once, never stored).
 */
export async function createSession(
  store: Store,
  tokenId: string,
  ttlMs: number,
): Promise<{ id: string; expiresAt: number }> {
  const id = randomBytes(32).toString("base64url");
  const expiresAt = await store.write(async (tx) => {
    const expires_at = tx.now + ttlMs;
    await tx.trx
      .insertInto("dashboard_sessions")
      .values({ session_hash: hashToken(id), token_id: tokenId, created_at: tx.now, expires_at })
      .execute();
    return expires_at;
  });
  return { id, expiresAt };
}

/** The live session with this digest (not expired at `now`, its token not revoked, its owner there). */
export async function findSession(db: Reader, digest: string, now: number): Promise<Session | undefined> {
  const s = await db
    .selectFrom("dashboard_sessions")
    .selectAll()
    .where("session_hash", "=", digest)
    .where("expires_at", ">", now)
    .executeTakeFirst();
  if (!s || !digestsEqual(s.session_hash, digest)) return undefined;
  // A sign-in through the provider: the session acts as its member session (revoked with it).
  if (isMemberSessionId(s.token_id)) {
    const token = await findMemberSessionById(db, s.token_id, now);
    return token ? { token, expiresAt: Number(s.expires_at) } : undefined;
  }
  const row = await tokensWithOwners(db).where("t.id", "=", s.token_id).executeTakeFirst();
  // A workspace token whose workspace or owner is gone is no token (../domain/tokens.ts).
  const token = row ? userTokenOf(row) : undefined;
  return token ? { token, expiresAt: Number(s.expires_at) } : undefined;
}

/**
 * Ends a session (sign-out), and the member session it acts as; answers what it acted as (the
 * token's or member session's id), undefined when there was none.
 */
export async function deleteSession(store: Store, digest: string): Promise<string | undefined> {
  return store.write(async (tx) => {
    const s = await tx.trx
      .selectFrom("dashboard_sessions")
      .select("token_id")
      .where("session_hash", "=", digest)
      .executeTakeFirst();
    if (!s) return undefined;
    await tx.trx.deleteFrom("dashboard_sessions").where("session_hash", "=", digest).execute();
    if (isMemberSessionId(s.token_id)) await deleteMemberSession(tx, s.token_id);
    return s.token_id;
  });
}

/** Forgets sessions that expired before `now`, and those of revoked tokens or member sessions. */
export async function pruneSessions(store: Store, now: number): Promise<number> {
  return store.write(async (tx) => {
    const expired = await tx.trx.deleteFrom("dashboard_sessions").where("expires_at", "<=", now).executeTakeFirst();
    const orphaned = await tx.trx
      .deleteFrom("dashboard_sessions")
      .where("token_id", "not in", (eb) => eb.selectFrom("api_tokens").select("id"))
      .where("token_id", "not in", (eb) => eb.selectFrom("member_sessions").select("id"))
      .executeTakeFirst();
    return Number(expired.numDeletedRows) + Number(orphaned.numDeletedRows);
  });
}
