// The live views (LiveService) through a real ctrl over real HTTP/2 and HTTP/1.1, on SQLite and
// PostgreSQL: a stream sends the whole view, then each change a write commits (a deployment, an
// agent's report, a heartbeat) without polling; the overview sends only what changed; a stream
// ends when its token is revoked, refuses callers without a token, and one token cannot open
// streams without bound; two ctrl processes on one PostgreSQL serve each other's changes.
// MetricsService turns an agent's measurements into per-revision buckets.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import {
  ApiTokenService,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import {
  ClusterService,
  InstanceStatus,
  ReportDeploymentStatusRequestSchema,
} from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import {
  LiveService,
  MetricsService,
  type WatchEnvironmentResponse,
  type WatchOverviewResponse,
} from "../../../src/gen/krane/ctrl/v1/live_pb.js";
import { generateToken } from "../../../src/ctrl/domain/tokens.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { spawnCtrl, type CtrlProcess } from "./process.js";
import { bearer, expectCode, startTestCtrl, tempDir, transportFor, type TestCtrl } from "./support.js";

const ENV = { workspace: "acme", project: "shop", environment: "production" };

/** Reads a stream until `want` holds of a message (keepalives included), within 20 s. */
async function until<T>(it: AsyncIterator<T>, want: (m: T) => boolean, what: string): Promise<T> {
  const deadline = Date.now() + 20_000;
  const late = Symbol("late");
  for (;;) {
    let timer: NodeJS.Timeout | undefined;
    const r = await Promise.race([
      it.next(),
      new Promise<typeof late>(
        (resolve) => (timer = setTimeout(() => resolve(late), Math.max(0, deadline - Date.now()))),
      ),
    ]);
    clearTimeout(timer);
    if (r === late) throw new Error(`no message with ${what} within 20 s`);
    if (r.done) throw new Error(`stream ended before ${what}`);
    if (want(r.value)) return r.value;
  }
}

/** A stream that is expected to end gets 20 s to do so (then it fails as Canceled, not hangs). */
const bounded = (): AbortSignal => AbortSignal.timeout(20_000);

async function setUp(call: <S extends Parameters<typeof createClient>[0]>(s: S) => ReturnType<typeof createClient<S>>) {
  await call(RegionService).createRegion({ name: "eu" });
  await call(WorkspaceService).createWorkspace({ slug: "acme" });
  await call(ProjectService).createProject({ workspace: "acme", slug: "shop" });
  await call(EnvironmentService).createEnvironment({
    workspace: "acme",
    project: "shop",
    slug: "production",
    regions: [{ region: "eu", replicas: 1 }],
  });
}

const images = (m: WatchEnvironmentResponse): string[] =>
  (m.view?.status?.deployments ?? []).map((d) => d.deployment?.image ?? "");

