// ApiKeyService: an environment's API keys (create, list, revoke). The key is in CreateApiKey's
// answer only; ctrl keeps its SHA-256 (../domain/api-keys.ts).
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { ApiKeySchema, type ApiKey, type ApiKeyService } from "../../gen/krane/ctrl/v1/keys_pb.js";
import { callerUser } from "../auth/principal.js";
import type { ApiKeyRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { createApiKey, listApiKeys, revokeApiKey } from "../domain/api-keys.js";
import { validateEnvironmentRef } from "../validate/api.js";
import { validateCreateApiKey, validateRevokeApiKey } from "../validate/api-keys.js";

const big = (v: number | null): bigint => BigInt(v ?? 0);

export function apiKeyMsg(r: ApiKeyRow): ApiKey {
  return create(ApiKeySchema, {
    id: r.id,
    name: r.name,
    hint: r.hint,
    expiresAtUnixMs: big(r.expires_at),
    rateLimit: big(r.rate_limit),
    rateWindowSeconds: big(r.rate_window_seconds),
    metadata: JSON.parse(r.metadata) as Record<string, string>,
    createdBy: r.created_by,
    createdAtUnixMs: BigInt(r.created_at),
    revokedAtUnixMs: big(r.revoked_at),
  });
}

export function apiKeyServiceImpl(d: { store: Store }): ServiceImpl<typeof ApiKeyService> {
  return {
    async createApiKey(req, ctx) {
      const input = validateCreateApiKey(req, Date.now());
      const u = callerUser(ctx);
      const by = u.member?.email ?? u.serviceAccount?.name ?? u.name;
      const k = await createApiKey(d.store, input, by);
      return { key: apiKeyMsg(k.row), secret: k.secret, routingVersion: BigInt(k.routingVersion) };
    },
    async listApiKeys(req) {
      return { keys: (await listApiKeys(d.store.db, validateEnvironmentRef(req))).map(apiKeyMsg) };
    },
    async revokeApiKey(req) {
      const { ref, keyId } = validateRevokeApiKey(req);
      const r = await revokeApiKey(d.store, ref, keyId);
      return { key: apiKeyMsg(r.row), routingVersion: BigInt(r.routingVersion) };
    },
  };
}
