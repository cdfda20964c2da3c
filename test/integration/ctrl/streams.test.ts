// Stream behaviour through the real HTTP/2 server: resume after a ctrl restart, a snapshot
// after compaction, and slow or dead watchers not holding back the others.
import assert from "node:assert/strict";
import * as net from "node:net";
import { after, before, describe, it } from "node:test";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { createClient } from "@connectrpc/connect";
import { ClusterService, type DeploymentState } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { compactOutbox } from "../../../src/ctrl/db/outbox.js";
import { startTestCtrl, tempDir, transportFor, withoutBookmarks, type TestCtrl } from "./support.js";

async function setupEnv(ctrl: TestCtrl, region: string): Promise<void> {
  const t = ctrl.adminToken;
  await ctrl.client(RegionService, t).createRegion({ name: region });
  await ctrl
    .client(WorkspaceService, t)
    .createWorkspace({ slug: "acme" })
    .catch(() => undefined);
  await ctrl
    .client(ProjectService, t)
    .createProject({ workspace: "acme", slug: "web" })
    .catch(() => undefined);
  // 0 replicas and a long history: each deployment is then exactly one apply in the outbox (the
  // rollout driver creates its empty ReplicaSet and has nothing to scale or clean up).
  await ctrl.client(EnvironmentService, t).createEnvironment({
    workspace: "acme",
    project: "web",
    slug: "prod",
    regions: [{ region, replicas: 0 }],
    rollout: { revisionHistoryLimit: 100 },
  });
}

async function deploy(ctrl: TestCtrl, n: number, envValueSize = 0): Promise<string[]> {
  const client = ctrl.client(DeploymentService, ctrl.adminToken);
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const env = envValueSize > 0 ? [{ name: "PAD", value: "x".repeat(envValueSize) }] : [];
    const { deployment } = await client.createDeployment({
      workspace: "acme",
      project: "web",
      environment: "prod",
      image: `app:${i}`,
      env,
    });
    ids.push(deployment?.id ?? "");
  }
  return ids;
}

/** Reads until `stop` says enough, returning the messages. */
async function read(
  stream: AsyncIterable<DeploymentState>,
  stop: (m: DeploymentState, all: DeploymentState[]) => boolean,
): Promise<DeploymentState[]> {
  const all: DeploymentState[] = [];
  for await (const m of withoutBookmarks(stream)) {
    all.push(m);
    if (stop(m, all)) break;
  }
  return all;
}

describe("resume after a ctrl restart (SQLite file)", () => {
  const dir = tempDir();
  after(() => dir.remove());

  it("an agent reconnecting with its cursor gets exactly the changes it missed, without a snapshot", async () => {
    const dbPath = join(dir.path, "ctrl.db");
    let ctrl = await startTestCtrl(dbPath);
    await setupEnv(ctrl, "eu");
    const token = await ctrl.agentToken("eu");
    await deploy(ctrl, 3);
    const agent = createClient(ClusterService, transportFor(ctrl.url, token));
    const first = await read(
      agent.watchDeployments({ region: "eu", versionLastSeen: 0n }),
      (m) => m.state.case === "snapshotEnd",
    );
    assert.deepEqual(
      first.map((m) => m.state.case),
      ["snapshotStart", "apply", "apply", "apply", "snapshotEnd"],
    );
    const cursor = first[4]?.state.case === "snapshotEnd" ? first[4].state.value.headVersion : 0n;
    assert.equal(cursor, 3n);

    // A stream that is open while ctrl shuts down ends cleanly (no error), so agents reconnect.
    const open = agent.watchDeployments({ region: "eu", versionLastSeen: cursor });
    const ended = read(open, () => false);
    await sleep(50);
    await ctrl.close();
    assert.deepEqual(await ended, []);

    ctrl = await startTestCtrl(dbPath);
    try {
      await deploy(ctrl, 2);
      const agent2 = createClient(ClusterService, transportFor(ctrl.url, token));
      const resumed = await read(
        agent2.watchDeployments({ region: "eu", versionLastSeen: cursor }),
        (_m, all) => all.length === 2,
      );
      assert.deepEqual(
        resumed.map((m) => [m.version, m.state.case]),
        [
          [4n, "apply"],
          [5n, "apply"],
        ],
      );
    } finally {
      await ctrl.close();
    }
  });
});

