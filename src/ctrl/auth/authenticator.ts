// Authentication and authorization of every RPC.
//
// Callers send `Authorization: Bearer <token>`. Agent tokens (one per cluster, bound to its
// region) may call only ClusterService and LogChannelService, and only for their own region; user API tokens may call
// only the public API. Tokens are looked up by their SHA-256 digest and the digests compared in
// constant time; lookups are cached briefly (cacheTtlMs).
//
// A user token bound to a workspace reaches only that workspace: before any public method runs,
// what its request names is checked against the token's workspace by the method's rule
// (./scope.ts) — the one check every handler relies on. A refusal is marked on the call's context
// so the audit log records it (in the token's own workspace's chain).
//
// Roles: a workspace token acts with its owner's role (a member's, as it is at the lookup, or a
// service account's; ../domain/tokens.ts). Once the scope holds, the role the method declares
// (./policy.ts) is checked too, before any handler runs: less is permission_denied naming the
// role needed. Installation tokens have no role and pass.
//
// A member's sign-in session (../domain/member-sessions.ts) is a bearer token too
// (krane_session_…): its principal is its member's, its tokenId the session's id (mss_…), so a
// revoked session is forgotten and its streams ended like a revoked token.
//
// Revocation: the API handlers tell this process's Authenticator (forgetUserToken,
// forgetCluster), which drops the cached lookups at once and ends the streams opened with the
// revoked token (agents' watches; the public API's StreamLogs and audit exports, and those of a
// dashboard session signed out). Another ctrl replica learns only from the database: it refuses
// the token once its cached lookup expires (cacheTtlMs) and ends such streams at its next stream
// re-check (streamRecheckMs), which looks up every open stream's token again (a workspace token
// deleted with its workspace too).
import { Code, ConnectError, type Interceptor, type StreamRequest, type UnaryRequest } from "@connectrpc/connect";
import type { Store } from "../db/store.js";
import { findClusterByTokenHash } from "../domain/clusters.js";
import {
  findSessionByAccess,
  isMemberSessionId,
  memberSessionsPresent,
  SESSION_ACCESS_PREFIX,
} from "../domain/member-sessions.js";
import { findSession } from "../domain/sessions.js";
import {
  findUserTokenByHash,
  hashToken,
  recordApiTokenUse,
  userTokensPresent,
  type UserToken,
} from "../domain/tokens.js";
import { allows, roleOfRank, withArticle } from "../../contracts/roles.js";
import { DomainError } from "../errors.js";
import { workspaceOfDeployment } from "../read/deployments.js";
import { workspaceIdBySlug } from "../read/tenancy.js";
import { crossSiteRefusal, readCookie, sessionCookieName } from "./browser.js";
import {
  callerSecretKey,
  principalKey,
  scopeRefusalKey,
  type Principal,
  type RevocationListener,
  type UserPrincipal,
} from "./principal.js";
import { isAgentMethod, policyOf } from "./policy.js";
import { claimOf, decide, lookupFor, ruleOf } from "./scope.js";

export interface AuthOptions {
  cacheTtlMs?: number;
  cacheMax?: number;
  /** How often open agent streams look their token up again (ms; 0: never). Default 30 s. */
  streamRecheckMs?: number;
  /** Least time between two recorded uses of one user token (ms). Default one minute. */
  usageIntervalMs?: number;
  /** The dashboard's session cookie is Secure (ctrl serves TLS, or its public URL is https). */
  secureCookies?: boolean;
  /** The origin browsers' calls must come from (ctrl's public URL); default: the request's own. */
  publicOrigin?: string;
}

/** An open server stream, and whose credential it lives on. */
interface LiveStream {
  owner: { kind: "agent"; digest: string; clusterId: string } | { kind: "user"; tokenId: string; session?: string };
  end(err: ConnectError): void;
}

/** A token's principal: its scope and, for a workspace token, its owner and role. */
export function tokenPrincipal(t: UserToken): UserPrincipal {
  const p: UserPrincipal = { kind: "user", tokenId: t.id, name: t.name, workspace: t.workspace };
  if (t.owner) {
    p.role = t.owner.role;
    if (t.owner.member) p.member = t.owner.member;
    if (t.owner.serviceAccount) p.serviceAccount = t.owner.serviceAccount;
  }
  return p;
}

function revokedError(kind: "agent" | "user"): ConnectError {
  return new ConnectError(`the ${kind === "agent" ? "agent" : "API"} token was revoked`, Code.Unauthenticated);
}