describe("live views on SQLite", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  before(async () => {
    ctrl = await startTestCtrl(`${dir.path}/ctrl.db`, {
      live: { recheckMs: 200, keepaliveMs: 500, perCallerMax: 4, slowMs: 200 },
    });
    await setUp((s) => ctrl.client(s, ctrl.adminToken));
  });
  after(async () => {
    await ctrl?.close();
    dir.remove();
  });

  it("sends the environment, then each change: a deployment, an agent's report, a heartbeat", async () => {
    const abort = new AbortController();
    const live = ctrl.client(LiveService, ctrl.adminToken);
    const it = live.watchEnvironment(ENV, { signal: abort.signal })[Symbol.asyncIterator]();
    try {
      const first = await until(it, (m) => m.view !== undefined, "a view");
      assert.equal(first.view?.status?.environment?.slug, "production");
      assert.deepEqual(images(first), []);
      // A keepalive comes when nothing changes (no view in it).
      await until(it, (m) => m.view === undefined, "a keepalive");

      const { deployment } = await ctrl.client(DeploymentService, ctrl.adminToken).createDeployment({
        ...ENV,
        image: "registry.example.com/shop:1",
      });
      const shown = await until(it, (m) => images(m).includes("registry.example.com/shop:1"), "the new revision");
      assert.equal(shown.view?.rollout?.regions[0]?.region, "eu");

      // The agent reports an instance running: it shows up, with its state.
      const agent = ctrl.client(ClusterService, await ctrl.agentToken("eu"));
      await until(
        it,
        (m) => m.view?.rollout?.regions[0]?.targetDeploymentId === deployment?.id,
        "the rollout targeting the revision",
      );
      await agent.reportDeploymentStatus(
        create(ReportDeploymentStatusRequestSchema, {
          region: "eu",
          change: {
            case: "update",
            value: {
              deploymentId: deployment?.id ?? "",
              instances: [{ k8sName: "shop-a", address: "10.0.0.1:8080", status: InstanceStatus.RUNNING }],
              events: [],
            },
          },
        }),
      );
      await until(
        it,
        (m) =>
          (m.view?.status?.deployments[0]?.regions[0]?.instances ?? []).some(
            (i) => i.k8sName === "shop-a" && i.status === InstanceStatus.RUNNING,
          ),
        "the running instance",
      );
      // A heartbeat moves the cluster's last seen on the page.
      await agent.heartbeat({ region: "eu", agentId: "agent-1", build: "test" });
      await until(
        it,
        (m) => (m.view?.status?.clusters ?? []).some((c) => c.agentId === "agent-1" && c.lastHeartbeatUnixMs > 0n),
        "the heartbeat",
      );
    } finally {
      abort.abort();
    }
  });

  it("the overview: the whole first, then only the environments that changed", async () => {
    const abort = new AbortController();
    const it = ctrl
      .client(LiveService, ctrl.adminToken)
      .watchOverview({}, { signal: abort.signal })
      [Symbol.asyncIterator]();
    try {
      const first = await until(it, (m) => m.reset, "the whole");
      assert.deepEqual(
        first.environments.map((e) => `${e.workspace}/${e.project}/${e.environment}`),
        ["acme/shop/production"],
      );
      assert.ok(first.clustersChanged);
      await ctrl.client(EnvironmentService, ctrl.adminToken).createEnvironment({
        workspace: "acme",
        project: "shop",
        slug: "staging",
        regions: [{ region: "eu", replicas: 2 }],
      });
      const added = await until(it, (m: WatchOverviewResponse) => m.environments.length > 0, "the new environment");
      assert.equal(added.reset, false);
      assert.deepEqual(
        added.environments.map((e) => [e.environment, e.state, e.desired]),
        [["staging", "none", 0]],
      );
      await ctrl
        .client(EnvironmentService, ctrl.adminToken)
        .deleteEnvironment({ workspace: "acme", project: "shop", environment: "staging", confirm: "staging" });
      const gone = await until(it, (m) => m.removedEnvironmentIds.length > 0, "the removal");
      assert.deepEqual(gone.removedEnvironmentIds, [added.environments[0]?.environmentId]);
    } finally {
      abort.abort();
    }
  });

  it("over HTTP/1.1 and in JSON too (what a browser speaks to a plain-http ctrl; binary is shared bytes)", async () => {
    const abort = new AbortController();
    const transport = createConnectTransport({
      baseUrl: ctrl.url,
      httpVersion: "1.1",
      useBinaryFormat: false,
      interceptors: [bearer(ctrl.adminToken)],
    });
    const it = createClient(LiveService, transport)
      .watchEnvironment(ENV, { signal: abort.signal })
      [Symbol.asyncIterator]();
    try {
      await until(it, (m) => m.view !== undefined, "a view");
      await ctrl
        .client(DeploymentService, ctrl.adminToken)
        .createDeployment({ ...ENV, image: "registry.example.com/shop:2" });
      await until(it, (m) => images(m).includes("registry.example.com/shop:2"), "the change over HTTP/1.1");
    } finally {
      abort.abort();
    }
  });

  it("refuses a caller without a token, an unknown environment, and a token past its stream limit", async () => {
    await expectCode(
      (async () => {
        for await (const m of ctrl.client(LiveService, null).watchOverview({}, { signal: bounded() })) void m;
      })(),
      Code.Unauthenticated,
    );
    await expectCode(
      (async () => {
        for await (const m of ctrl
          .client(LiveService, ctrl.adminToken)
          .watchEnvironment({ ...ENV, environment: "nope" }, { signal: bounded() }))
          void m;
      })(),
      Code.NotFound,
    );
    const abort = new AbortController();
    try {
      const its = [];
      for (let i = 0; i < 4; i++) {
        const it = ctrl
          .client(LiveService, ctrl.adminToken)
          .watchOverview({}, { signal: abort.signal })
          [Symbol.asyncIterator]();
        await it.next();
        its.push(it);
      }
      await expectCode(
        (async () => {
          for await (const m of ctrl.client(LiveService, ctrl.adminToken).watchOverview({}, { signal: bounded() }))
            void m;
        })(),
        Code.ResourceExhausted,
      );
    } finally {
      abort.abort();
    }
  });

  it("ends a stream whose token was revoked", async () => {
    const tokens = ctrl.client(ApiTokenService, ctrl.adminToken);
    const made = await tokens.createApiToken({ name: "viewer" });
    const it = ctrl
      .client(LiveService, made.token)
      .watchEnvironment(ENV, { signal: bounded() })
      [Symbol.asyncIterator]();
    await until(it, (m) => m.view !== undefined, "a view");
    await tokens.revokeApiToken({ tokenId: made.apiToken?.id ?? "" });
    await expectCode(
      (async () => {
        for (;;) if ((await it.next()).done) return;
      })(),
      Code.Unauthenticated,
    );
  });

  it("GetRevisionMetrics buckets an agent's measurements per revision", async () => {
    const admin = ctrl.adminToken;
    await ctrl.client(EnvironmentService, admin).updateEnvironment({ ...ENV, sentinel: { image: "" } });
    const { deployments } = await ctrl.client(DeploymentService, admin).listDeployments(ENV);
    const dep = deployments[0];
    assert.ok(dep);
    const agent = ctrl.client(ClusterService, await ctrl.agentToken("eu"));
    const now = Date.now();
    await agent.reportMeasurements({
      region: "eu",
      fromUnixMs: BigInt(now - 20_000),
      toUnixMs: BigInt(now - 10_000),
      revisions: [
        {
          environmentId: dep.environmentId,
          deploymentId: dep.id,
          responses2xx: 90n,
          responses5xx: 10n,
          // 60 at ≤ 10 ms, 40 at ≤ 250 ms: p50 ≤ 10, p99 ≤ 250.
          latencyBuckets: [0n, 0n, 0n, 60n, 0n, 0n, 0n, 40n, 0n, 0n, 0n, 0n, 0n, 0n, 0n],
        },
      ],
    });
    const res = await ctrl
      .client(MetricsService, admin)
      .getRevisionMetrics({ ...ENV, sinceUnixMs: BigInt(now - 60_000), bucketSeconds: 60 });
    assert.equal(res.revisions.length, 1);
    const pts = res.revisions[0]?.points ?? [];
    assert.equal(pts.length, 1);
    assert.equal(pts[0]?.requests, 100n);
    assert.equal(pts[0]?.errorRatePercent, 10);
    assert.equal(pts[0]?.p50Ms, 10);
    assert.equal(pts[0]?.p99Ms, 250);
    await expectCode(
      ctrl.client(MetricsService, admin).getRevisionMetrics({ ...ENV, bucketSeconds: 5 }),
      Code.InvalidArgument,
      /bucket_seconds/,
    );
  });
});

