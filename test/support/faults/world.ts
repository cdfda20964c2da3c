// The system a fault scenario runs: a real local cluster, ctrl (in this process on SQLite or
// PostgreSQL, or any ctrl reachable by URL), one environment `acme/web/<env>` in one region, an
// admin view of the cluster straight from the API server (never through a fault), and the
// questions a scenario asks at its end: is the rollout complete, does the cluster hold exactly
// what ctrl desires, and how long did it take to get there.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { KubeConfig } from "@kubernetes/client-node";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { RolloutService } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { agentKubeConfigFrom } from "../../../src/agent/rbac.js";
import type { LocalCluster } from "../../../src/cluster/index.js";
import { KubeClient } from "../../../src/kube/client.js";
import { resources } from "../../../src/kube/resources.js";
import { LABEL_DEPLOYMENT_ID, LABEL_ENVIRONMENT_ID } from "../../../src/contracts/labels.js";
import { startTestCtrl, type TestCtrl } from "../../integration/ctrl/support.js";
import { specReplicas } from "./checks.js";
import { sleep } from "./processes.js";

export interface WorldOptions {
  readonly region?: string;
  readonly environment?: string;
  readonly replicas?: number;
  readonly maxSurge?: string;
  readonly maxUnavailable?: string;
  /** ctrl's database: a postgres:// URL, or SQLite in a temporary directory (default). */
  readonly database?: string;
}

export class World {
  readonly ref: { workspace: string; project: string; environment: string };
  readonly namespace = "ws-acme";
  environmentId = "";
  agentToken = "";
  agentKubeConfig: KubeConfig | undefined;
  readonly admin: KubeClient;
  readonly #dir: string;

  private constructor(
    readonly cluster: LocalCluster,
    readonly ctrl: TestCtrl,
    readonly region: string,
    dir: string,
  ) {
    this.ref = { workspace: "acme", project: "web", environment: "prod" };
    this.admin = new KubeClient(cluster.kubeConfig(), { fieldManager: "fault-test" });
    this.#dir = dir;
  }

  get dir(): string {
    return this.#dir;
  }

  static async start(cluster: LocalCluster, o: WorldOptions = {}): Promise<World> {
    const dir = mkdtempSync(join(tmpdir(), "krane-faults-"));
    const ctrl = await startTestCtrl(o.database ?? join(dir, "ctrl.db"), { shutdownGraceMs: 2000 });
    const w = new World(cluster, ctrl, o.region ?? "local", dir);
    (w.ref as { environment: string }).environment = o.environment ?? "prod";
    const t = ctrl.adminToken;
    await ctrl.client(RegionService, t).createRegion({ name: w.region });
    await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "acme" }).catch(ignoreExists);
    await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug: "web" }).catch(ignoreExists);
    const { environment } = await ctrl.client(EnvironmentService, t).createEnvironment({
      workspace: "acme",
      project: "web",
      slug: w.ref.environment,
      regions: [{ region: w.region, replicas: o.replicas ?? 4 }],
      rollout: { maxSurge: o.maxSurge ?? "1", maxUnavailable: o.maxUnavailable ?? "0", revisionHistoryLimit: 50 },
    });
    w.environmentId = environment?.id ?? "";
    w.agentToken = await ctrl.agentToken(w.region);
    w.agentKubeConfig = await agentKubeConfigFrom(cluster.kubeConfig());
    return w;
  }

  /** A new revision; resolves with its id. */
  async deploy(image: string, key?: string): Promise<string> {
    const { deployment } = await this.ctrl
      .client(DeploymentService, this.ctrl.adminToken)
      .createDeployment({ ...this.ref, image }, key ? { headers: { "idempotency-key": key } } : undefined);
    return deployment?.id ?? "";
  }

  async scale(replicas: number): Promise<void> {
    await this.ctrl.client(RolloutService, this.ctrl.adminToken).scale({ ...this.ref, region: this.region, replicas });
  }

  async rolloutComplete(): Promise<boolean> {
    const { status } = await this.ctrl.client(RolloutService, this.ctrl.adminToken).getRolloutStatus(this.ref);
    return !!status && status.regions.length > 0 && status.regions.every((r) => r.complete);
  }

  /** ctrl's desired replicas per deployment id in the region. */
  async desired(): Promise<Map<string, number>> {
    const rows = await this.ctrl.store.db
      .selectFrom("desired_objects")
      .select(["object_id", "replicas"])
      .where("region", "=", this.region)
      .where("kind", "=", "deployment")
      .execute();
    return new Map(rows.map((r) => [r.object_id, r.replicas ?? 0]));
  }

  /** The environment's ReplicaSets in the cluster: spec.replicas per deployment id (and how many per id). */
  async inCluster(): Promise<{ replicas: Map<string, number>; copies: Map<string, number> }> {
    const { items } = await this.admin.list(resources.replicaSets, {
      namespace: this.namespace,
      labelSelector: `${LABEL_ENVIRONMENT_ID}=${this.environmentId}`,
    });
    const replicas = new Map<string, number>();
    const copies = new Map<string, number>();
    for (const o of items) {
      const id = o.metadata.labels?.[LABEL_DEPLOYMENT_ID] ?? "";
      replicas.set(id, specReplicas(o));
      copies.set(id, (copies.get(id) ?? 0) + 1);
    }
    return { replicas, copies };
  }

  /** The cluster holds exactly what ctrl desires (every desired deployment, at its count, once). */
  async matches(): Promise<boolean> {
    const [want, have] = await Promise.all([this.desired(), this.inCluster()]);
    if ([...have.copies.values()].some((n) => n > 1)) return false;
    for (const [id, n] of want) if (have.replicas.get(id) !== n) return false;
    return true;
  }

  /** Waits until the rollout is complete and the cluster matches ctrl; the time it took (ms), or undefined. */
  async converged(timeoutMs: number): Promise<number | undefined> {
    const started = Date.now();
    for (;;) {
      const ok = await (async () => (await this.rolloutComplete()) && (await this.matches()))().catch(() => false);
      if (ok) return Date.now() - started;
      if (Date.now() - started > timeoutMs) return undefined;
      await sleep(50);
    }
  }

  async close(): Promise<void> {
    this.admin.close();
    await this.ctrl.close();
    rmSync(this.#dir, { recursive: true, force: true });
  }
}

function ignoreExists(err: unknown): void {
  if (ConnectError.from(err).code !== Code.AlreadyExists) throw err;
}