export class Authenticator implements RevocationListener {
  private readonly cache = new Map<string, { principal: Principal; expires: number }>();
  private readonly streams = new Set<LiveStream>();
  /** User token id → when this process last recorded its use. */
  private readonly usage = new Map<string, number>();
  private readonly ttl: number;
  private readonly max: number;
  private readonly recheckMs: number;
  private readonly usageMs: number;
  private readonly cookieName: string;
  private recheckTimer: NodeJS.Timeout | null = null;
  private rechecking = false;
  private readonly publicOrigin: string | undefined;

  constructor(
    private readonly store: Store,
    options: AuthOptions = {},
  ) {
    this.ttl = options.cacheTtlMs ?? 5000;
    this.max = options.cacheMax ?? 10_000;
    this.recheckMs = options.streamRecheckMs ?? 30_000;
    this.usageMs = options.usageIntervalMs ?? 60_000;
    this.cookieName = sessionCookieName(options.secureCookies ?? false);
    this.publicOrigin = options.publicOrigin;
  }

  /** The session cookie's name (the dashboard's sign-in sets it). */
  get sessionCookieName(): string {
    return this.cookieName;
  }

  /**
   * The user a dashboard session acts as, cached like tokens (a sign-out on this process drops
   * it at once: forgetSession; another replica's cache keeps it at most cacheTtlMs).
   */
  async authenticateSession(sessionId: string): Promise<(Principal & { kind: "user" }) | undefined> {
    const digest = `session:${hashToken(sessionId)}`;
    const now = Date.now();
    const hit = this.cache.get(digest);
    if (hit && hit.expires > now && hit.principal.kind === "user") return hit.principal;
    const s = await findSession(this.store.db, hashToken(sessionId), now);
    if (!s) return undefined;
    const principal = tokenPrincipal(s.token);
    if (this.cache.size >= this.max) this.cache.clear();
    // Never cached past the session's own expiry.
    this.cache.set(digest, { principal, expires: Math.min(now + this.ttl, s.expiresAt) });
    return principal;
  }

  forgetSession(sessionId: string): void {
    const digest = hashToken(sessionId);
    this.cache.delete(`session:${digest}`);
    for (const s of [...this.streams])
      if (s.owner.kind === "user" && s.owner.session === digest)
        s.end(new ConnectError("the session has ended: sign in again", Code.Unauthenticated));
  }

  /**
   * Whether the credential of a call (its bearer token, else its session cookie) still holds: a
   * long stream asks again now and then, so a revoked token or an ended session ends it.
   */
  async stillValid(header: Headers): Promise<boolean> {
    const authorization = header.get("authorization");
    if (authorization !== null) return (await this.resolve(authorization)) !== undefined;
    const sessionId = readCookie(header.get("cookie"), this.cookieName);
    return sessionId !== undefined && (await this.authenticateSession(sessionId)) !== undefined;
  }

  async authenticate(authorization: string | null): Promise<Principal | undefined> {
    return (await this.resolve(authorization))?.principal;
  }

  private async resolve(authorization: string | null): Promise<{ principal: Principal; digest: string } | undefined> {
    if (authorization === null) return undefined;
    const m = /^Bearer\s+(\S{1,512})\s*$/i.exec(authorization);
    if (!m || m[1] === undefined) return undefined;
    const digest = hashToken(m[1]);
    const now = Date.now();
    const hit = this.cache.get(digest);
    if (hit && hit.expires > now) return { principal: hit.principal, digest };
    let principal: Principal | undefined;
    if (m[1].startsWith("krane_agent_")) {
      const c = await findClusterByTokenHash(this.store.db, digest);
      if (c) principal = { kind: "agent", clusterId: c.id, region: c.region };
    } else if (m[1].startsWith(SESSION_ACCESS_PREFIX)) {
      // A member's sign-in session (../domain/member-sessions.ts): never cached past its access
      // token's expiry, which the lookup checks.
      const t = await findSessionByAccess(this.store.db, digest, now);
      if (t) principal = tokenPrincipal(t);
    } else {
      const t = await findUserTokenByHash(this.store.db, digest);
      if (t) principal = tokenPrincipal(t);
    }
    if (!principal) return undefined;
    if (this.cache.size >= this.max) this.cache.clear();
    this.cache.set(digest, { principal, expires: now + this.ttl });
    return { principal, digest };
  }

  /** Records a user token's use, at most once per usageIntervalMs from this process. */
  private async noteUse(tokenId: string): Promise<void> {
    // A sign-in session is no API token: its use is its refresh.
    if (isMemberSessionId(tokenId)) return;
    const now = Date.now();
    const last = this.usage.get(tokenId);
    if (last !== undefined && now - last < this.usageMs) return;
    if (this.usage.size >= this.max) this.usage.clear();
    this.usage.set(tokenId, now);
    // Bookkeeping only: a database hiccup here must not fail the caller's request.
    await recordApiTokenUse(this.store.db, tokenId, now, this.usageMs).catch(() => undefined);
  }

