// Sign-in through the installation's OpenID provider (`ctrl serve --oidc-issuer`): the
// authorization code flow with PKCE, ctrl being the provider's client. Whoever starts a sign-in
// (the CLI's loopback redirect, the dashboard) gets from `begin` the provider's URL to send the
// person to; the provider sends them back to the redirect URI with a code and the state, and
// `complete` takes that URL: it takes the sign-in the state names (good once, ../domain/
// member-sessions.ts), redeems the code with the PKCE verifier and checks the ID token with
// openid-client (issuer, audience, expiry, nonce) and its signature with jose against the
// provider's published keys (fetched again when an unknown key id appears, so keys the provider
// rotates in are found). Any failure refuses the sign-in; nothing is half-made.
//
// Then the person is a member: the one their subject names in the workspace asked for, or the
// invitation their verified address accepts, or (with --oidc-group-role) one their groups give a
// role; their sign-in is recorded and a session made (../domain/member-sessions.ts).
import * as client from "openid-client";
import { createRemoteJWKSet, jwtVerify } from "jose";
import type { Store } from "../db/store.js";
import {
  DEFAULT_SESSION_LIFETIMES,
  insertMemberSession,
  refreshMemberSession,
  saveLogin,
  takeLogin,
  type SessionLifetimes,
  type SessionTokens,
} from "../domain/member-sessions.js";
import {
  insertGroupMember,
  membersOfIdentity,
  recordSignIn,
  type MemberRecord,
  type SignInIdentity,
} from "../domain/members.js";
import { findWorkspace } from "../domain/tenancy.js";
import { DomainError, invalidArgument } from "../errors.js";
import { groupRoleIn, type GroupRole } from "./oidc-rules.js";

export interface OidcSettings {
  issuer: string;
  clientId: string;
  /** Absent: a public client (PKCE only). */
  clientSecret?: string;
  groupRoles?: readonly GroupRole[];
  lifetimes?: SessionLifetimes;
  /** Least time between two fetches of the provider's keys for an unknown key id (ms; default 10 s). */
  jwksCooldownMs?: number;
}

/** A sign-in the provider's answer did not hold up for: unauthenticated, nothing made. */
export class SignInRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SignInRefused";
  }
}

/** The provider could not be reached or answered nonsense at discovery: unavailable. */
export class ProviderUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProviderUnavailable";
  }
}

function isLoopbackHttp(u: URL): boolean {
  return u.protocol === "http:" && (u.hostname === "127.0.0.1" || u.hostname === "[::1]" || u.hostname === "localhost");
}

function stringClaim(v: unknown): string {
  return typeof v === "string" ? v : "";
}

/** An openid-client or jose failure in a line, with what openid-client wraps (which names the claim). */
function whatFailed(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  return err.cause instanceof Error && err.cause.message !== err.message
    ? `${err.message}: ${err.cause.message}`
    : err.message;
}

export interface SignedIn {
  tokens: SessionTokens;
  member: MemberRecord;
  workspace: { id: string; slug: string };
}

export class OidcSignIn {
  private discovered: Promise<{ config: client.Configuration; jwks: ReturnType<typeof createRemoteJWKSet> }> | null =
    null;
  readonly lifetimes: SessionLifetimes;

  constructor(
    private readonly store: Store,
    readonly settings: OidcSettings,
  ) {
    this.lifetimes = settings.lifetimes ?? DEFAULT_SESSION_LIFETIMES;
  }

  /** The provider's configuration, discovered once (again after a failed discovery). */
  private provider() {
    this.discovered ??= this.discover().catch((err: unknown) => {
      this.discovered = null;
      throw err;
    });
    return this.discovered;
  }

