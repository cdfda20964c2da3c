// The region's autoscaler (src/agent/autoscale/autoscaler.ts) with the kinds' views stood in by
// plain maps: what it decides from the sentinels' documents, when it sizes a revision itself and
// when it leaves sizes to ctrl, how its own size gives way once ctrl's desired state agrees (no
// flap), what it reports, and what it does when ctrl is down or holds a newer decision.
import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { RegionAutoscaler } from "../../../../src/agent/autoscale/autoscaler.js";
import type { KindContext } from "../../../../src/agent/runtime/builder.js";
import { silentLogger } from "../../../../src/base/log.js";
import type { SentinelStatus } from "../../../../src/contracts/routing.js";
import {
  ApplyDeploymentSchema,
  ApplySentinelSchema,
  type ApplyDeployment,
  type ApplySentinel,
  type ReportAutoscaleRequest,
} from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";

const ENV = "env_1";
const KEY = "snt_1";

function ctx<D>(desired: Map<string, D>, rerendered: string[] = []): KindContext<D> {
  return {
    desiredOf: (k: string) => desired.get(k),
    activeKeys: () => desired.keys(),
    rerender: (k: string) => void rerendered.push(k),
    log: silentLogger,
  } as unknown as KindContext<D>;
}

function sentinel(region: { replicas: number; target: string; decidedAt?: number }, zero = false): ApplySentinel {
  return create(ApplySentinelSchema, {
    environmentId: ENV,
    sentinelId: KEY,
    replicas: 1,
    autoscale: {
      minReplicas: zero ? 0 : 1,
      maxReplicas: 10,
      concurrencyTarget: 10,
      scaleUpWindowSeconds: 0,
      scaleDownWindowSeconds: 0,
      ...(zero ? { scaleToZero: { idleSeconds: 60, maxHeldRequests: 100, heldTimeoutSeconds: 30 } } : {}),
    },
    autoscaleRegion: {
      replicas: region.replicas,
      decidedAtUnixMs: BigInt(region.decidedAt ?? 0),
      targetDeploymentId: region.target,
    },
  });
}

const deployment = (id: string, replicas: number, revision = 1): ApplyDeployment =>
  create(ApplyDeploymentSchema, { environmentId: ENV, deploymentId: id, replicas, revision: BigInt(revision) });

function doc(
  inFlight: Record<string, number>,
  held = 0,
  lastRequestAt: string | null = new Date().toISOString(),
): SentinelStatus {
  return {
    environmentId: ENV,
    region: "local",
    ready: true,
    draining: false,
    routingVersion: 1,
    mode: "instances",
    revisions: Object.entries(inFlight).map(([deploymentId, n]) => ({
      deploymentId,
      weight: null,
      share: 100,
      endpoints: 1,
      routable: 1,
      ejected: 0,
      inFlight: n,
    })),
    policyError: null,
    kubeConnected: true,
    tableUpdatedAt: null,
    inFlight: 0,
    lastRequestAt,
    held,
  };
}

interface Harness {
  scaler: RegionAutoscaler;
  sentinels: Map<string, ApplySentinel>;
  deployments: Map<string, ApplyDeployment>;
  docs: SentinelStatus[];
  reports: ReportAutoscaleRequest[];
  rerendered: string[];
  /** What ctrl answers (throws: ctrl down). */
  answer: (r: ReportAutoscaleRequest) => { recorded: boolean; replicas: number };
  now: number;
  stop(): void;
}

function harness(): Harness {
  const h = {
    sentinels: new Map<string, ApplySentinel>(),
    deployments: new Map<string, ApplyDeployment>(),
    docs: [] as SentinelStatus[],
    reports: [] as ReportAutoscaleRequest[],
    rerendered: [] as string[],
    answer: (r: ReportAutoscaleRequest) => ({ recorded: true, replicas: r.replicas }),
    now: 1_000_000,
  } as Harness;
  const abort = new AbortController();
  h.scaler = new RegionAutoscaler({
    region: "local",
    intervalMs: 3_600_000,
    now: () => h.now,
    send: async (req) => {
      h.reports.push(req);
      return h.answer(req);
    },
  });
  void h.scaler.attachDeployments(ctx(h.deployments, h.rerendered), abort.signal);
  void h.scaler.run(ctx(h.sentinels), { documents: () => h.docs, pods: () => [] }, abort.signal);
  h.stop = () => abort.abort();
  return h;
}

const settle = (): Promise<void> => new Promise((r) => setTimeout(r, 10));