describe("snapshot after compaction", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { outboxRetention: 5 });
  });
  after(async () => {
    await ctrl.close();
    dir.remove();
  });

  it("a cursor older than the retained outbox gets a snapshot; a recent one resumes", async () => {
    await setupEnv(ctrl, "eu");
    const token = await ctrl.agentToken("eu");
    const ids = await deploy(ctrl, 12);
    await ctrl.client(DeploymentService, ctrl.adminToken).deleteDeployment({ deploymentId: ids[0] ?? "" });
    // head is 13 (12 applies + 1 delete); keep the newest 5 versions.
    assert.ok((await compactOutbox(ctrl.store.db, 5)) > 0);
    const agent = ctrl.client(ClusterService, token);

    const old = await read(
      agent.watchDeployments({ region: "eu", versionLastSeen: 3n }),
      (m) => m.state.case === "snapshotEnd",
    );
    assert.equal(old[0]?.state.case, "snapshotStart");
    const applies = old.filter((m) => m.state.case === "apply");
    assert.equal(applies.length, 11, "the snapshot holds the 11 deployments still desired");
    assert.ok(applies.every((m) => m.version === 0n));
    const end = old[old.length - 1];
    assert.equal(end?.state.case === "snapshotEnd" ? end.state.value.headVersion : 0n, 13n);

    const recent = await read(
      agent.watchDeployments({ region: "eu", versionLastSeen: 9n }),
      (_m, all) => all.length === 4,
    );
    assert.deepEqual(
      recent.map((m) => m.version),
      [10n, 11n, 12n, 13n],
    );
    assert.equal(recent[3]?.state.case, "delete");

    // The horizon itself is still resumable (everything after it is retained).
    const edge = await read(
      agent.watchDeployments({ region: "eu", versionLastSeen: 8n }),
      (_m, all) => all.length === 1,
    );
    assert.equal(edge[0]?.version, 9n);
  });
});

describe("slow and dead watchers", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  before(async () => {
    // A live peer must answer a PING within one interval even on a loaded CI machine (at 200 ms
    // the fast watcher's own session was closed under load); the dead one is dropped after two.
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { pingIntervalMs: 2_000 });
  });
  after(async () => {
    await ctrl.close();
    dir.remove();
  });

  it("a watcher that stops reading does not hold back the others, and a dead peer is dropped", async () => {
    await setupEnv(ctrl, "eu");
    const token = await ctrl.agentToken("eu");

    // Slow: a Connect client on its own connection that reads one message and then stops.
    const slowAc = new AbortController();
    const slow = createClient(ClusterService, transportFor(ctrl.url, token)).watchDeployments(
      { region: "eu", versionLastSeen: 0n },
      { signal: slowAc.signal },
    );
    const slowIt = withoutBookmarks(slow)[Symbol.asyncIterator]();
    await slowIt.next();

    // Dead: a peer behind a TCP relay that we freeze after its watch is open, as when a
    // machine vanishes: nothing it sent arrives any more and nothing is read.
    const sockets: net.Socket[] = [];
    const relay = net.createServer((client) => {
      const upstream = net.connect(Number(new URL(ctrl.url).port), "127.0.0.1");
      sockets.push(client, upstream);
      client.pipe(upstream);
      upstream.pipe(client);
      client.on("error", () => undefined);
      upstream.on("error", () => undefined);
    });
    await new Promise<void>((r) => relay.listen(0, "127.0.0.1", () => r()));
    const relayUrl = `http://127.0.0.1:${(relay.address() as net.AddressInfo).port}`;
    const deadAc = new AbortController();
    const deadStream = createClient(ClusterService, transportFor(relayUrl, token)).watchDeployments(
      { region: "eu", versionLastSeen: 0n },
      { signal: deadAc.signal },
    );
    const deadIt = withoutBookmarks(deadStream)[Symbol.asyncIterator]();
    await deadIt.next();
    for (const s of sockets) {
      s.unpipe();
      s.pause();
    }

    // Fast: follows everything. ~2 MB of changes, far beyond the HTTP/2 windows of the others.
    const fastAc = new AbortController();
    const fast = ctrl
      .client(ClusterService, token)
      .watchDeployments({ region: "eu", versionLastSeen: 0n }, { signal: fastAc.signal });
    const fastIt = withoutBookmarks(fast)[Symbol.asyncIterator]();
    for (let i = 0; i < 2; i++) await fastIt.next(); // empty snapshot
    const total = 200;
    const writer = deploy(ctrl, total, 10_000);
    let last = 0n;
    while (last < BigInt(total)) {
      const r = await fastIt.next();
      if (r.done) throw new Error("fast stream ended");
      assert.equal(r.value.version, last + 1n, "in order, none skipped");
      last = r.value.version;
    }
    await writer;
    fastAc.abort();

    // The dead peer never answers PINGs, so the server closes its session and its stream.
    for (;;) {
      const active = (await ctrl.metrics.streamsActive.get()).values.reduce((n, v) => n + v.value, 0);
      if (active <= 1) break; // only the slow (but alive) watcher remains
      await sleep(50);
    }
    slowAc.abort();
    deadAc.abort();
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => relay.close(() => r()));
  });
});