  private async discover() {
    const issuer = new URL(this.settings.issuer);
    const insecure = isLoopbackHttp(issuer);
    let config: client.Configuration;
    try {
      config = await client.discovery(
        issuer,
        this.settings.clientId,
        undefined,
        this.settings.clientSecret === undefined ? client.None() : client.ClientSecretBasic(this.settings.clientSecret),
        insecure ? { execute: [client.allowInsecureRequests], timeout: 10 } : { timeout: 10 },
      );
    } catch (err) {
      throw new ProviderUnavailable(
        `the OpenID provider ${issuer.href} did not answer its discovery: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    const jwksUri = config.serverMetadata().jwks_uri;
    if (jwksUri === undefined)
      throw new ProviderUnavailable(`the OpenID provider ${issuer.href} publishes no jwks_uri`);
    const jwks = createRemoteJWKSet(new URL(jwksUri), {
      cooldownDuration: this.settings.jwksCooldownMs ?? 10_000,
      timeoutDuration: 10_000,
    });
    return { config, jwks };
  }

  /** Starts a sign-in: the provider's URL to send the person to. */
  async begin(input: { redirectUri: string; workspace: string }): Promise<{ authorizationUrl: string; state: string }> {
    const { config } = await this.provider();
    const state = client.randomState();
    const nonce = client.randomNonce();
    const codeVerifier = client.randomPKCECodeVerifier();
    await saveLogin(this.store, state, {
      nonce,
      codeVerifier,
      redirectUri: input.redirectUri,
      workspace: input.workspace,
    });
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: input.redirectUri,
      scope: "openid email profile",
      state,
      nonce,
      code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: "S256",
    });
    return { authorizationUrl: url.href, state };
  }

  /**
   * Finishes a sign-in from the URL the provider sent the person back to (with its code and
   * state): a session of the member they are.
   */
  async complete(callbackUrl: string, clientKind: "cli" | "dashboard", ip = ""): Promise<SignedIn> {
    let callback: URL;
    try {
      callback = new URL(callbackUrl);
    } catch {
      throw invalidArgument("callback_url", "not a URL");
    }
    const state = callback.searchParams.get("state");
    if (state === null || state === "" || state.length > 512)
      throw invalidArgument("callback_url", "has no state: not the provider's answer");
    const error = callback.searchParams.get("error");
    // Taken first, whatever follows: a state is good once.
    const pending = await takeLogin(this.store, state);
    if (!pending) throw new SignInRefused("this sign-in is unknown, already used or expired: sign in again");
    if (error !== null)
      throw new SignInRefused(
        `the provider refused the sign-in: ${error.slice(0, 100)} ${(callback.searchParams.get("error_description") ?? "").slice(0, 200)}`.trim(),
      );
    if (
      `${callback.origin}${callback.pathname}` !== pending.redirectUri.replace(/\/$/, "") &&
      `${callback.origin}${callback.pathname}` !== pending.redirectUri
    )
      throw new SignInRefused("the answer came back to another redirect URI than the sign-in's");
    const { config, jwks } = await this.provider();
    let who: SignInIdentity;
    let groups: string[];
    try {
      const tokens = await client.authorizationCodeGrant(
        config,
        callback,
        {
          pkceCodeVerifier: pending.codeVerifier,
          expectedState: state,
          expectedNonce: pending.nonce,
          idTokenExpected: true,
        },
        { redirect_uri: pending.redirectUri },
      );
      const idToken = tokens.id_token;
      if (idToken === undefined) throw new SignInRefused("the provider answered no ID token");
      // openid-client checked issuer, audience, expiry and nonce; the signature, against the
      // provider's published keys:
      const issuer = config.serverMetadata().issuer;
      const { payload } = await jwtVerify(idToken, jwks, { issuer, audience: this.settings.clientId });
      const sub = stringClaim(payload.sub);
      if (sub === "") throw new SignInRefused("the ID token names no subject");
      let claims: Record<string, unknown> = payload;
      if (stringClaim(claims.email) === "")
        claims = { ...(await client.fetchUserInfo(config, tokens.access_token, sub)), ...payload };
      who = {
        subject: `${issuer}#${sub}`,
        email: stringClaim(claims.email).trim().toLowerCase(),
        emailVerified: claims.email_verified === true,
        name: stringClaim(claims.name),
      };
      groups = Array.isArray(claims.groups) ? claims.groups.filter((g): g is string => typeof g === "string") : [];
    } catch (err) {
      if (err instanceof SignInRefused) throw err;
      throw new SignInRefused(`the provider's answer does not hold: ${whatFailed(err)}`);
    }
    return this.sessionFor(who, groups, pending.workspace, clientKind, ip);
  }

  private async sessionFor(
    who: SignInIdentity,
    groups: string[],
    workspaceSlug: string,
    clientKind: "cli" | "dashboard",
    ip: string,
  ): Promise<SignedIn> {
    const map = this.settings.groupRoles ?? [];
    return this.store.write(async (tx) => {
      const rows = await membersOfIdentity(tx.trx, who);
      let ws: { id: string; slug: string };
      let row = undefined as (typeof rows)[number] | undefined;
      if (workspaceSlug !== "") {
        const w = await findWorkspace(tx.trx, workspaceSlug).catch(() => undefined);
        if (!w)
          throw new DomainError(
            "permission_denied",
            `${who.email || "you"}: no member of workspace "${workspaceSlug}"`,
          );
        ws = { id: w.id, slug: w.slug };
        row = rows.find((r) => r.workspace_id === w.id);
      } else {
        if (rows.length > 1)
          throw new DomainError(
            "failed_precondition",
            "you are a member of several workspaces: name one (--workspace)",
          );
        row = rows[0];
        if (!row)
          throw new DomainError(
            "permission_denied",
            `${who.email || who.subject}: no member of any workspace${who.email !== "" && !who.emailVerified ? " (the provider does not vouch for this address, so no invitation is accepted with it)" : ""}`,
          );
        const w = await findWorkspace(tx.trx, row.workspace_id);
        ws = { id: w.id, slug: w.slug };
      }
      const groupRole = groupRoleIn(groups, ws.slug, map);
      let member: MemberRecord;
      if (row) member = await recordSignIn(tx, row, who, groupRole);
      else if (groupRole !== null && who.email !== "") member = await insertGroupMember(tx, ws.id, who, groupRole);
      else
        throw new DomainError(
          "permission_denied",
          `${who.email || who.subject}: no member of workspace "${ws.slug}"${who.email !== "" && !who.emailVerified ? " (the provider does not vouch for this address)" : ": ask an admin to invite you"}`,
        );
      if (member.role === null)
        throw new DomainError("permission_denied", `${member.email}: no role in workspace "${ws.slug}"`);
      const tokens = await insertMemberSession(tx, member, clientKind, this.lifetimes, ip);
      return { tokens, member, workspace: ws };
    });
  }

  /** A new access and refresh token for a session's refresh token; undefined: the session is over. */
  refresh(refreshToken: string, ip = ""): Promise<SessionTokens | undefined> {
    return refreshMemberSession(this.store, refreshToken, this.lifetimes.accessMs, ip);
  }
}
