// Actual state reported by agents: the instance set of a deployment in a region (each report
// replaces the previous set), rejections of desired state, and sentinel health.
import type { Kysely } from "kysely";
import { DomainError, notFound } from "../errors.js";
import type { Database, DeploymentRow, InstanceRow, SentinelRow } from "./schema.js";
import type { Store } from "./store.js";

type Reader = Kysely<Database>;

export type InstanceStatusName = "pending" | "running" | "failed" | "unknown";

export interface ReportedInstance {
  k8sName: string;
  address: string;
  status: InstanceStatusName;
  cpuMillicores: number;
  memoryMib: number;
  nodeName: string;
  zone: string;
  readySince: number;
}

export type DeploymentReport =
  | { type: "update"; deploymentId: string; k8sName: string; instances: ReportedInstance[] }
  | { type: "delete"; deploymentId: string; k8sName: string }
  | { type: "rejected"; deploymentId: string; k8sName: string; reason: string };

async function findDeploymentForReport(db: Reader, deploymentId: string, k8sName: string): Promise<DeploymentRow | undefined> {
  if (deploymentId !== "") return db.selectFrom("deployments").selectAll().where("id", "=", deploymentId).executeTakeFirst();
  return db.selectFrom("deployments").selectAll().where("k8s_name", "=", k8sName).executeTakeFirst();
}

export async function recordDeploymentReport(store: Store, region: string, report: DeploymentReport): Promise<void> {
  await store.write(async (tx) => {
    const d = await findDeploymentForReport(tx.trx, report.deploymentId, report.k8sName);
    if (!d) {
      // A delete of something already gone is the agent confirming what we want.
      if (report.type === "delete") return;
      throw notFound(`deployment "${report.deploymentId || report.k8sName}"`);
    }
    if (report.k8sName !== "" && report.k8sName !== d.k8s_name) {
      throw new DomainError("invalid_argument", `k8s_name: does not match deployment ${d.id}`, "k8s_name");
    }
    if (report.type === "rejected") {
      await tx.trx
        .insertInto("deployment_reports")
        .values({ deployment_id: d.id, region, rejected_reason: report.reason, reported_at: tx.now })
        .onConflict((oc) => oc.columns(["deployment_id", "region"]).doUpdateSet({ rejected_reason: report.reason, reported_at: tx.now }))
        .execute();
      return;
    }
    await tx.trx.deleteFrom("instances").where("deployment_id", "=", d.id).where("region", "=", region).execute();
    await tx.trx
      .insertInto("deployment_reports")
      .values({ deployment_id: d.id, region, rejected_reason: null, reported_at: tx.now })
      .onConflict((oc) => oc.columns(["deployment_id", "region"]).doUpdateSet({ rejected_reason: null, reported_at: tx.now }))
      .execute();
    if (report.type === "update" && report.instances.length > 0) {
      const seen = new Set<string>();
      const rows: InstanceRow[] = [];
      for (const i of report.instances) {
        if (seen.has(i.k8sName)) continue; // the last word on a duplicated pod name is ignored
        seen.add(i.k8sName);
        rows.push({
          deployment_id: d.id,
          region,
          k8s_name: i.k8sName,
          address: i.address,
          status: i.status,
          cpu_millicores: i.cpuMillicores,
          memory_mib: i.memoryMib,
          node_name: i.nodeName,
          zone: i.zone,
          ready_since: i.readySince,
          reported_at: tx.now,
        });
      }
      for (let k = 0; k < rows.length; k += 200) await tx.trx.insertInto("instances").values(rows.slice(k, k + 200)).execute();
    }
  });
}

export type HealthName = "unknown" | "healthy" | "unhealthy" | "paused";

export type SentinelReport =
  | { type: "update"; sentinelId: string; k8sName: string; availableReplicas: number; health: HealthName }
  | { type: "delete"; sentinelId: string; k8sName: string }
  | { type: "rejected"; sentinelId: string; k8sName: string; reason: string };

async function findSentinelForReport(db: Reader, sentinelId: string, k8sName: string): Promise<SentinelRow | undefined> {
  if (sentinelId !== "") return db.selectFrom("sentinels").selectAll().where("id", "=", sentinelId).executeTakeFirst();
  return db.selectFrom("sentinels").selectAll().where("k8s_name", "=", k8sName).executeTakeFirst();
}

export async function recordSentinelReport(store: Store, region: string, report: SentinelReport): Promise<void> {
  await store.write(async (tx) => {
    const s = await findSentinelForReport(tx.trx, report.sentinelId, report.k8sName);
    if (!s) {
      if (report.type === "delete") return;
      throw notFound(`sentinel "${report.sentinelId || report.k8sName}"`);
    }
    if (s.region !== region) throw new DomainError("permission_denied", `sentinel ${s.id} belongs to another region`);
    const patch =
      report.type === "update"
        ? { health: report.health, available_replicas: report.availableReplicas, rejected_reason: null, reported_at: tx.now }
        : report.type === "delete"
          ? { health: "unknown", available_replicas: 0, reported_at: tx.now }
          : { rejected_reason: report.reason, reported_at: tx.now };
    await tx.trx.updateTable("sentinels").set(patch).where("id", "=", s.id).execute();
  });
}
