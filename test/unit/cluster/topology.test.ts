// Sizing a local cluster for a number of pods (planForPods): the untrusted pool must admit them
// all by every resource the scheduler checks, and no node may admit more pods than its pod CIDR
// can address (KWOK would hand out addresses from the neighbour's range).
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { nodePodCidrSize } from "../../../src/cluster/pod-network.js";
import {
  DEFAULT_NODE_CAPACITY,
  DEFAULT_NODE_PLAN,
  nodeCount,
  planForPods,
  renderNodes,
  ZONES,
} from "../../../src/cluster/topology.js";

function quantityMilli(q: string): number {
  const m = /^(\d+)(m|Gi|Mi)?$/.exec(q);
  if (!m) throw new Error(`unexpected quantity ${q}`);
  const n = Number(m[1]);
  return m[2] === "m" ? n : m[2] === "Gi" ? n * 1024 : m[2] === "Mi" ? n : n * 1000;
}

test("a small plan is the default plan", () => {
  const plan = planForPods(100, { cpuMillicores: 50, memoryMib: 32 });
  assert.equal(plan.untrusted, DEFAULT_NODE_PLAN.untrusted);
  assert.deepEqual(plan.capacity?.untrusted, DEFAULT_NODE_CAPACITY);
  const untrusted = renderNodes(plan).filter((n) => n.metadata.labels["node-class"] === "untrusted");
  assert.equal(untrusted[0]?.status.allocatable.cpu, "32");
  assert.equal(untrusted[0]?.status.allocatable.memory, "128Gi");
  assert.equal(untrusted[0]?.status.allocatable.pods, "1000");
});

test("20,000 pods of 50m/32Mi fit the untrusted pool; only that pool changes", () => {
  const plan = planForPods(20_000, { cpuMillicores: 50, memoryMib: 32 });
  const nodes = renderNodes(plan);
  const untrusted = nodes.filter((n) => n.metadata.labels["node-class"] === "untrusted");
  let fits = 0;
  for (const n of untrusted) {
    const a = n.status.allocatable;
    fits += Math.min(
      Number(a.pods),
      Math.floor(quantityMilli(a.cpu ?? "0") / 50),
      Math.floor(quantityMilli(a.memory ?? "0") / 32),
    );
  }
  assert.ok(fits >= 20_000, `the untrusted pool admits ${fits} pods`);
  for (const n of nodes.filter((x) => x.metadata.labels["node-class"] !== "untrusted")) {
    assert.equal(n.status.allocatable.cpu, String(DEFAULT_NODE_CAPACITY.cpu), "other pools keep their capacity");
  }
});

test("planned nodes never admit more pods than their pod CIDR addresses, and always fit the pods", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 50_000 }),
      fc.integer({ min: 1, max: 4000 }),
      fc.integer({ min: 1, max: 8192 }),
      (pods, cpu, mem) => {
        const plan = planForPods(pods, { cpuMillicores: cpu, memoryMib: mem });
        const cap = plan.capacity?.untrusted ?? DEFAULT_NODE_CAPACITY;
        const perNodeAddresses = nodePodCidrSize(nodeCount(plan));
        assert.ok(cap.pods < perNodeAddresses, `${cap.pods} pods on a node with ${perNodeAddresses} addresses`);
        const nodes = plan.untrusted * ZONES.length;
        const perNode = Math.min(cap.pods, Math.floor((cap.cpu * 1000) / cpu), Math.floor((cap.memoryGi * 1024) / mem));
        assert.ok(perNode * nodes >= pods, `${nodes} nodes × ${perNode} pods < ${pods}`);
        assert.ok(
          plan.untrusted >= DEFAULT_NODE_PLAN.untrusted &&
            plan.sentinel === DEFAULT_NODE_PLAN.sentinel &&
            plan.general === DEFAULT_NODE_PLAN.general,
        );
      },
    ),
    { numRuns: 300 },
  );
});

test("more pods than one /16 can address are refused", () => {
  assert.throws(() => planForPods(70_000, { cpuMillicores: 50, memoryMib: 32 }), /do not fit/);
  assert.throws(() => planForPods(-1, { cpuMillicores: 50, memoryMib: 32 }), /non-negative/);
});
