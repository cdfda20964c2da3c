// Routing table building (src/sentinel/table.ts) and the pod address map (address-map.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { LABEL_DEPLOYMENT_ID } from "../../../src/contracts/labels.js";
import {
  defaultRoutingPolicy,
  formatRoutingPolicy,
  POLICY_KEY,
  type RoutingPolicy,
} from "../../../src/contracts/routing.js";
import type { KubeObject } from "../../../src/kube/object.js";
import {
  cidrContains,
  formatAddressMapping,
  intToIpv4,
  ipv4ToInt,
  mapAddress,
  parseAddressMapping,
  parseCidr,
} from "../../../src/contracts/address-map.js";
import { buildTable, endpointCount, promote, readPolicy, startingKeys } from "../../../src/sentinel/table.js";
import { warmCandidates } from "../../../src/sentinel/warm.js";

function slice(
  name: string,
  deploymentId: string | undefined,
  endpoints: unknown[],
  extra: Record<string, unknown> = {},
): KubeObject {
  return {
    metadata: { name, namespace: "sentinel", labels: deploymentId ? { [LABEL_DEPLOYMENT_ID]: deploymentId } : {} },
    addressType: "IPv4",
    ports: [{ name: "http", port: 8080, protocol: "TCP" }],
    endpoints,
    ...extra,
  };
}

const ep = (ip: string, ready?: boolean, pod?: string) => ({
  addresses: [ip],
  ...(ready === undefined ? {} : { conditions: { ready } }),
  ...(pod ? { targetRef: { kind: "Pod", name: pod, namespace: "ws" } } : {}),
});

const policy = (p: Partial<RoutingPolicy> = {}): RoutingPolicy => ({
  version: 4,
  environmentId: "env_a",
  mode: "instances",
  revisions: [],
  ...p,
});

test("slices become revisions; unready endpoints and bad entries are skipped with a problem", () => {
  const { table, problems } = buildTable(
    [
      slice("a-1", "dep_a", [ep("10.1.0.1", true, "a-1"), ep("10.1.0.2", false), ep("10.1.0.3")]),
      slice("a-2", "dep_a", [ep("10.1.0.4", true), ep("10.1.0.1", true)]),
      slice("b", "dep_b", [ep("not-an-ip", true), ep("10.1.1.1", true)]),
      slice("nolabel", undefined, [ep("10.9.9.9", true)]),
      slice("fqdn", "dep_c", [ep("10.9.9.8", true)], { addressType: "FQDN" }),
      slice("noport", "dep_c", [ep("10.9.9.7", true)], {
        ports: [
          { name: "grpc", port: 9 },
          { name: "metrics", port: 10 },
        ],
      }),
      slice("dup", "dep_d", [ep("10.1.1.1", true)]),
      // What the agent writes for a revision with no routable pod: no endpoints, no port.
      slice("empty", "dep_e", [], { ports: undefined, endpoints: null }),
    ],
    policy({
      mode: "weighted",
      revisions: [
        { deploymentId: "dep_a", weight: 90 },
        { deploymentId: "dep_z", weight: 10 },
      ],
    }),
  );
  assert.equal(table.version, 4);
  assert.equal(table.mode, "weighted");
  assert.deepEqual(
    table.revisions.map((r) => [r.deploymentId, r.weight, r.endpoints.map((e) => e.key)]),
    [
      ["dep_a", 90, ["10.1.0.1:8080", "10.1.0.3:8080", "10.1.0.4:8080"]],
      ["dep_b", null, ["10.1.1.1:8080"]],
      ["dep_c", null, []],
      ["dep_d", null, []],
      ["dep_e", null, []],
      ["dep_z", 10, []],
    ],
  );
  assert.equal(table.revisions[0]?.endpoints[0]?.pod, "a-1");
  assert.equal(endpointCount(table), 4);
  assert.equal(problems.length, 5, problems.join("\n"));
  for (const word of ["not-an-ip", "label", "FQDN", "port", "10.1.1.1:8080"]) {
    assert.ok(
      problems.some((p) => p.includes(word)),
      `a problem mentions ${word}`,
    );
  }
});

test("not-ready endpoints are a revision's starting instances, with its readiness path; promote makes them routable", () => {
  const annotated = (name: string, dep: string, endpoints: unknown[], path: string): KubeObject => {
    const sl = slice(name, dep, endpoints);
    return { ...sl, metadata: { ...sl.metadata, annotations: { "krane.dev/readiness-path": path } } };
  };
  const terminating = { addresses: ["10.1.0.9"], conditions: { ready: false, terminating: true } };
  const { table, problems } = buildTable(
    [
      annotated("a", "dep_a", [ep("10.1.0.2", false, "a-2"), ep("10.1.0.1", false, "a-1"), terminating], "/healthz"),
      annotated("b", "dep_b", [ep("10.1.1.1", false)], "not a path"),
      slice("c", "dep_c", [ep("10.1.2.1", false)]),
    ],
    policy({
      mode: "weighted",
      revisions: [
        { deploymentId: "dep_a", weight: 100 },
        { deploymentId: "dep_c", weight: 0 },
      ],
    }),
  );
  assert.equal(endpointCount(table), 0, "nothing routable until promoted");
  const a = table.revisions.find((r) => r.deploymentId === "dep_a");
  assert.deepEqual(
    a?.starting?.map((e) => e.key),
    ["10.1.0.1:8080", "10.1.0.2:8080"],
    "sorted; a terminating endpoint is not starting",
  );
  assert.equal(a?.readinessPath, "/healthz");
  assert.equal(table.revisions.find((r) => r.deploymentId === "dep_b")?.readinessPath, undefined);
  assert.ok(
    problems.some((p) => p.includes("readiness-path")),
    problems.join("\n"),
  );
  assert.deepEqual([...startingKeys(table)].sort(), [
    "10.1.0.1:8080",
    "10.1.0.2:8080",
    "10.1.1.1:8080",
    "10.1.2.1:8080",
  ]);
  // Only a revision that names its path and may get traffic is probed (dep_c's weight is 0).
  assert.deepEqual(
    warmCandidates(table).map((c) => [c.endpoint.key, c.path]),
    [
      ["10.1.0.1:8080", "/healthz"],
      ["10.1.0.2:8080", "/healthz"],
    ],
  );
  const up = promote(table, new Set(["10.1.0.2:8080"]));
  const upA = up.revisions.find((r) => r.deploymentId === "dep_a");
  assert.deepEqual(
    upA?.endpoints.map((e) => e.key),
    ["10.1.0.2:8080"],
  );
  assert.deepEqual(
    upA?.starting?.map((e) => e.key),
    ["10.1.0.1:8080"],
  );
  assert.equal(endpointCount(up), 1);
  assert.equal(promote(table, new Set()), table, "nothing named: the same table");
  assert.equal(promote(table, new Set(["10.9.9.9:8080"])), table, "a key no longer starting: the same table");
});

