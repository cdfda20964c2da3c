// Authentication and authorization of every RPC.
//
// Callers send `Authorization: Bearer <token>`. Agent tokens (one per cluster, bound to its
// region) may call only ClusterService, and only for their own region; user API tokens may call
// only the public API. Tokens are looked up by their SHA-256 digest and the digests compared in
// constant time; lookups are cached briefly, so a rotated token stops working within cacheTtlMs.
import { Code, ConnectError, createContextKey, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { ClusterService } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { findClusterByTokenHash, findUserTokenByHash, hashToken } from "../store/clusters.js";
import type { Store } from "../store/store.js";

export type Principal =
  | { kind: "agent"; clusterId: string; region: string }
  | { kind: "user"; tokenId: string; name: string };

export const principalKey = createContextKey<Principal | undefined>(undefined);

export interface AuthOptions {
  cacheTtlMs?: number;
  cacheMax?: number;
}

export class Authenticator {
  private readonly cache = new Map<string, { principal: Principal; expires: number }>();
  private readonly ttl: number;
  private readonly max: number;

  constructor(
    private readonly store: Store,
    options: AuthOptions = {},
  ) {
    this.ttl = options.cacheTtlMs ?? 5000;
    this.max = options.cacheMax ?? 10_000;
  }

  async authenticate(authorization: string | null): Promise<Principal | undefined> {
    if (authorization === null) return undefined;
    const m = /^Bearer\s+(\S{1,512})\s*$/i.exec(authorization);
    if (!m || m[1] === undefined) return undefined;
    const digest = hashToken(m[1]);
    const now = Date.now();
    const hit = this.cache.get(digest);
    if (hit && hit.expires > now) return hit.principal;
    let principal: Principal | undefined;
    if (m[1].startsWith("krane_agent_")) {
      const c = await findClusterByTokenHash(this.store.db, digest);
      if (c) principal = { kind: "agent", clusterId: c.id, region: c.region };
    } else {
      const t = await findUserTokenByHash(this.store.db, digest);
      if (t) principal = { kind: "user", tokenId: t.id, name: t.name };
    }
    if (principal) {
      if (this.cache.size >= this.max) this.cache.clear();
      this.cache.set(digest, { principal, expires: now + this.ttl });
    }
    return principal;
  }

  interceptor(): Interceptor {
    return (next) => async (req) => {
      const principal = await this.authenticate(req.header.get("authorization"));
      if (!principal) throw new ConnectError("missing or invalid bearer token", Code.Unauthenticated);
      const forAgents = req.service.typeName === ClusterService.typeName;
      if (forAgents && principal.kind !== "agent") {
        throw new ConnectError("ClusterService needs an agent token", Code.PermissionDenied);
      }
      if (!forAgents && principal.kind !== "user") {
        throw new ConnectError("the public API needs a user API token", Code.PermissionDenied);
      }
      req.contextValues.set(principalKey, principal);
      return next(req);
    };
  }
}

/** The region an agent call acts on: the request's, which must be the token's (empty = the token's). */
export function agentRegion(ctx: HandlerContext, requested: string): string {
  const p = ctx.values.get(principalKey);
  if (!p || p.kind !== "agent") throw new ConnectError("agent token required", Code.PermissionDenied);
  if (requested !== "" && requested !== p.region) {
    throw new ConnectError(`this token is bound to region "${p.region}", not "${requested.slice(0, 64)}"`, Code.PermissionDenied);
  }
  return p.region;
}

export function agentPrincipal(ctx: HandlerContext): { clusterId: string; region: string } {
  const p = ctx.values.get(principalKey);
  if (!p || p.kind !== "agent") throw new ConnectError("agent token required", Code.PermissionDenied);
  return p;
}
