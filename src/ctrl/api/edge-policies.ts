// PolicyService: an environment's ordered edge policies (add at a position, list, remove, move).
// A policy arrives as a typed message, is checked by the same parser the agent and the sentinel
// use (src/contracts/edge-policy.ts), and a problem names the request's field
// ("policy.ip.allow[0]"); nothing is stored then.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { describeEdgePolicy, parseEdgePolicy, PolicyFieldError, type EdgePolicy } from "../../contracts/edge-policy.js";
import {
  EdgePolicySchema,
  type EdgePolicy as EdgePolicyMsg,
  type PolicyService,
} from "../../gen/krane/ctrl/v1/exposure_pb.js";
import type { Store } from "../db/store.js";
import {
  changePolicies,
  listPolicies,
  movedPolicy,
  withoutPolicy,
  withPolicy,
  type PolicyList,
} from "../domain/edge-policies.js";
import { invalidArgument } from "../errors.js";
import { validateEnvironmentRef } from "../validate/api.js";

export function edgePolicyMsg(p: EdgePolicy): EdgePolicyMsg {
  return create(EdgePolicySchema, {
    name: p.name,
    summary: describeEdgePolicy(p),
    kind:
      p.kind === "apikey"
        ? { case: "apiKey", value: { header: p.header, forwardHeader: p.forwardHeader } }
        : p.kind === "ratelimit"
          ? {
              case: "rateLimit",
              value: {
                key: p.key,
                header: p.header,
                limit: BigInt(p.limit),
                windowSeconds: BigInt(p.windowSeconds),
                trustedProxies: [...p.trustedProxies],
                clientHeader: p.clientHeader,
              },
            }
          : p.kind === "ip"
            ? {
                case: "ip",
                value: {
                  allow: [...p.allow],
                  deny: [...p.deny],
                  trustedProxies: [...p.trustedProxies],
                  clientHeader: p.clientHeader,
                },
              }
            : {
                case: "limits",
                value: {
                  maxBodyBytes: BigInt(p.maxBodyBytes ?? 0),
                  maxHeaderBytes: BigInt(p.maxHeaderBytes ?? 0),
                  methods: [...p.methods],
                  pathPrefixes: [...p.pathPrefixes],
                },
              },
  });
}

const snake = (s: string): string => s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

function bytes(v: bigint): number | null {
  return v === 0n ? null : v > BigInt(Number.MAX_SAFE_INTEGER) || v < 0n ? -1 : Number(v);
}

/** A required count: out of a safe integer's range, a value the parser refuses. */
function count(v: bigint): number {
  return v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER) ? -1 : Number(v);
}

/** The request's policy, checked; a problem names its field in the request. */
export function policyFromMsg(m: EdgePolicyMsg | undefined): EdgePolicy {
  if (m === undefined) throw invalidArgument("policy", "is required");
  const k = m.kind;
  const raw: Record<string, unknown> =
    k.case === "ip"
      ? {
          name: m.name,
          kind: "ip",
          allow: k.value.allow,
          deny: k.value.deny,
          trustedProxies: k.value.trustedProxies,
          clientHeader: k.value.clientHeader,
        }
      : k.case === "limits"
        ? {
            name: m.name,
            kind: "limits",
            maxBodyBytes: bytes(k.value.maxBodyBytes),
            maxHeaderBytes: bytes(k.value.maxHeaderBytes),
            methods: k.value.methods,
            pathPrefixes: k.value.pathPrefixes,
          }
        : k.case === "rateLimit"
          ? {
              name: m.name,
              kind: "ratelimit",
              key: k.value.key,
              header: k.value.header,
              limit: count(k.value.limit),
              windowSeconds: count(k.value.windowSeconds),
              trustedProxies: k.value.trustedProxies,
              clientHeader: k.value.clientHeader,
            }
          : k.case === "apiKey"
            ? { name: m.name, kind: "apikey", header: k.value.header, forwardHeader: k.value.forwardHeader }
            : { name: m.name, kind: undefined };
  try {
    return parseEdgePolicy("policy", raw);
  } catch (err) {
    if (!(err instanceof PolicyFieldError)) throw err;
    const field =
      k.case === undefined || err.field === "policy.name" || err.field === "policy"
        ? err.field
        : snake(err.field.replace(/^policy\./, `policy.${k.case}.`));
    throw invalidArgument(field, err.problem);
  }
}

function listMsg(l: PolicyList): { policies: EdgePolicyMsg[]; routingVersion: bigint } {
  return { policies: l.policies.map(edgePolicyMsg), routingVersion: BigInt(l.routingVersion) };
}

function policyName(v: string): string {
  if (v === "") throw invalidArgument("name", "is required");
  return v;
}

export function policyServiceImpl({ store }: { store: Store }): ServiceImpl<typeof PolicyService> {
  return {
    async addPolicy(req) {
      const ref = validateEnvironmentRef(req);
      const p = policyFromMsg(req.policy);
      return listMsg(await changePolicies(store, ref, (list) => withPolicy(list, p, req.position)));
    },
    async listPolicies(req) {
      return listMsg(await listPolicies(store.db, validateEnvironmentRef(req)));
    },
    async removePolicy(req) {
      const ref = validateEnvironmentRef(req);
      const name = policyName(req.name);
      return listMsg(await changePolicies(store, ref, (list) => withoutPolicy(list, name)));
    },
    async movePolicy(req) {
      const ref = validateEnvironmentRef(req);
      const name = policyName(req.name);
      return listMsg(await changePolicies(store, ref, (list) => movedPolicy(list, name, req.position)));
    },
  };
}
