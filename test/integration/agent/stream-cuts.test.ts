// The agent's desired-state stream cut at every byte boundary: a real ctrl (SQLite)
// holds a generated sequence of changes for a region; the agent's own stream loop and decoding
// (the deployments kind's protocol over a real Connect transport, HTTP/2) reads them through the
// HTTP/2 fault proxy, which resets the first stream after exactly k bytes of its answer, for every
// k from 0 to the answer's length; the loop reconnects with its cursor. Property, for each cut:
// resuming from a cursor, every change is handled exactly once and in version order; from cursor
// 0 (a snapshot, which a cut restarts), the desired state the agent ends with is exactly ctrl's.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import fc from "fast-check";
import { createCtrlClient } from "../../../src/agent/ctrl-client.js";
import { deploymentsController } from "../../../src/agent/deployments/controller.js";
import { DesiredStateStream } from "../../../src/agent/runtime/stream.js";
import type { CursorAction } from "../../../src/agent/runtime/cursor.js";
import { silentLogger } from "../../../src/base/log.js";
import type { ApplyDeployment, DeleteDeployment, DeploymentState } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { createRegion } from "../../../src/ctrl/domain/clusters.js";
import {
  createDeployment,
  loadDeploymentContext,
  removeFromRegion,
  setDesiredReplicas,
} from "../../../src/ctrl/domain/deployments.js";
import { createEnvironment } from "../../../src/ctrl/domain/environments.js";
import { createProject, createWorkspace } from "../../../src/ctrl/domain/tenancy.js";
import { validateRollout } from "../../../src/ctrl/validate/api.js";
import type { DeploymentContext } from "../../../src/ctrl/payloads/deployment.js";
import { H2FaultProxy } from "../../support/faults/h2-proxy.js";
import { startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";

const WATCH = "/krane.ctrl.v1.ClusterService/WatchDeployments";
const dir = tempDir();
let ctrl: TestCtrl;
let proxy: H2FaultProxy;
let regions = 0;
let cutsTried = 0;

before(async () => {
  ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { rolloutSweepIntervalMs: 0 });
  await createWorkspace(ctrl.store, { slug: "acme", name: "acme" });
  await createProject(ctrl.store, { workspace: "acme", slug: "web", name: "web" });
  proxy = await H2FaultProxy.start({ target: ctrl.url });
});

after(async () => {
  await proxy?.close();
  await ctrl?.close();
  dir.remove();
  console.log(`stream cuts: ${cutsTried} cut positions tried, every one converged`);
});

type Op = { op: "scale"; dep: number; replicas: number } | { op: "remove"; dep: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ op: fc.constant("scale" as const), dep: fc.nat({ max: 2 }), replicas: fc.nat({ max: 9 }) }),
  fc.record({ op: fc.constant("remove" as const), dep: fc.nat({ max: 2 }) }),
);

/** A fresh region with three deployments and `ops` applied one transaction each; ctrl's desired state after them. */
async function seed(ops: Op[]): Promise<{ region: string; desired: Map<string, number> }> {
  const region = `cut-${++regions}`;
  await createRegion(ctrl.store, region);
  await createEnvironment(ctrl.store, {
    workspace: "acme",
    project: "web",
    slug: region,
    regions: [{ region, replicas: 0 }],
    sentinel: null,
    rollout: validateRollout(undefined),
  });
  const deps: DeploymentContext[] = [];
  for (let i = 0; i < 3; i++) {
    const d = await createDeployment(ctrl.store, {
      workspace: "acme",
      project: "web",
      environment: region,
      image: `registry.example.com/web:${i}`,
      command: [],
      args: [],
      port: 8080,
      env: [{ name: "PAD", value: "x".repeat(40 * i) }],
      cpuMillicores: 250,
      memoryMib: 256,
      healthCheck: null,
      buildId: "",
      replicas: null,
    });
    deps.push(await loadDeploymentContext(ctrl.store.db, d.deployment.id));
  }
  const desired = new Map<string, number>();
  for (const o of ops) {
    const d = deps[o.dep];
    assert.ok(d);
    await ctrl.store.write(async (tx) => {
      if (o.op === "scale") await setDesiredReplicas(tx, d, region, o.replicas);
      else await removeFromRegion(tx, d, region);
    });
    if (o.op === "scale") desired.set(d.deployment.id, o.replicas);
    else desired.delete(d.deployment.id);
  }
  return { region, desired };
}

interface Run {
  /** Versions of the changes handled outside snapshots, in order. */
  versions: bigint[];
  /** Desired replicas by deployment id, as the agent's actions leave it. */
  state: Map<string, number>;
  /** Streams opened. */
  opens: number;
}

