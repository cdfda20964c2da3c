// The status read model of an environment: its deployments with desired replicas and reported
// instances per region, agent rejections, sentinel health, and the clusters of its regions.
import type { Kysely } from "kysely";
import type { ClusterRow, Database, InstanceRow, SentinelRow } from "../db/schema.js";
import type { DeploymentContext } from "../payloads/deployment.js";
import type { EnvironmentRef } from "../validate/types.js";
import { parseStoredPolicy, regionPolicy, type AutoscalePolicy } from "../../contracts/autoscaling.js";
import { autoscaleDecisions, type AutoscaleDecision } from "../domain/autoscale.js";
import { desiredReplicasOf } from "../domain/deployments.js";
import { environmentRegions } from "../domain/environments.js";
import { findEnvironment, type EnvironmentContext } from "../domain/tenancy.js";
import { listDeployments } from "./deployments.js";

type Reader = Kysely<Database>;

export interface RegionStatus {
  region: string;
  /** False when the revision is no longer desired in the region (only reports remain). */
  desired: boolean;
  desiredReplicas: number;
  rejectedReason: string | null;
  instances: InstanceRow[];
}

export interface DeploymentStatusView {
  deployment: DeploymentContext;
  regions: RegionStatus[];
}

/** Autoscaling in one region where a policy is in force: the policy and its agent's last decision. */
export interface RegionAutoscaleView {
  region: string;
  policy: AutoscalePolicy;
  /** Null until the region's agent reported one. */
  decision: AutoscaleDecision | null;
  /** The region's count now. */
  replicas: number;
}

export interface EnvironmentStatusView {
  environment: EnvironmentContext;
  regions: { region: string; replicas: number }[];
  autoscale: RegionAutoscaleView[];
  deployments: DeploymentStatusView[];
  sentinels: SentinelRow[];
  clusters: ClusterRow[];
}

export async function environmentStatus(db: Reader, ref: EnvironmentRef): Promise<EnvironmentStatusView> {
  const environment = await findEnvironment(db, ref);
  const envId = environment.environment.id;
  const regions = await environmentRegions(db, envId);
  const deployments = (
    await listDeployments(db, {
      workspace: environment.workspace.id,
      project: environment.project.id,
      environment: envId,
    })
  ).items;
  const ids = deployments.map((d) => d.deployment.id);

  const desired = await desiredReplicasOf(db, ids);
  const instances = ids.length
    ? await db.selectFrom("instances").selectAll().where("deployment_id", "in", ids).orderBy("k8s_name").execute()
    : [];
  const reports = ids.length
    ? await db.selectFrom("deployment_reports").selectAll().where("deployment_id", "in", ids).execute()
    : [];

  const views: DeploymentStatusView[] = deployments.map((d) => {
    const byRegion = new Map<string, RegionStatus>();
    const regionOf = (region: string): RegionStatus => {
      let r = byRegion.get(region);
      if (!r) {
        r = { region, desired: false, desiredReplicas: 0, rejectedReason: null, instances: [] };
        byRegion.set(region, r);
      }
      return r;
    };
    for (const [region, replicas] of desired) {
      const n = replicas.get(d.deployment.id);
      if (n === undefined) continue;
      const r = regionOf(region);
      r.desired = true;
      r.desiredReplicas = n;
    }
    for (const i of instances) if (i.deployment_id === d.deployment.id) regionOf(i.region).instances.push(i);
    for (const r of reports)
      if (r.deployment_id === d.deployment.id && r.rejected_reason !== null)
        regionOf(r.region).rejectedReason = r.rejected_reason;
    return { deployment: d, regions: [...byRegion.values()].sort((a, b) => a.region.localeCompare(b.region)) };
  });

  const sentinels = await db
    .selectFrom("sentinels")
    .selectAll()
    .where("environment_id", "=", envId)
    .orderBy("region")
    .execute();
  const regionNames = regions.map((r) => r.region);
  const clusters = regionNames.length
    ? await db
        .selectFrom("clusters")
        .selectAll()
        .where("region", "in", regionNames)
        .orderBy("region")
        .orderBy("name")
        .execute()
    : [];
  const envPolicy = parseStoredPolicy(environment.environment.autoscale);
  const overrides = new Map(
    regions.flatMap((r) =>
      r.autoscale === null ? [] : [[r.region, r.autoscale === "off" ? null : parseStoredPolicy(r.autoscale)] as const],
    ),
  );
  const decisions = new Map((await autoscaleDecisions(db, envId)).map((d) => [d.region, d]));
  const autoscale = regions.flatMap((r) => {
    const policy = regionPolicy(envPolicy, overrides, r.region);
    return policy === null
      ? []
      : [{ region: r.region, policy, decision: decisions.get(r.region) ?? null, replicas: r.replicas }];
  });
  return { environment, regions, autoscale, deployments: views, sentinels, clusters };
}
