// The layout of a local cluster's real nodes (src/cluster/nodes/plan.ts) and their configuration
// files (config.ts): every cluster's ranges, names and cgroups are its own, the ranges never
// overlap each other or KWOK's, and the files say what the nodes need to run side by side.
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { parse } from "yaml";
import { MAX_REAL_NODES, parseRealNodePools, REAL_NODE_POOLS, realNodesPlan } from "../../../src/cluster/nodes/plan.js";
import {
  cniConfig,
  containerdConfig,
  registryHostsToml,
  kubeletConfig,
  kubeProxyConfig,
  nodeDirs,
  runscConfig,
} from "../../../src/cluster/nodes/config.js";
import { FIRST_SLOT, LAST_SLOT, nodePodCidrs, podNetworkForSlot } from "../../../src/cluster/pod-network.js";
import { cidrContains, parseCidr } from "../../../src/contracts/address-map.js";
import type { NodePool } from "../../../src/cluster/topology.js";

const ip = (n: number): string => `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
const range = (cidr: string): [number, number] => {
  const c = parseCidr(cidr);
  return [c.base >>> 0, (c.base >>> 0) + 2 ** (32 - c.prefix) - 1];
};
const overlap = (a: string, b: string): boolean => {
  const [a0, a1] = range(a);
  const [b0, b1] = range(b);
  return a0 <= b1 && b0 <= a1;
};

const pools = fc.array(fc.constantFrom<NodePool>(...REAL_NODE_POOLS), { minLength: 1, maxLength: MAX_REAL_NODES });
const slot = fc.integer({ min: FIRST_SLOT, max: LAST_SLOT });

test("real nodes' pod ranges, the Service range, the link and KWOK's half never overlap, all inside the cluster's /16", () => {
  fc.assert(
    fc.property(slot, pools, fc.integer({ min: 1, max: 48 }), (s, ps, kwokNodes) => {
      const plan = realNodesPlan(s, ps);
      const net = podNetworkForSlot(s);
      const outer = parseCidr(net.cidr);
      const link = plan.linkCidr;
      assert.ok(cidrContains(parseCidr(link), plan.hostIp) && cidrContains(parseCidr(link), plan.nodeIp));
      const ranges = [...plan.nodes.map((n) => n.podCidr), plan.serviceCidr, link, ...nodePodCidrs(net, kwokNodes, 17)];
      for (const r of ranges) assert.ok(cidrContains(outer, ip(parseCidr(r).base)), `${r} in ${net.cidr}`);
      for (let i = 0; i < ranges.length; i++)
        for (let j = i + 1; j < ranges.length; j++)
          assert.ok(!overlap(ranges[i] as string, ranges[j] as string), `${ranges[i]} and ${ranges[j]} overlap`);
      // What this machine routes into the namespace holds every real pod and Service, and no KWOK pod.
      for (const r of [...plan.nodes.map((n) => n.podCidr), plan.serviceCidr, plan.podCidr])
        assert.ok(cidrContains(parseCidr(plan.routed), ip(parseCidr(r).base)));
      assert.ok(!overlap(plan.routed, plan.kwokCidr));
      for (const n of plan.nodes) assert.ok(cidrContains(parseCidr(plan.podCidr), n.gateway));
    }),
  );
});

test("two clusters (two slots) share no name, range, interface or cgroup; one cluster's nodes share none either", () => {
  fc.assert(
    fc.property(slot, slot, pools, pools, (s1, s2, p1, p2) => {
      fc.pre(s1 !== s2);
      const a = realNodesPlan(s1, p1);
      const b = realNodesPlan(s2, p2);
      assert.notEqual(a.netns, b.netns);
      assert.notEqual(a.hostInterface, b.hostInterface);
      assert.ok(!overlap(a.routed, b.routed));
      assert.ok(!a.cgroupPrefix.startsWith(b.cgroupPrefix) && !b.cgroupPrefix.startsWith(a.cgroupPrefix));
      for (const plan of [a, b]) {
        for (const key of ["name", "bridge", "network", "kubeletPort", "cgroupRoot", "podCidr"] as const) {
          const values = plan.nodes.map((n) => n[key]);
          assert.equal(new Set(values).size, values.length, `${key} unique within a cluster`);
        }
        for (const n of plan.nodes) {
          assert.ok(n.bridge.length <= 15, `bridge name ${n.bridge} fits a Linux interface name`);
          assert.ok(n.cgroupRoot.startsWith(`/${plan.cgroupPrefix}`));
          assert.ok(n.network.startsWith(plan.cgroupPrefix), "CNI cache files are found by the slot's prefix");
        }
        assert.ok(plan.hostInterface.length <= 15);
      }
    }),
  );
});

test("--real-nodes takes pools or all, and names what it refuses", () => {
  assert.deepEqual(parseRealNodePools("all"), ["untrusted", "sentinel", "general"]);
  assert.deepEqual(parseRealNodePools("untrusted, sentinel"), ["untrusted", "sentinel"]);
  assert.throws(() => parseRealNodePools("untrusted,gpu"), /"gpu" is not a node pool/);
  assert.throws(() => parseRealNodePools("sentinel,sentinel"), /given twice/);
  assert.throws(() => parseRealNodePools(" , "), /at least one pool/);
  assert.throws(() => realNodesPlan(150, []), /at least one pool/);
});

test("the node files: containerd and runsc state under the node, gVisor on systrap, the kubelet on cgroup v1 in its own cgroup root", () => {
  const plan = realNodesPlan(200, ["untrusted", "sentinel"]);
  const node = plan.nodes[0];
  assert.ok(node);
  const dirs = nodeDirs("/tmp/krane-t-1", node);
  assert.ok(dirs.containerdSocket.length < 100, "a unix socket path fits");

  const containerd = containerdConfig(dirs, node, "krane.local/pause:v1", {
    runcShim: "/c/shim-runc",
    runscShim: "/c/shim-runsc",
    runc: "/usr/sbin/runc",
  });
  assert.match(containerd, /^version = 3$/m);
  assert.match(containerd, /^root = "\/tmp\/krane-t-1\/nodes\/0\/containerd"$/m);
  assert.match(containerd, /sandbox = "krane\.local\/pause:v1"/);
  assert.match(containerd, /runtimes\.runsc\]\n\s+runtime_type = 'io\.containerd\.runsc\.v1'/);
  assert.match(containerd, /netns_mounts_under_state_dir = true/);
  assert.match(containerd, /conf_dir = "\/tmp\/krane-t-1\/nodes\/0\/cni"/);
  // Private registries: one hosts directory per cluster, shared by its nodes.
  assert.match(containerd, /images'\.registry\]\n\s+config_path = "\/tmp\/krane-t-1\/registry-hosts"/);
  assert.equal(
    registryHostsToml("10.200.255.1:5000", "/tmp/ca.crt"),
    'server = "https://10.200.255.1:5000"\n\n[host."https://10.200.255.1:5000"]\n  capabilities = ["pull", "resolve"]\n  ca = "/tmp/ca.crt"\n',
  );

  const runsc = runscConfig(dirs, node, "/usr/bin/runsc");
  assert.match(runsc, /platform = "systrap"/);
  assert.match(runsc, /root = "\/tmp\/krane-t-1\/nodes\/0\/run\/runsc"/);

  const cni = JSON.parse(cniConfig(dirs, node)) as {
    name: string;
    plugins: { bridge: string; ipam: { ranges: { subnet: string }[][]; dataDir: string } }[];
  };
  assert.equal(cni.name, node.network);
  assert.equal(cni.plugins[0]?.bridge, node.bridge);
  assert.equal(cni.plugins[0]?.ipam.ranges[0]?.[0]?.subnet, node.podCidr);
  assert.equal(cni.plugins[0]?.ipam.dataDir, dirs.ipamDir);

  const kubelet = parse(kubeletConfig(dirs, node, plan, { clientCaFile: "/ca.crt" })) as Record<string, unknown>;
  assert.equal(kubelet.failCgroupV1, false, "this machine has cgroup v1");
  assert.equal(kubelet.cgroupRoot, node.cgroupRoot);
  assert.equal(kubelet.port, node.kubeletPort);
  assert.deepEqual(kubelet.clusterDNS, [plan.dnsIp]);
  assert.deepEqual(kubelet.authorization, { mode: "Webhook" });
  assert.deepEqual(kubelet.registerWithTaints, [{ key: "node-class", value: "untrusted", effect: "NoSchedule" }]);
  const general = realNodesPlan(200, ["general"]).nodes[0];
  assert.ok(general);
  assert.deepEqual(
    (parse(kubeletConfig(nodeDirs("/d", general), general, plan, { clientCaFile: "/ca" })) as Record<string, unknown>)
      .registerWithTaints,
    [],
  );

  const proxy = parse(kubeProxyConfig(plan, "/k", node.name)) as Record<string, unknown>;
  assert.equal(proxy.clusterCIDR, plan.podCidr);
  assert.deepEqual(proxy.conntrack, { maxPerCore: 0, min: 0, tcpEstablishedTimeout: "0s", tcpCloseWaitTimeout: "0s" });
});