  forgetUserToken(tokenId: string): void {
    for (const [digest, e] of this.cache)
      if (e.principal.kind === "user" && e.principal.tokenId === tokenId) this.cache.delete(digest);
    this.usage.delete(tokenId);
    for (const s of [...this.streams])
      if (s.owner.kind === "user" && s.owner.tokenId === tokenId) s.end(revokedError("user"));
  }

  forgetCluster(clusterId: string, keepDigest?: string): void {
    for (const [digest, e] of this.cache) {
      if (e.principal.kind === "agent" && e.principal.clusterId === clusterId && digest !== keepDigest)
        this.cache.delete(digest);
    }
    for (const s of [...this.streams])
      if (s.owner.kind === "agent" && s.owner.clusterId === clusterId && s.owner.digest !== keepDigest)
        s.end(revokedError("agent"));
  }

  /** Number of open agent streams (tests, metrics). */
  get openAgentStreams(): number {
    return [...this.streams].filter((s) => s.owner.kind === "agent").length;
  }

  /** Number of open public API streams (StreamLogs, audit exports). */
  get openUserStreams(): number {
    return [...this.streams].filter((s) => s.owner.kind === "user").length;
  }

  interceptor(): Interceptor {
    return (next) => async (req) => {
      const authorization = req.header.get("authorization");
      const sessionId = authorization === null ? readCookie(req.header.get("cookie"), this.cookieName) : undefined;
      if (sessionId !== undefined) {
        // A browser's call: from the dashboard's own origin only, then as the session's user.
        const refusal = crossSiteRefusal({
          ownOrigin: this.publicOrigin ?? new URL(req.url).origin,
          origin: req.header.get("origin"),
          secFetchSite: req.header.get("sec-fetch-site"),
        });
        if (refusal !== undefined) throw new ConnectError(refusal, Code.PermissionDenied);
        const user = await this.authenticateSession(sessionId);
        if (!user) throw new ConnectError("the session has ended: sign in again", Code.Unauthenticated);
        req.contextValues.set(principalKey, user);
        req.contextValues.set(callerSecretKey, `session:${sessionId}`);
        if (isAgentMethod(req.method))
          throw new ConnectError(`${req.service.name} needs an agent token`, Code.PermissionDenied);
        await this.noteUse(user.tokenId);
        const res = await next(await this.checkScope(req, user));
        if (!res.stream) return res;
        const owner = { kind: "user" as const, tokenId: user.tokenId, session: hashToken(sessionId) };
        return { ...res, message: this.guard(res.message, owner) };
      }
      const resolved = await this.resolve(authorization);
      if (!resolved) throw new ConnectError("missing or invalid bearer token", Code.Unauthenticated);
      const { principal, digest } = resolved;
      // Known before the checks below, so a refusal records who was refused (the audit log).
      req.contextValues.set(principalKey, principal);
      req.contextValues.set(callerSecretKey, authorization ?? "");
      const forAgents = isAgentMethod(req.method);
      if (forAgents && principal.kind !== "agent") {
        throw new ConnectError(`${req.service.name} needs an agent token`, Code.PermissionDenied);
      }
      if (!forAgents && principal.kind !== "user") {
        throw new ConnectError("the public API needs a user API token", Code.PermissionDenied);
      }
      if (principal.kind === "user") {
        await this.noteUse(principal.tokenId);
        const res = await next(await this.checkScope(req, principal));
        // A public stream (logs followed, an export) ends with its token, like an agent's.
        if (!res.stream) return res;
        return { ...res, message: this.guard(res.message, { kind: "user", tokenId: principal.tokenId }) };
      }
      const res = await next(req);
      if (!res.stream) return res;
      return { ...res, message: this.guard(res.message, { kind: "agent", digest, clusterId: principal.clusterId }) };
    };
  }

  /**
   * Holds a user's call to its token's scope (./scope.ts): returns the request to pass on (a
   * server stream's single message read and handed on again) or throws the refusal.
   */
  private async checkScope<R extends UnaryRequest | StreamRequest>(req: R, user: UserPrincipal): Promise<R> {
    const own = user.workspace;
    if (own === null) return req;
    const checked = await this.checkWorkspace(req, own);
    // Within its workspace, the role the method declares (a method that declares none is refused
    // by the scope check already).
    const need = roleOfRank(policyOf(req.method)?.role ?? 0);
    if (user.role !== undefined && need !== undefined && !allows(user.role, need))
      throw new DomainError(
        "permission_denied",
        `${req.method.name} needs the ${need} role in workspace "${own.slug}" (this token's ${user.serviceAccount ? `service account "${user.serviceAccount.name}"` : "member"} is ${withArticle(user.role)})`,
      );
    return checked;
  }

