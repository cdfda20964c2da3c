// ctrl on a real PostgreSQL: two ctrl processes sharing one database serve each other's changes
// to agents (LISTEN/NOTIFY), and a stream survives the loss of the LISTEN connection.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { createClient } from "@connectrpc/connect";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { ClusterService, type DeploymentState } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { generateToken } from "../../../src/ctrl/domain/tokens.js";
import { loadDeploymentContext, removeFromRegion, setDesiredReplicas } from "../../../src/ctrl/domain/deployments.js";
import { Store } from "../../../src/ctrl/db/store.js";
import { openDatabase } from "../../../src/ctrl/db/open.js";
import { LocalNotifier, NOTIFY_CHANNEL } from "../../../src/ctrl/db/notify.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { spawnCtrl, type CtrlProcess } from "./process.js";
import { startTestCtrl, transportFor, withoutBookmarks } from "./support.js";

async function next(it: AsyncIterator<DeploymentState>): Promise<DeploymentState> {
  const r = await it.next();
  if (r.done) throw new Error("stream ended");
  return r.value;
}

describe("ctrl on PostgreSQL", () => {
  let server: TestPostgres;
  before(async () => {
    server = await startPostgres();
  });
  after(async () => {
    await server.stop();
  });

  it("a change written through one ctrl process reaches a stream on another", async () => {
    const url = await server.newDatabase();
    const admin = generateToken("user");
    const procs: CtrlProcess[] = [];
    try {
      procs.push(await spawnCtrl(["--database", url, "--admin-token", admin]));
      procs.push(await spawnCtrl(["--database", url, "--admin-token", admin]));
      const [a, b] = procs as [CtrlProcess, CtrlProcess];
      const viaA = <S extends Parameters<typeof createClient>[0]>(s: S) => createClient(s, transportFor(a.url, admin));
      await viaA(RegionService).createRegion({ name: "eu" });
      await viaA(WorkspaceService).createWorkspace({ slug: "acme" });
      await viaA(ProjectService).createProject({ workspace: "acme", slug: "web" });
      // 0 replicas: each deployment is exactly one apply (the rollout driver has nothing to scale).
      await viaA(EnvironmentService).createEnvironment({
        workspace: "acme",
        project: "web",
        slug: "prod",
        regions: [{ region: "eu", replicas: 0 }],
      });
      const { token } = await viaA(RegionService).createClusterToken({ region: "eu" });

      // The agent talks to B only.
      const ac = new AbortController();
      const stream = withoutBookmarks(
        createClient(ClusterService, transportFor(b.url, token)).watchDeployments(
          { region: "eu", versionLastSeen: 0n },
          { signal: ac.signal },
        ),
      )[Symbol.asyncIterator]();
      assert.equal((await next(stream)).state.case, "snapshotStart");
      assert.equal((await next(stream)).state.case, "snapshotEnd");

      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const { deployment } = await viaA(DeploymentService).createDeployment({
          workspace: "acme",
          project: "web",
          environment: "prod",
          image: `app:${i}`,
        });
        ids.push(deployment?.id ?? "");
      }
      const got: [bigint, string][] = [];
      for (let i = 0; i < 3; i++) {
        const m = await next(stream);
        got.push([m.version, m.state.case === "apply" ? m.state.value.deploymentId : ""]);
      }
      assert.deepEqual(
        got,
        ids.map((id, i) => [BigInt(i + 1), id]),
      );
      ac.abort();
    } finally {
      for (const p of procs) assert.equal(await p.stop(), 0);
    }
  });

  it("a stream catches up after the LISTEN connection is lost", async () => {
    const url = await server.newDatabase();
    // No backstop polling: only notifications and the catch-up after reconnecting deliver.
    const ctrl = await startTestCtrl(url, { feedSafetyIntervalMs: 0 });
    try {
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: "eu" });
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "acme" });
      await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug: "web" });
      await ctrl.client(EnvironmentService, t).createEnvironment({
        workspace: "acme",
        project: "web",
        slug: "prod",
        regions: [{ region: "eu", replicas: 1 }],
      });
      const ac = new AbortController();
      const stream = withoutBookmarks(
        ctrl
          .client(ClusterService, await ctrl.agentToken("eu"))
          .watchDeployments({ region: "eu", versionLastSeen: 0n }, { signal: ac.signal }),
      )[Symbol.asyncIterator]();
      await next(stream);
      await next(stream);
      const { deployment } = await ctrl
        .client(DeploymentService, t)
        .createDeployment({ workspace: "acme", project: "web", environment: "prod", image: "app:1" });
      const id = deployment?.id ?? "";
      let m = await next(stream);
      while (!(m.state.case === "apply" && m.state.value.deploymentId === id)) m = await next(stream);

      // Kill the listener's backend, and at once commit a change through another store (as
      // another ctrl replica would, so no in-process poke helps): its notification is most
      // likely lost, and only the catch-up after reconnecting delivers it.
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      // A second writer on the same database that does not listen itself.
      const opened = await openDatabase({ url });
      await opened.notifier.close();
      const other = new Store(opened.db, opened.dialect, new LocalNotifier(), opened.close);
      try {
        const killed = await admin.query(
          // The outbox's listener only (the log relay LISTENs on a channel of its own).
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1 AND datname = current_database()",
          [`LISTEN ${NOTIFY_CHANNEL}`],
        );
        assert.equal(killed.rowCount, 1);
        const ctx = await loadDeploymentContext(other.db, id);
        await other.write((tx) => setDesiredReplicas(tx, ctx, "eu", 5));
        m = await next(stream);
        assert.equal(m.state.case === "apply" ? m.state.value.replicas : -1, 5);
        // And notifications flow again after the reconnect.
        await other.write((tx) => removeFromRegion(tx, ctx, "eu"));
        assert.equal((await next(stream)).state.case, "delete");
      } finally {
        await admin.end();
        await other.close();
      }
      ac.abort();
    } finally {
      await ctrl.close();
    }
  });
});
