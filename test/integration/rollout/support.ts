// Helpers for rollout integration tests against a real ctrl: an environment with a rollout
// policy, a fake agent that reports instances matching the desired sizes (ready or not, per
// image), and reads of the desired sizes.
import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  RolloutStrategy,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { ClusterService, InstanceSchema, InstanceStatus } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { RolloutService, type RegionRollout } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import type { TestCtrl } from "../ctrl/support.js";

export const REF = { workspace: "acme", project: "shop", environment: "production" };

export interface Policy {
  replicas: number;
  recreate?: boolean;
  maxSurge?: string;
  maxUnavailable?: string;
  progressDeadlineSeconds?: number;
  minReadySeconds?: number;
  revisionHistoryLimit?: number;
  /** A sentinel (krane's own image) in every region. */
  sentinel?: boolean;
  warmWindowSeconds?: number;
}

export async function setupEnvironment(ctrl: TestCtrl, region: string, p: Policy): Promise<void> {
  const admin = ctrl.adminToken;
  await ctrl.client(RegionService, admin).createRegion({ name: region });
  await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: REF.workspace });
  await ctrl.client(ProjectService, admin).createProject({ workspace: REF.workspace, slug: REF.project });
  await ctrl.client(EnvironmentService, admin).createEnvironment({
    workspace: REF.workspace,
    project: REF.project,
    slug: REF.environment,
    regions: [{ region, replicas: p.replicas }],
    rollout: {
      strategy: p.recreate ? RolloutStrategy.RECREATE : RolloutStrategy.ROLLING_UPDATE,
      maxSurge: p.maxSurge ?? "25%",
      maxUnavailable: p.maxUnavailable ?? "0",
      progressDeadlineSeconds: p.progressDeadlineSeconds ?? 600,
      minReadySeconds: p.minReadySeconds ?? 0,
      revisionHistoryLimit: p.revisionHistoryLimit ?? 10,
      ...(p.warmWindowSeconds !== undefined ? { warmWindowSeconds: p.warmWindowSeconds } : {}),
    },
    ...(p.sentinel ? { sentinel: {} } : {}),
  });
}

export async function deploy(ctrl: TestCtrl, image: string): Promise<{ id: string; k8sName: string }> {
  const { deployment } = await ctrl.client(DeploymentService, ctrl.adminToken).createDeployment({ ...REF, image });
  if (!deployment) throw new Error("no deployment");
  return { id: deployment.id, k8sName: deployment.k8sName };
}

export async function regionStatus(ctrl: TestCtrl, region: string, ref = REF): Promise<RegionRollout> {
  const { status } = await ctrl.client(RolloutService, ctrl.adminToken).getRolloutStatus(ref);
  const r = status?.regions.find((x) => x.region === region);
  if (!r) throw new Error(`no rollout status for ${region}`);
  return r;
}

/** Desired replicas per deployment id in the region. */
export async function sizes(ctrl: TestCtrl, region: string): Promise<Map<string, number>> {
  const r = await regionStatus(ctrl, region);
  return new Map(r.revisions.map((x) => [x.deploymentId, x.desiredReplicas]));
}

/**
 * A fake agent: reports, for every revision, exactly its desired number of instances, running
 * and ready (or pending for the images in `neverReady`). Returns whether anything differed from
 * what it reported last time.
 */
export class FakeAgent {
  private readonly last = new Map<string, number>();
  constructor(
    private readonly ctrl: TestCtrl,
    private readonly client: Client<typeof ClusterService>,
    private readonly region: string,
    private readonly neverReady: Set<string> = new Set(),
  ) {}

  static async start(ctrl: TestCtrl, region: string, neverReady: string[] = []): Promise<FakeAgent> {
    return new FakeAgent(ctrl, ctrl.client(ClusterService, await ctrl.agentToken(region)), region, new Set(neverReady));
  }

  async converge(ref = REF): Promise<boolean> {
    const r = await regionStatus(this.ctrl, this.region, ref);
    const { deployments } = await this.ctrl.client(DeploymentService, this.ctrl.adminToken).listDeployments(ref);
    let moved = false;
    for (const rev of r.revisions) {
      if (this.last.get(rev.deploymentId) === rev.desiredReplicas) continue;
      moved = true;
      this.last.set(rev.deploymentId, rev.desiredReplicas);
      const d = deployments.find((x) => x.id === rev.deploymentId);
      const ready = !this.neverReady.has(rev.image);
      const instances = Array.from({ length: rev.desiredReplicas }, (_, i) =>
        create(InstanceSchema, {
          k8sName: `${d?.k8sName ?? rev.deploymentId}-${i}`,
          address: `10.0.0.${i}:8080`,
          status: ready ? InstanceStatus.RUNNING : InstanceStatus.PENDING,
          readySinceUnixMs: ready ? BigInt(Date.now() - 60_000) : 0n,
        }),
      );
      await this.client.reportDeploymentStatus({
        region: this.region,
        change: { case: "update", value: { deploymentId: rev.deploymentId, k8sName: d?.k8sName ?? "", instances } },
      });
    }
    return moved;
  }
}