test("the dial address is mapped through the pod address map; the identity stays the pod IP", () => {
  const map = parseAddressMapping("10.130.0.0/16=127.130.0.0/16");
  const { table } = buildTable([slice("a", "dep_a", [ep("10.130.3.7", true), ep("10.131.0.1", true)])], policy(), map);
  const eps = table.revisions[0]?.endpoints ?? [];
  assert.deepEqual(
    eps.map((e) => [e.key, e.dialHost]),
    [
      ["10.130.3.7:8080", "127.130.3.7"],
      ["10.131.0.1:8080", "10.131.0.1"],
    ],
  );
});

test("readPolicy takes the valid policy with the highest version and says why others were refused", () => {
  const cm = (name: string, data: Record<string, string>): KubeObject => ({
    metadata: { name, namespace: "sentinel" },
    data,
  });
  const good = (v: number) => formatRoutingPolicy(policy({ version: v }));
  const r = readPolicy(
    [
      cm("a", { [POLICY_KEY]: good(3) }),
      cm("b", { [POLICY_KEY]: good(9) }),
      cm("c", { [POLICY_KEY]: "{nope" }),
      cm("d", { other: "x" }),
      cm("e", { [POLICY_KEY]: formatRoutingPolicy(policy({ version: 99, environmentId: "env_other" })) }),
      cm("f", {
        [POLICY_KEY]: JSON.stringify({
          version: 100,
          environmentId: "env_a",
          mode: "weighted",
          revisions: [{ deploymentId: "x", weight: 50 }],
        }),
      }),
    ],
    "env_a",
  );
  assert.equal(r.policy?.version, 9);
  for (const word of ["sentinel/c", "sentinel/d", "env_other", "add up to 50"])
    assert.ok(r.error?.includes(word), `error mentions ${word}: ${r.error}`);
  assert.deepEqual(readPolicy([], "env_a"), { policy: undefined, error: undefined });
  assert.equal(defaultRoutingPolicy("env_a").mode, "instances");
});

test("CIDRs: parse, contain and map at the same offset", () => {
  assert.throws(() => parseCidr("10.0.0.1/16"), /host bits/);
  assert.throws(() => parseCidr("10.0.0.0/33"), /prefix/);
  assert.throws(() => parseCidr("nope"), /not an IPv4 CIDR/);
  assert.throws(() => parseAddressMapping("10.0.0.0/16=127.0.0.0/24"), /same prefix/);
  assert.throws(() => parseAddressMapping("10.0.0.0/16"), /FROM_CIDR=TO_CIDR/);
  const m = parseAddressMapping("10.200.0.0/16=127.200.0.0/16");
  assert.equal(formatAddressMapping(m), "10.200.0.0/16=127.200.0.0/16");
  assert.equal(mapAddress("10.200.255.254", m), "127.200.255.254");
  assert.equal(mapAddress("10.201.0.1", m), "10.201.0.1");
  assert.equal(mapAddress("fd00::1", m), "fd00::1");
  assert.equal(mapAddress("10.200.0.1", undefined), "10.200.0.1");
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 0xffffffff }),
      fc.integer({ min: 8, max: 30 }),
      fc.integer({ min: 0, max: 0xffffffff }),
      (a, prefix, b) => {
        const mask = (0xffffffff << (32 - prefix)) >>> 0;
        const from = { base: (a & mask) >>> 0, prefix };
        const to = { base: (b & mask) >>> 0, prefix };
        const ip = intToIpv4((from.base | (b & ~mask)) >>> 0);
        assert.equal(ipv4ToInt(ip), (from.base | (b & ~mask)) >>> 0);
        assert.ok(cidrContains(from, ip));
        const mapped = mapAddress(ip, { from, to });
        assert.ok(cidrContains(to, mapped));
        assert.equal((ipv4ToInt(mapped) & ~mask) >>> 0, (ipv4ToInt(ip) & ~mask) >>> 0, "same offset");
      },
    ),
  );
});

test("the routing contract's label values are valid Kubernetes label values", async () => {
  const { isLabelValue } = await import("../../../src/contracts/labels.js");
  const { ENDPOINTSLICE_MANAGED_BY, ROUTING_COMPONENT } = await import("../../../src/contracts/routing.js");
  assert.ok(isLabelValue(ENDPOINTSLICE_MANAGED_BY), ENDPOINTSLICE_MANAGED_BY);
  assert.ok(isLabelValue(ROUTING_COMPONENT));
});