/** Reads the region's stream from `from` through the proxy until the cursor reaches `head`; the first stream is cut after `cutAt` bytes. */
type Protocol = ReturnType<typeof deploymentsController>["protocol"];

/** The deployments kind's own protocol (watch + decode), through the proxy. */
function agentProtocol(region: string, token: string): Protocol {
  return deploymentsController({ region, ctrl: createCtrlClient(proxy.url, token) }).protocol;
}

async function readThrough(protocol: Protocol, from: bigint, head: bigint, cutAt: number | undefined): Promise<Run> {
  const first = (proxy.streams.get(WATCH) ?? 0) + 1;
  proxy.fault = ({ path, n }) =>
    cutAt !== undefined && path === WATCH && n === first ? { kind: "cut", afterBytes: cutAt } : undefined;
  const run: Run = { versions: [], state: new Map(), opens: 0 };
  const ac = new AbortController();
  let inSnapshot = false;
  const stream = new DesiredStateStream<DeploymentState, ApplyDeployment, DeleteDeployment>({
    name: "deployments",
    log: silentLogger,
    reconnect: { baseMs: 1, capMs: 2, minMs: 0 },
    open: (cursor, call) => {
      run.opens++;
      assert.ok(run.opens < 50, "reconnects without end");
      return protocol.watch(cursor === 0n ? from : cursor, call);
    },
    decode: (msg) => {
      const ev = protocol.decode(msg);
      if (ev.type === "snapshot-start") inSnapshot = true;
      if (ev.type === "snapshot-end") inSnapshot = false;
      if ((ev.type === "apply" || ev.type === "delete") && !inSnapshot) run.versions.push(ev.version);
      return ev;
    },
    onAction: (a: CursorAction<ApplyDeployment, DeleteDeployment>) => {
      if (a.type === "apply") run.state.set(a.key, a.desired.replicas);
      else if (a.type === "delete") run.state.delete(a.key);
      else if (a.type === "collect-garbage") {
        for (const k of [...run.state.keys()]) if (!a.keep.has(k)) run.state.delete(k);
      } else inSnapshot = true;
    },
    onCursor: (c) => {
      if (c >= head) ac.abort();
    },
    onConnectedChange: (connected) => {
      if (!connected) inSnapshot = false;
    },
  });
  const timer = setTimeout(() => ac.abort(), 20_000);
  await stream.run(ac.signal);
  clearTimeout(timer);
  assert.equal(stream.cursor, head, "reached ctrl's head");
  return run;
}

test(
  "a watch cut at every byte of its answer converges: each change once, in order; a snapshot ends at ctrl's state",
  { timeout: 15 * 60_000 },
  async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 2, maxLength: 4 }), async (ops) => {
        const { region, desired } = await seed(ops);
        const protocol = agentProtocol(region, await ctrl.agentToken(region));
        const row = await ctrl.store.db
          .selectFrom("stream_versions")
          .select("version")
          .where("region", "=", region)
          .where("kind", "=", "deployment")
          .executeTakeFirstOrThrow();
        const head = BigInt(row.version);
        if (head === 0n) return;
        // Resuming from the first change (a cursor of 0 asks for a snapshot instead).
        const from = 1n;
        if (head > from) {
          const uncut = await readThrough(protocol, from, head, undefined);
          const expected = Array.from({ length: Number(head - from) }, (_, i) => from + 1n + BigInt(i));
          assert.deepEqual(uncut.versions, expected);
          const length = proxy.forwarded.get(WATCH)?.at(-1) ?? 0;
          assert.ok(length > 0);
          for (let k = 0; k <= length; k++) {
            const r = await readThrough(protocol, from, head, k);
            assert.deepEqual(r.versions, expected, `cut after ${k} of ${length} bytes: each change once, in order`);
            cutsTried++;
          }
        }
        // From cursor 0: a snapshot, cut anywhere, then restarted from scratch.
        await readThrough(protocol, 0n, head, undefined);
        const snapshotLength = proxy.forwarded.get(WATCH)?.at(-1) ?? 0;
        for (let k = 0; k <= snapshotLength; k += 1) {
          const r = await readThrough(protocol, 0n, head, k);
          assert.deepEqual(
            r.state,
            desired,
            `snapshot cut after ${k} of ${snapshotLength} bytes: the agent ends at ctrl's desired state`,
          );
          cutsTried++;
        }
      }),
      { numRuns: 3, seed: 14 },
    );
  },
);