test("a settled region is sized by the agent at once, reported, and given back once ctrl agrees", async () => {
  const h = harness();
  try {
    h.deployments.set("dep_1", deployment("dep_1", 2));
    h.sentinels.set(KEY, sentinel({ replicas: 2, target: "dep_1" }));
    h.docs = [doc({ dep_1: 45 })];
    h.scaler.decide(KEY);
    await settle();
    assert.equal(
      h.scaler.sized(deployment("dep_1", 2)).replicas,
      5,
      "45 in flight at 10 each: 5, rendered by the agent",
    );
    assert.deepEqual(h.rerendered, ["dep_1"]);
    assert.deepEqual(
      h.reports.map((r) => [r.environmentId, r.replicas]),
      [[ENV, 5]],
    );
    assert.match(h.reports[0]?.reason ?? "", /45 in flight at 10 per instance/);
    // ctrl took it (its count and the decision's time come back with the sentinel) but the
    // engine's size has not arrived yet: the agent keeps its size, nothing flaps.
    const decidedAt = Number(h.reports[0]?.decidedAtUnixMs);
    h.sentinels.set(KEY, sentinel({ replicas: 5, target: "dep_1", decidedAt }));
    h.now += 1_000;
    h.scaler.decide(KEY);
    assert.equal(h.scaler.sized(deployment("dep_1", 2)).replicas, 5);
    // The engine wrote the same size: ctrl's desired state is rendered as it is again.
    h.deployments.set("dep_1", deployment("dep_1", 5));
    h.now += 1_000;
    h.scaler.decide(KEY);
    assert.equal(h.scaler.sized(deployment("dep_1", 5)).replicas, 5);
    assert.equal(h.rerendered.at(-1), "dep_1");
  } finally {
    h.stop();
  }
});

test("ctrl down: the decision stands and keeps being offered; the next one replaces it", async () => {
  const h = harness();
  try {
    let down = true;
    h.answer = (r) => {
      if (down) throw new Error("unavailable");
      return { recorded: true, replicas: r.replicas };
    };
    h.deployments.set("dep_1", deployment("dep_1", 1));
    h.sentinels.set(KEY, sentinel({ replicas: 1, target: "dep_1" }));
    h.docs = [doc({ dep_1: 30 })];
    h.scaler.decide(KEY);
    await settle();
    assert.equal(h.scaler.sized(deployment("dep_1", 1)).replicas, 3, "scaled up without ctrl");
    // More load: from the agent's own count (ctrl never took 3), not ctrl's stale 1.
    h.docs = [doc({ dep_1: 70 })];
    h.now += 1_000;
    h.scaler.decide(KEY);
    assert.equal(h.scaler.sized(deployment("dep_1", 1)).replicas, 7);
    down = false;
    // The report loop retries with backoff (250 ms first) and sends the newest decision.
    for (let i = 0; i < 100 && !h.reports.some((r) => r.replicas === 7 && h.answer(r).recorded); i++) await settle();
    const last = h.reports.at(-1);
    assert.equal(last?.replicas, 7, "the newest decision reaches ctrl once it is back");
  } finally {
    h.stop();
  }
});

test("mid-rollout (two revisions with replicas) only ctrl sizes revisions: the agent reports", async () => {
  const h = harness();
  try {
    h.deployments.set("dep_1", deployment("dep_1", 2, 1));
    h.deployments.set("dep_2", deployment("dep_2", 1, 2));
    h.sentinels.set(KEY, sentinel({ replicas: 2, target: "dep_2" }));
    h.docs = [doc({ dep_1: 30, dep_2: 20 })];
    h.scaler.decide(KEY);
    await settle();
    assert.equal(h.scaler.sized(deployment("dep_1", 2, 1)).replicas, 2);
    assert.equal(h.scaler.sized(deployment("dep_2", 1, 2)).replicas, 1);
    assert.deepEqual(h.rerendered, []);
    assert.deepEqual(
      h.reports.map((r) => r.replicas),
      [5],
      "50 in flight over the pool: 5, for the engine to spread",
    );
  } finally {
    h.stop();
  }
});

test("ctrl holds a newer decision: the agent follows ctrl's count", async () => {
  const h = harness();
  try {
    h.answer = () => ({ recorded: false, replicas: 4 });
    h.deployments.set("dep_1", deployment("dep_1", 4));
    h.sentinels.set(KEY, sentinel({ replicas: 4, target: "dep_1" }));
    h.docs = [doc({ dep_1: 90 })];
    h.scaler.decide(KEY);
    await settle();
    assert.equal(h.reports[0]?.replicas, 9);
    // Load gone, windows 0: the next decision starts from ctrl's 4, not the refused 9.
    h.docs = [doc({ dep_1: 35 })];
    h.now += 1_000;
    h.scaler.decide(KEY);
    await settle();
    assert.equal(h.scaler.sized(deployment("dep_1", 4)).replicas, 4, "no own size left: ctrl's 4");
    assert.ok(
      h.reports.slice(1).every((r) => r.replicas === 4),
      `9 not offered again: ${h.reports.map((r) => r.replicas).join(" ")}`,
    );
  } finally {
    h.stop();
  }
});

test("asleep at 0: a wake with held requests sizes the target for them at once; idle does not wake it", async () => {
  const h = harness();
  try {
    h.deployments.set("dep_1", deployment("dep_1", 0));
    h.sentinels.set(KEY, sentinel({ replicas: 0, target: "dep_1" }, true));
    // A fresh agent at 0, the last request long ago: it stays asleep (no early wake after a restart).
    h.docs = [doc({ dep_1: 0 }, 0, new Date(h.now - 3_600_000).toISOString())];
    h.scaler.decide(KEY);
    await settle();
    assert.equal(h.scaler.sized(deployment("dep_1", 0)).replicas, 0);
    assert.deepEqual(h.rerendered, []);
    // The wake long-poll: 25 requests held.
    h.scaler.decide(KEY, 25);
    await settle();
    assert.equal(h.scaler.sized(deployment("dep_1", 0)).replicas, 3, "25 held at 10 each");
    assert.match(h.reports.at(-1)?.reason ?? "", /25 request\(s\) held at zero: waking/);
  } finally {
    h.stop();
  }
});
