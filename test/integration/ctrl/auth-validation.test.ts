// Authentication, authorization and input validation at the real server, plus a standard gRPC
// client calling ClusterService.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { join } from "node:path";
import fc from "fast-check";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  ApiTokenService,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  RolloutStrategy,
  StatusService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { fromBinary } from "@bufbuild/protobuf";
import { ApplySentinelSchema, ClusterService } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

function codeOf(e: unknown): Code {
  return ConnectError.from(e).code;
}

describe("auth, validation and gRPC", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  let euToken: string;
  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"));
    const t = ctrl.adminToken;
    await ctrl.client(RegionService, t).createRegion({ name: "eu" });
    await ctrl.client(RegionService, t).createRegion({ name: "us" });
    await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "acme" });
    await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug: "web" });
    await ctrl.client(EnvironmentService, t).createEnvironment({
      workspace: "acme",
      project: "web",
      slug: "prod",
      regions: [
        { region: "eu", replicas: 1 },
        { region: "us", replicas: 1 },
      ],
    });
    euToken = await ctrl.agentToken("eu");
  });
  after(async () => {
    await ctrl.close();
    dir.remove();
  });

  it("refuses calls without a valid token (Unauthenticated)", async () => {
    await expectCode(ctrl.client(WorkspaceService, null).listWorkspaces({}), Code.Unauthenticated);
    await expectCode(ctrl.client(WorkspaceService, "krane_user_nope").listWorkspaces({}), Code.Unauthenticated);
    await expectCode(ctrl.client(ClusterService, null).heartbeat({ region: "eu" }), Code.Unauthenticated);
    await expectCode(
      ctrl.client(ClusterService, "krane_agent_forged").heartbeat({ region: "eu" }),
      Code.Unauthenticated,
    );
    const stream = ctrl.client(ClusterService, null).watchDeployments({ region: "eu" });
    await expectCode(
      (async () => {
        for await (const _ of stream) break;
      })(),
      Code.Unauthenticated,
    );
  });

  it("keeps agents to their own region and tokens to their own API (PermissionDenied)", async () => {
    const eu = ctrl.client(ClusterService, euToken);
    await eu.heartbeat({ region: "eu" });
    await expectCode(eu.heartbeat({ region: "us" }), Code.PermissionDenied);
    await expectCode(eu.getDesiredDeploymentStates({ region: "us", deploymentIds: [] }), Code.PermissionDenied);
    await expectCode(
      eu.reportDeploymentStatus({ region: "us", change: { case: "delete", value: { deploymentId: "dep_x" } } }),
      Code.PermissionDenied,
    );
    const watchUs = eu.watchDeployments({ region: "us" });
    await expectCode(
      (async () => {
        for await (const _ of watchUs) break;
      })(),
      Code.PermissionDenied,
    );
    const watchSentinelsUs = eu.watchSentinels({ region: "us" });
    await expectCode(
      (async () => {
        for await (const _ of watchSentinelsUs) break;
      })(),
      Code.PermissionDenied,
    );
    // Agent tokens cannot use the public API, user tokens cannot act as agents.
    await expectCode(ctrl.client(WorkspaceService, euToken).listWorkspaces({}), Code.PermissionDenied);
    await expectCode(ctrl.client(ClusterService, ctrl.adminToken).heartbeat({ region: "eu" }), Code.PermissionDenied);
  });

  it("rotating a cluster token retires the old one", async () => {
    const { token: first } = await ctrl
      .client(RegionService, ctrl.adminToken)
      .createClusterToken({ region: "eu", clusterName: "rotating" });
    await ctrl.client(ClusterService, first).heartbeat({ region: "eu" });
    const res = await ctrl
      .client(RegionService, ctrl.adminToken)
      .createClusterToken({ region: "eu", clusterName: "rotating" });
    assert.notEqual(res.token, first);
    await ctrl.client(ClusterService, res.token).heartbeat({ region: "eu" });
    // The old token may live on in the 5 s auth cache of this process; a new process refuses it.
    const { findClusterByTokenHash } = await import("../../../src/ctrl/domain/clusters.js");
    const { hashToken } = await import("../../../src/ctrl/domain/tokens.js");
    assert.equal(await findClusterByTokenHash(ctrl.store.db, hashToken(first)), undefined);
    const stored = await ctrl.store.db
      .selectFrom("clusters")
      .select("token_hash")
      .where("name", "=", "rotating")
      .executeTakeFirstOrThrow();
    assert.equal(stored.token_hash, hashToken(res.token));
    assert.ok(!stored.token_hash.includes(res.token));
  });

  it("names the field at fault (InvalidArgument)", async () => {
    const d = ctrl.client(DeploymentService, ctrl.adminToken);
    const base = { workspace: "acme", project: "web", environment: "prod", image: "app:1" };
    await expectCode(d.createDeployment({ ...base, image: "" }), Code.InvalidArgument, /^image: /);
    await expectCode(d.createDeployment({ ...base, image: "UPPER/Case::" }), Code.InvalidArgument, /^image: /);
    await expectCode(d.createDeployment({ ...base, port: 70000 }), Code.InvalidArgument, /^port: /);
    await expectCode(d.createDeployment({ ...base, cpuMillicores: -5n }), Code.InvalidArgument, /^cpu_millicores: /);
    await expectCode(d.createDeployment({ ...base, memoryMib: 1n << 40n }), Code.InvalidArgument, /^memory_mib: /);
    await expectCode(d.createDeployment({ ...base, replicas: -1 }), Code.InvalidArgument, /^replicas: /);
    await expectCode(
      d.createDeployment({
        ...base,
        env: [
          { name: "OK", value: "1" },
          { name: "1BAD", value: "x" },
        ],
      }),
      Code.InvalidArgument,
      /^env\[1\]\.name: /,
    );
    await expectCode(
      d.createDeployment({ ...base, env: [{ name: "PORT", value: "1" }] }),
      Code.InvalidArgument,
      /^env\[0\]\.name: /,
    );
    await expectCode(
      d.createDeployment({ ...base, healthCheck: { path: "health" } }),
      Code.InvalidArgument,
      /^health_check\.path: /,
    );
    await expectCode(d.createDeployment({ ...base, workspace: "Not A Slug" }), Code.InvalidArgument, /^workspace: /);
    await expectCode(
      d.createDeployment({ ...base, args: Array.from({ length: 65 }, () => "a") }),
      Code.InvalidArgument,
      /^args: /,
    );
    const e = ctrl.client(EnvironmentService, ctrl.adminToken);
    await expectCode(
      e.createEnvironment({ workspace: "acme", project: "web", slug: "x", regions: [{ region: "eu", replicas: -2 }] }),
      Code.InvalidArgument,
      /^regions\[0\]\.replicas: /,
    );
    await expectCode(
      e.createEnvironment({
        workspace: "acme",
        project: "web",
        slug: "x",
        rollout: { maxSurge: "0", maxUnavailable: "0%" },
      }),
      Code.InvalidArgument,
      /^rollout\.max_unavailable: /,
    );
    await expectCode(
      e.createEnvironment({ workspace: "acme", project: "web", slug: "x", rollout: { maxSurge: "150%" } }),
      Code.InvalidArgument,
      /^rollout\.max_surge: /,
    );
    await expectCode(
      e.createEnvironment({
        workspace: "acme",
        project: "web",
        slug: "x",
        rollout: { strategy: 7 as RolloutStrategy },
      }),
      Code.InvalidArgument,
      /^rollout\.strategy: /,
    );
    await expectCode(
      e.createEnvironment({ workspace: "acme", project: "web", slug: "x", regions: [{ region: "mars", replicas: 1 }] }),
      Code.FailedPrecondition,
      /mars/,
    );
    // Nothing was half-applied by the refused requests.
    const list = await d.listDeployments({ workspace: "acme" });
    assert.equal(list.deployments.length, 0);
    const envs = await e.listEnvironments({ workspace: "acme", project: "web" });
    assert.deepEqual(
      envs.environments.map((x) => x.slug),
      ["prod"],
    );
    const eu = ctrl.client(ClusterService, euToken);
    await expectCode(eu.reportDeploymentStatus({ region: "eu" }), Code.InvalidArgument, /^change: /);
    await expectCode(
      eu.getDesiredDeploymentState({ region: "eu", deploymentId: "nope" }),
      Code.InvalidArgument,
      /^deployment_id: /,
    );
  });

  it("random input to the public API never yields Internal or hurts the server", async () => {
    const text = fc.oneof(
      fc.string({ maxLength: 80 }),
      fc.constantFrom("", "acme", "web", "prod", "eu", "app:1", "ws_", "dep_abc", "-a", "a".repeat(300)),
      fc.string({ unit: "grapheme", maxLength: 20 }),
    );
    const i32 = fc.oneof(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), fc.integer({ min: -2, max: 70_000 }));
    const i64 = fc.oneof(
      fc.bigInt({ min: -(1n << 63n), max: (1n << 63n) - 1n }),
      fc.bigInt({ min: -5n, max: 300_000n }),
    );
    const d = ctrl.client(DeploymentService, ctrl.adminToken);
    const e = ctrl.client(EnvironmentService, ctrl.adminToken);
    const w = ctrl.client(WorkspaceService, ctrl.adminToken);
    const p = ctrl.client(ProjectService, ctrl.adminToken);
    const r = ctrl.client(RegionService, ctrl.adminToken);
    const s = ctrl.client(StatusService, ctrl.adminToken);
    const a = ctrl.client(ApiTokenService, ctrl.adminToken);
    // UpdateEnvironment, RevokeApiToken and RevokeClusterToken are fuzzed away from what the tests
    // after this one rely on: environment "prod" and regions eu/us stay as they are, the admin
    // token is never offered for revocation (spare ones are), and eu's agent token is issued
    // again below (CreateClusterToken and RevokeClusterToken may well hit eu/default).
    await r.createRegion({ name: "fz1" });
    await r.createRegion({ name: "fz2" });
    await e.createEnvironment({
      workspace: "acme",
      project: "web",
      slug: "fuzz",
      regions: [{ region: "fz1", replicas: 1 }],
    });
    const spareIds: string[] = [];
    for (const name of ["spare-a", "spare-b", "spare-c"])
      spareIds.push((await a.createApiToken({ name })).apiToken?.id ?? "");
    const awayFromProd = text.filter((t) => !["prod", "eu", "us"].includes(t));
    const opt = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> => fc.option(arb, { nil: undefined, freq: 2 });
    const usually = <T>(good: fc.Arbitrary<T>, any: fc.Arbitrary<T>): fc.Arbitrary<T> =>
      fc.oneof({ arbitrary: good, weight: 6 }, { arbitrary: any, weight: 1 });
    const mostly = <T>(value: T, other: fc.Arbitrary<T>): fc.Arbitrary<T> => usually(fc.constant(value), other);
    const fuzzRegion = usually(fc.constantFrom("fz1", "fz2"), awayFromProd);
    const call = fc.oneof(
      fc
        .record({
          workspace: fc.oneof(text, fc.constant("acme")),
          project: fc.oneof(text, fc.constant("web")),
          environment: fc.oneof(text, fc.constant("prod")),
          image: text,
          command: fc.array(text, { maxLength: 3 }),
          args: fc.array(text, { maxLength: 3 }),
          port: i32,
          env: fc.array(fc.record({ name: text, value: text }), { maxLength: 3 }),
          cpuMillicores: i64,
          memoryMib: i64,
          buildId: text,
          replicas: fc.option(i32, { nil: undefined }),
          healthCheck: fc.option(
            fc.record({
              method: text,
              path: text,
              intervalSeconds: i32,
              timeoutSeconds: i32,
              failureThreshold: i32,
              initialDelaySeconds: i32,
            }),
            { nil: undefined },
          ),
        })
        .map((req) => () => d.createDeployment(req)),
      fc
        .record({
          workspace: text,
          project: text,
          slug: text,
          regions: fc.array(fc.record({ region: fc.oneof(text, fc.constantFrom("eu", "us")), replicas: i32 }), {
            maxLength: 3,
          }),
          sentinel: fc.option(fc.record({ image: text, replicas: i32, cpuMillicores: i64, memoryMib: i64 }), {
            nil: undefined,
          }),
          rollout: fc.option(
            fc.record({
              strategy: fc.integer({ min: -1, max: 4 }),
              maxSurge: text,
              maxUnavailable: text,
              minReadySeconds: i32,
              progressDeadlineSeconds: i32,
              revisionHistoryLimit: fc.option(i32, { nil: undefined }),
              paused: fc.boolean(),
            }),
            { nil: undefined },
          ),
        })
        .map((req) => () => e.createEnvironment(req)),
      fc.record({ slug: text, name: text }).map((req) => () => w.createWorkspace(req)),
      fc.record({ workspace: text, slug: text, name: text }).map((req) => () => p.createProject(req)),
      fc.record({ deploymentId: text }).map((req) => () => d.getDeployment(req)),
      fc.record({ deploymentId: text }).map((req) => () => d.deleteDeployment(req)),
      fc.record({ workspace: text, project: text, environment: text }).map((req) => () => d.listDeployments(req)),
      fc.record({ workspace: text, project: text, environment: text }).map((req) => () => s.getEnvironmentStatus(req)),
      fc.record({ region: text, clusterName: text }).map((req) => () => r.createClusterToken(req)),
      {
        // Weighted, and mostly aimed at the real "fuzz" environment with small changes, so that
        // most calls get past the references to the store's checks and writes.
        weight: 4,
        arbitrary: fc
          .record({
            workspace: mostly("acme", text),
            project: mostly("web", text),
            environment: mostly("fuzz", awayFromProd),
            sentinel: opt(
              fc.record({
                image: opt(usually(fc.constantFrom("registry.example.com/s:1", "s:2"), text)),
                replicas: opt(usually(fc.integer({ min: 0, max: 3 }), i32)),
                cpuMillicores: opt(usually(fc.bigInt({ min: 10n, max: 500n }), i64)),
                memoryMib: opt(usually(fc.bigInt({ min: 16n, max: 512n }), i64)),
              }),
            ),
            removeSentinel: mostly(false, fc.constant(true)),
            rollout: opt(
              fc.record({
                strategy: opt(
                  usually(
                    fc.constantFrom(RolloutStrategy.ROLLING_UPDATE, RolloutStrategy.RECREATE),
                    fc.integer({ min: -1, max: 4 }),
                  ),
                ),
                maxSurge: opt(usually(fc.constantFrom("0", "1", "25%"), text)),
                maxUnavailable: opt(usually(fc.constantFrom("0", "1", "25%"), text)),
                minReadySeconds: opt(usually(fc.integer({ min: 0, max: 700 }), i32)),
                progressDeadlineSeconds: opt(usually(fc.integer({ min: 1, max: 700 }), i32)),
                revisionHistoryLimit: opt(usually(fc.integer({ min: 0, max: 10 }), i32)),
                paused: opt(fc.boolean()),
              }),
            ),
            regions: fc.array(
              fc.record({ region: fuzzRegion, replicas: usually(fc.integer({ min: 0, max: 5 }), i32) }),
              { maxLength: 2 },
            ),
            removeRegions: fc.array(fuzzRegion, { maxLength: 1 }),
          })
          .map((req) => () => e.updateEnvironment(req)),
      },
      fc.record({ name: text }).map((req) => () => a.createApiToken(req)),
      fc.record({ tokenId: fc.oneof(text, fc.constantFrom(...spareIds)) }).map((req) => () => a.revokeApiToken(req)),
      fc
        .record({ region: fc.oneof(text, fc.constant("fz1")), clusterName: text })
        .map((req) => () => r.revokeClusterToken(req)),
    );
    // Whatever the updates did, the "fuzz" environment has a desired sentinel with its current
    // settings in each of its regions when it has sentinel settings, and none otherwise.
    const fuzzEnvironmentConsistent = async (): Promise<void> => {
      const env = (await e.getEnvironment({ workspace: "acme", project: "web", environment: "fuzz" })).environment;
      assert.ok(env);
      const db = ctrl.store.db;
      const sentinels = await db
        .selectFrom("sentinels")
        .select(["id", "region"])
        .where("environment_id", "=", env.id)
        .orderBy("region")
        .execute();
      assert.deepEqual(
        sentinels.map((x) => x.region),
        env.sentinel ? env.regions.map((x) => x.region) : [],
      );
      // In any region: the fuzzer may join it to regions other fuzzed calls registered.
      const desired = (
        await db
          .selectFrom("desired_objects")
          .select(["region", "object_id", "payload"])
          .where("kind", "=", "sentinel")
          .orderBy("region")
          .execute()
      )
        .map((o) => ({ ...o, apply: fromBinary(ApplySentinelSchema, o.payload) }))
        .filter((o) => o.apply.environmentId === env.id);
      assert.deepEqual(
        desired.map((o) => [o.region, o.object_id]),
        sentinels.map((x) => [x.region, x.id]),
      );
      for (const { apply } of desired) {
        assert.deepEqual(
          [apply.image, apply.replicas, apply.cpuMillicores, apply.memoryMib],
          [env.sentinel?.image, env.sentinel?.replicas, env.sentinel?.cpuMillicores, env.sentinel?.memoryMib],
        );
      }
    };
    const allowed = new Set([Code.InvalidArgument, Code.NotFound, Code.AlreadyExists, Code.FailedPrecondition]);
    await fc.assert(
      fc.asyncProperty(call, async (f) => {
        try {
          await f();
        } catch (err) {
          const c = codeOf(err);
          assert.ok(allowed.has(c), `unexpected ${Code[c]}: ${ConnectError.from(err).rawMessage}`);
          if (c === Code.InvalidArgument)
            assert.match(ConnectError.from(err).rawMessage, /^[a-z_]+(\[\d+\])?(\.[a-z_]+)*: /);
        }
        await fuzzEnvironmentConsistent();
      }),
      { numRuns: 300 },
    );
    // Still serving.
    await w.listWorkspaces({});
    euToken = await ctrl.agentToken("eu");
  });

  it("a standard gRPC client can call ClusterService", async () => {
    const grpc = ctrl.client(ClusterService, euToken, "grpc");
    await grpc.heartbeat({ region: "eu", agentId: "grpc-agent", build: "v1" });
    const ac = new AbortController();
    const msgs = [];
    for await (const m of grpc.watchSentinels({ region: "eu", versionLastSeen: 0n }, { signal: ac.signal })) {
      msgs.push(m.state.case);
      if (m.state.case === "snapshotEnd") break;
    }
    assert.deepEqual(msgs, ["bookmark", "snapshotStart", "snapshotEnd"]);
    await expectCode(ctrl.client(ClusterService, null, "grpc").heartbeat({ region: "eu" }), Code.Unauthenticated);
    const clusters = await ctrl.client(RegionService, ctrl.adminToken).listClusters({ region: "eu" });
    assert.equal(clusters.clusters.find((c) => c.name === "default")?.agentId, "grpc-agent");
  });
});