  private async checkWorkspace<R extends UnaryRequest | StreamRequest>(
    req: R,
    own: NonNullable<UserPrincipal["workspace"]>,
  ): Promise<R> {
    let message: unknown;
    let pass: R = req;
    if (req.stream) {
      // Public streams are server streams: one request message, read here and handed on.
      const messages = [];
      for await (const m of req.message) {
        messages.push(m);
        // More than one is a protocol error Connect reports on its own.
        if (messages.length > 1) break;
      }
      message = messages[0];
      pass = {
        ...req,
        message: (async function* () {
          yield* messages;
        })(),
      };
    } else message = req.message;
    const claim = claimOf(ruleOf(req.method), message);
    const lookup = lookupFor(own, claim);
    let resolved: string | undefined;
    if (lookup.kind === "workspace-by-slug") resolved = await workspaceIdBySlug(this.store.db, lookup.slug);
    else if (lookup.kind === "deployment") resolved = await workspaceOfDeployment(this.store.db, lookup.id);
    const verdict = decide(own, claim, resolved);
    if (verdict.allow) return pass;
    // Aimed outside the workspace (an empty field is plain invalid input).
    if (verdict.code !== "invalid_argument") req.contextValues.set(scopeRefusalKey, true);
    throw new DomainError(verdict.code, verdict.message);
  }

  /** Passes a stream through until it ends, or until its token (or session) is revoked. */
  private async *guard<T>(source: AsyncIterable<T>, owner: LiveStream["owner"]): AsyncGenerator<T> {
    // One promise per message: racing a single long-lived "revoked" promise instead would add a
    // reaction to it for every message a healthy stream sends, for as long as the stream lives.
    let revoked: ConnectError | null = null;
    let interrupt: ((err: ConnectError) => void) | null = null;
    const live: LiveStream = {
      owner,
      end: (err) => {
        revoked = err;
        interrupt?.(err);
      },
    };
    this.streams.add(live);
    this.scheduleRecheck();
    const it = source[Symbol.asyncIterator]();
    let done = false;
    try {
      for (;;) {
        if (revoked !== null) throw revoked;
        const r = await new Promise<IteratorResult<T>>((resolve, reject) => {
          interrupt = reject;
          it.next().then(resolve, reject);
        });
        interrupt = null;
        if (r.done) {
          done = true;
          return;
        }
        yield r.value;
      }
    } finally {
      this.streams.delete(live);
      // A revoked stream's source may be waiting for a change: its return() runs once the
      // request closes (which aborts the watch), so it is not awaited here.
      if (!done) it.return?.().catch(() => undefined);
    }
  }

  private scheduleRecheck(): void {
    if (this.recheckMs <= 0 || this.recheckTimer !== null) return;
    this.recheckTimer = setInterval(() => void this.recheckStreams(), this.recheckMs);
    this.recheckTimer.unref();
  }

  /** Looks every open stream's token up again; ends the streams whose token is gone. */
  private async recheckStreams(): Promise<void> {
    if (this.streams.size === 0) {
      if (this.recheckTimer !== null) clearInterval(this.recheckTimer);
      this.recheckTimer = null;
      return;
    }
    if (this.rechecking) return;
    this.rechecking = true;
    try {
      const digests = new Set<string>();
      const tokenIds = new Set<string>();
      for (const s of this.streams)
        if (s.owner.kind === "agent") digests.add(s.owner.digest);
        else tokenIds.add(s.owner.tokenId);
      for (const digest of digests) {
        let gone: boolean;
        try {
          gone = (await findClusterByTokenHash(this.store.db, digest)) === undefined;
        } catch {
          // The database being unreachable is no reason to cut agents off.
          continue;
        }
        if (!gone) continue;
        this.cache.delete(digest);
        for (const s of [...this.streams])
          if (s.owner.kind === "agent" && s.owner.digest === digest) s.end(revokedError("agent"));
      }
      if (tokenIds.size > 0) {
        let present: Set<string>;
        try {
          const ids = [...tokenIds];
          present = await userTokensPresent(
            this.store.db,
            ids.filter((id) => !isMemberSessionId(id)),
          );
          const sessions = ids.filter(isMemberSessionId);
          for (const id of await memberSessionsPresent(this.store.db, sessions, Date.now())) present.add(id);
        } catch {
          return;
        }
        // Revoked on another replica, or deleted with their workspace.
        for (const id of tokenIds) if (!present.has(id)) this.forgetUserToken(id);
      }
    } finally {
      this.rechecking = false;
    }
  }
}
