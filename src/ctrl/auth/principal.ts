// Who is calling: the principal the Authenticator (./authenticator.ts) put on the call's
// context, and what handlers ask of it — the region an agent call acts on — plus the interface
// through which handlers report revoked credentials. Handlers import this, never the
// Authenticator.
import { Code, ConnectError, createContextKey, type HandlerContext } from "@connectrpc/connect";
import type { RoleName } from "../../contracts/roles.js";
/** The workspace a user token is bound to (by id; the slug as it was when the token was looked up). */
export interface ScopeWorkspace {
  id: string;
  slug: string;
}

/** The workspace member a call acts for. */
export interface MemberRef {
  id: string;
  email: string;
  /** The provider's "<issuer>#<sub>" ("" until the member's first sign-in). */
  subject: string;
}

export type Principal =
  | { kind: "agent"; clusterId: string; region: string }
  | {
      kind: "user";
      tokenId: string;
      name: string;
      /** null: an installation token, which reaches every workspace and the installation itself. */
      workspace: ScopeWorkspace | null;
      /** What it may do in its workspace (its owner's role, as it is now); absent: an installation token. */
      role?: RoleName;
      /** The member whose token it is. */
      member?: MemberRef;
      /** The service account whose token it is. */
      serviceAccount?: { id: string; name: string };
    };

export type UserPrincipal = Principal & { kind: "user" };

export const principalKey = createContextKey<Principal | undefined>(undefined);

/**
 * The secret that keys what ctrl hands a caller to give back (page tokens, sealed idempotent
 * answers): its bearer token, or its session's id for the dashboard. ctrl stores neither.
 */
export const callerSecretKey = createContextKey("", { description: "krane: the caller's secret" });

/**
 * Set when a workspace token's call was refused for reaching outside its workspace (../audit
 * records every such refusal, reads included).
 */
export const scopeRefusalKey = createContextKey(false, { description: "krane: refused by the token's scope" });

/** Whose objects a user call may reach: "installation" (all), or one workspace's. */
export type CallerScope = "installation" | { workspaceId: string; slug: string };

/**
 * The scope of the user a handler serves. The methods whose rule is "caller" (./scope.ts) answer
 * from it: they list or change only what the caller's scope holds.
 */
export function callerScope(ctx: Pick<HandlerContext, "values">): CallerScope {
  const p = ctx.values.get(principalKey);
  if (!p || p.kind !== "user") throw new ConnectError("a user API token is required", Code.PermissionDenied);
  return p.workspace === null ? "installation" : { workspaceId: p.workspace.id, slug: p.workspace.slug };
}

/** The user a handler serves (its token or session, scope, role and owner). */
export function callerUser(ctx: Pick<HandlerContext, "values">): UserPrincipal {
  const p = ctx.values.get(principalKey);
  if (!p || p.kind !== "user") throw new ConnectError("a user API token is required", Code.PermissionDenied);
  return p;
}

/** What the API handlers call after revoking a credential (implemented by Authenticator). */
export interface RevocationListener {
  forgetUserToken(tokenId: string): void;
  /** Ends everything authenticated as the cluster, except with the token whose digest is `keepDigest`. */
  forgetCluster(clusterId: string, keepDigest?: string): void;
}

/** The region an agent call acts on: the request's, which must be the token's (empty = the token's). */
export function agentRegion(ctx: HandlerContext, requested: string): string {
  const p = ctx.values.get(principalKey);
  if (!p || p.kind !== "agent") throw new ConnectError("agent token required", Code.PermissionDenied);
  if (requested !== "" && requested !== p.region) {
    throw new ConnectError(
      `this token is bound to region "${p.region}", not "${requested.slice(0, 64)}"`,
      Code.PermissionDenied,
    );
  }
  return p.region;
}

export function agentPrincipal(ctx: HandlerContext): { clusterId: string; region: string } {
  const p = ctx.values.get(principalKey);
  if (!p || p.kind !== "agent") throw new ConnectError("agent token required", Code.PermissionDenied);
  return p;
}
