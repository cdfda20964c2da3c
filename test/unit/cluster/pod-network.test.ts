// The local cluster's pod networks: one /16 per cluster, split into one pod CIDR per node, served
// on this machine at the same offset in 127.S.0.0/16, claimed through lock files so clusters
// running at once never share one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  claimPodNetwork,
  FIRST_SLOT,
  LAST_SLOT,
  localAddress,
  nodePodCidrs,
  podAddressMap,
  podNetworkForSlot,
  podNetworkLockFile,
  releasePodNetwork,
  tryClaimSlot,
} from "../../../src/cluster/pod-network.js";
import { DEFAULT_NODE_PLAN, nodeCount, renderNodes } from "../../../src/cluster/topology.js";
import { cidrContains, parseCidr } from "../../../src/contracts/address-map.js";

test("node pod CIDRs are disjoint, inside the cluster's /16, and at least /24", () => {
  const net = podNetworkForSlot(150);
  for (const n of [1, 2, 3, 12, 16, 100, 256]) {
    const cidrs = nodePodCidrs(net, n).map(parseCidr);
    assert.equal(cidrs.length, n);
    const outer = parseCidr(net.cidr);
    const sizes = new Set(cidrs.map((c) => c.prefix));
    assert.equal(sizes.size, 1);
    const prefix = cidrs[0]?.prefix ?? 0;
    assert.ok(prefix <= 24);
    for (const c of cidrs)
      assert.ok(
        cidrContains(outer, `${c.base >>> 24}.${(c.base >>> 16) & 255}.${(c.base >>> 8) & 255}.${c.base & 255}`),
      );
    const bases = cidrs.map((c) => c.base).sort((a, b) => a - b);
    for (let i = 1; i < bases.length; i++)
      assert.ok((bases[i] ?? 0) - (bases[i - 1] ?? 0) >= 2 ** (32 - prefix), "disjoint");
  }
  assert.throws(() => nodePodCidrs(net, 257), /do not fit/);
});

test("pod IPs map to 127.S at the same offset; the sentinel's map says so", () => {
  const net = podNetworkForSlot(200);
  assert.deepEqual(net, { slot: 200, cidr: "10.200.0.0/16", localCidr: "127.200.0.0/16" });
  assert.equal(localAddress(net, "10.200.3.4"), "127.200.3.4");
  assert.equal(podAddressMap(net), "10.200.0.0/16=127.200.0.0/16");
  assert.throws(() => podNetworkForSlot(FIRST_SLOT - 1));
  assert.throws(() => podNetworkForSlot(LAST_SLOT + 1));
});

test("rendered nodes carry their pod CIDR when given", () => {
  const net = podNetworkForSlot(160);
  const cidrs = nodePodCidrs(net, nodeCount(DEFAULT_NODE_PLAN));
  const nodes = renderNodes(DEFAULT_NODE_PLAN, cidrs);
  assert.deepEqual(
    nodes.map((n) => n.spec.podCIDR),
    cidrs,
  );
  assert.deepEqual(
    nodes.map((n) => n.spec.podCIDRs?.[0]),
    cidrs,
  );
  assert.ok(
    nodes.filter((n) => n.metadata.labels["node-class"] !== "general").every((n) => n.spec.taints?.length === 1),
    "taints are kept",
  );
  assert.equal(
    renderNodes(DEFAULT_NODE_PLAN).some((n) => n.spec.podCIDR !== undefined),
    false,
  );
});

test("clusters claim distinct networks; a claim is released, re-owned by its own directory, or taken over when stale", async () => {
  const base = await mkdtemp(join(tmpdir(), "krane-podnet-test-"));
  const dirs = await Promise.all(
    Array.from({ length: 8 }, async (_, i) => {
      const d = join(base, `c${i}`);
      await writeFile(d, "");
      return d;
    }),
  );
  const nets = await Promise.all(dirs.map((d) => claimPodNetwork(d)));
  try {
    assert.equal(new Set(nets.map((n) => n.slot)).size, 8, "8 clusters at once, 8 networks");
    for (const [i, n] of nets.entries()) assert.equal(await readFile(podNetworkLockFile(n), "utf8"), dirs[i]);
    // The same cluster directory (a detached cluster started again) gets its own network back.
    const again = await claimPodNetwork(dirs[0] as string);
    assert.equal(again.slot, nets[0]?.slot);
    // A lock whose cluster directory is gone is stale once it is over a minute old.
    const net1 = nets[1] as ReturnType<typeof podNetworkForSlot>;
    const lock = podNetworkLockFile(net1);
    await rm(dirs[1] as string);
    assert.equal(await tryClaimSlot(net1.slot, dirs[3] as string), false, "a fresh lock is never taken over");
    const old = new Date(Date.now() - 120_000);
    await utimes(lock, old, old);
    assert.equal(await tryClaimSlot(net1.slot, dirs[3] as string), true, "a stale one is");
    assert.equal(await readFile(lock, "utf8"), dirs[3]);
    assert.equal(
      await tryClaimSlot((nets[4] as ReturnType<typeof podNetworkForSlot>).slot, dirs[3] as string),
      false,
      "a live one is not",
    );
    // Releasing by another directory does nothing; by the owner it frees the slot.
    await releasePodNetwork(nets[2] as ReturnType<typeof podNetworkForSlot>, "/not/the/owner");
    assert.equal(await readFile(podNetworkLockFile(nets[2] as ReturnType<typeof podNetworkForSlot>), "utf8"), dirs[2]);
  } finally {
    for (const [i, n] of nets.entries()) await releasePodNetwork(n, dirs[i] as string);
    await rm(podNetworkLockFile(nets[1] as ReturnType<typeof podNetworkForSlot>), { force: true });
    await rm(base, { recursive: true, force: true });
  }
});
