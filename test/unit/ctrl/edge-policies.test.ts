// An environment's edge policy list in ctrl (src/ctrl/domain/edge-policies.ts, api/edge-policies.ts):
// inserting, moving and removing by name, the request's policy checked with its field named, and
// the list carried to the agent and from it into the sentinel's document.
import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { parseEdgePolicies, type EdgePolicy } from "../../../src/contracts/edge-policy.js";
import { edgePolicyMsg, policyFromMsg } from "../../../src/ctrl/api/edge-policies.js";
import { movedPolicy, withoutPolicy, withPolicy } from "../../../src/ctrl/domain/edge-policies.js";
import { DomainError } from "../../../src/ctrl/errors.js";
import { EdgePolicySchema } from "../../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { edgePoliciesOf } from "../../../src/agent/sentinels/routing.js";

const [a, b, c] = parseEdgePolicies("p", [
  { name: "a", kind: "ip", deny: ["10.0.0.0/8"] },
  { name: "b", kind: "limits", methods: ["GET"] },
  { name: "c", kind: "limits", maxBodyBytes: 10 },
]) as [EdgePolicy, EdgePolicy, EdgePolicy];

const names = (l: EdgePolicy[]) => l.map((p) => p.name).join(",");

function code(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof DomainError, String(err));
    return `${err.code}${err.field ? ` ${err.field}` : ""}`;
  }
  assert.fail("no error");
}

test("add at a position (past the end: last), move and remove by name", () => {
  assert.equal(names(withPolicy([a, b], c, undefined)), "a,b,c");
  assert.equal(names(withPolicy([a, b], c, 0)), "c,a,b");
  assert.equal(names(withPolicy([a, b], c, 99)), "a,b,c");
  assert.equal(names(movedPolicy([a, b, c], "c", 0)), "c,a,b");
  assert.equal(names(movedPolicy([a, b, c], "a", 1)), "b,a,c");
  assert.equal(names(movedPolicy([a, b, c], "a", 9)), "b,c,a");
  assert.equal(names(withoutPolicy([a, b, c], "b")), "a,c");
  assert.equal(
    code(() => withPolicy([a], a, 0)),
    "already_exists",
  );
  assert.equal(
    code(() => movedPolicy([a], "x", 0)),
    "not_found",
  );
  assert.equal(
    code(() => withoutPolicy([a], "x")),
    "not_found",
  );
});

test("a request's policy round-trips, and a bad one names its field", () => {
  for (const p of [a, b, c]) assert.deepEqual(policyFromMsg(edgePolicyMsg(p)), p);
  const msg = (kind: ReturnType<typeof edgePolicyMsg>["kind"], name = "x") => create(EdgePolicySchema, { name, kind });
  assert.equal(
    code(() =>
      policyFromMsg(
        msg({ case: "ip", value: { allow: ["10.0.0.0/33"], deny: [], trustedProxies: [], clientHeader: "" } as never }),
      ),
    ),
    "invalid_argument policy.ip.allow[0]",
  );
  assert.equal(
    code(() =>
      policyFromMsg(
        msg({
          case: "ip",
          value: { allow: [], deny: ["0.0.0.0/0", "::/0"], trustedProxies: [], clientHeader: "" } as never,
        }),
      ),
    ),
    "invalid_argument policy",
  );
  assert.equal(
    code(() =>
      policyFromMsg(
        msg({
          case: "limits",
          value: { maxBodyBytes: -1n, maxHeaderBytes: 0n, methods: [], pathPrefixes: [] } as never,
        }),
      ),
    ),
    "invalid_argument policy.limits.max_body_bytes",
  );
  assert.equal(
    code(() =>
      policyFromMsg(
        msg({
          case: "limits",
          value: { maxBodyBytes: 0n, maxHeaderBytes: 0n, methods: [], pathPrefixes: ["/a/../b"] } as never,
        }),
      ),
    ),
    "invalid_argument policy.limits.path_prefixes[0]",
  );
  assert.equal(
    code(() => policyFromMsg(msg({ case: undefined }))),
    "invalid_argument policy.kind",
  );
  assert.equal(
    code(() => policyFromMsg(msg({ case: "limits", value: { methods: ["GET"] } as never }, "Bad Name"))),
    "invalid_argument policy.name",
  );
  assert.equal(
    code(() => policyFromMsg(undefined)),
    "invalid_argument policy",
  );
});

test("the agent reads the carried list, and refuses one it cannot read", () => {
  assert.equal(edgePoliciesOf(""), undefined);
  assert.equal(edgePoliciesOf("[]"), undefined);
  assert.deepEqual(edgePoliciesOf(JSON.stringify([a, b])), [a, b]);
  assert.throws(() => edgePoliciesOf(JSON.stringify([{ name: "x", kind: "waf" }])), /routing\.policies\[0\]\.kind/);
});

test("a rate limit round-trips; a zero, negative or huge limit and an unknown key name their field", () => {
  const [r] = parseEdgePolicies("p", [
    { name: "r", kind: "ratelimit", key: "address", limit: 100, windowSeconds: 60, trustedProxies: ["10.0.0.0/8"] },
  ]) as [EdgePolicy];
  assert.deepEqual(policyFromMsg(edgePolicyMsg(r)), r);
  const rl = (value: Record<string, unknown>) =>
    code(() =>
      policyFromMsg(
        create(EdgePolicySchema, {
          name: "r",
          kind: {
            case: "rateLimit",
            value: {
              key: "address",
              header: "",
              limit: 10n,
              windowSeconds: 60n,
              trustedProxies: [],
              clientHeader: "",
              ...value,
            } as never,
          },
        }),
      ),
    );
  assert.equal(rl({ limit: 0n }), "invalid_argument policy.rate_limit.limit");
  assert.equal(rl({ limit: -5n }), "invalid_argument policy.rate_limit.limit");
  assert.equal(rl({ limit: 1n << 62n }), "invalid_argument policy.rate_limit.limit");
  assert.equal(rl({ windowSeconds: 0n }), "invalid_argument policy.rate_limit.window_seconds");
  assert.equal(rl({ key: "cookie" }), "invalid_argument policy.rate_limit.key");
  assert.equal(rl({ key: "header" }), "invalid_argument policy.rate_limit.header");
});