describe("live views on PostgreSQL", () => {
  let server: TestPostgres;
  const procs: CtrlProcess[] = [];
  before(async () => {
    server = await startPostgres();
  });
  after(async () => {
    for (const p of procs) await p.stop();
    await server?.stop();
  });

  it("a change written through one ctrl process reaches a live stream on another", async () => {
    const url = await server.newDatabase();
    const admin = generateToken("user");
    procs.push(await spawnCtrl(["--database", url, "--admin-token", admin]));
    procs.push(await spawnCtrl(["--database", url, "--admin-token", admin]));
    const [a, b] = procs as [CtrlProcess, CtrlProcess];
    await setUp((s) => createClient(s, transportFor(a.url, admin)));
    const abort = new AbortController();
    const it = createClient(LiveService, transportFor(b.url, admin))
      .watchEnvironment(ENV, { signal: abort.signal })
      [Symbol.asyncIterator]();
    try {
      await until(it, (m) => m.view !== undefined, "a view");
      await createClient(DeploymentService, transportFor(a.url, admin)).createDeployment({
        ...ENV,
        image: "registry.example.com/shop:pg",
      });
      await until(
        it,
        (m) => images(m).includes("registry.example.com/shop:pg"),
        "the change made through the other ctrl",
      );
    } finally {
      abort.abort();
    }
  });
});
