// The deployment kind: a revision of an environment, desired per region at a replica count the
// rollout driver sets (desired_objects.replicas). This file is the kind's whole ctrl side: how
// its rows become the ApplyDeployment / DeleteDeployment messages agents get (pure, so field
// coverage is unit-tested), how its agents' reports are validated and recorded (the instance set
// of a deployment in a region, each report replacing the previous one, and rejections), and its
// ClusterService methods.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { Kysely } from "kysely";
import {
  ApplyDeploymentSchema,
  DeleteDeploymentSchema,
  DeploymentStateSchema,
  EnvVarSchema,
  ExternalSecretRefSchema,
  ExternalSecretsSchema,
  GetDesiredDeploymentStatesResponseSchema,
  RevisionConfigSchema,
  RevisionSecretsSchema,
  HealthCheckSchema,
  InstanceStatus,
  type ApplyDeployment,
  type HealthCheck,
  type ReportDeploymentStatusRequest,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import {
  parseJsonList,
  type Database,
  type DeploymentRow,
  type EnvironmentRow,
  type InstanceRow,
  type ProjectRow,
  type WorkspaceRow,
} from "../db/schema.js";
import type { Store } from "../db/store.js";
import { DomainError, invalidArgument, notFound } from "../errors.js";
import { revisionSettingsView } from "./revision-settings.js";
import { k8sName, rejectionReason, reportSubject } from "../validate/cluster.js";
import * as r from "../validate/rules.js";
import type { StoredEnvVar, StoredHealthCheck } from "../validate/types.js";
import type { Kind } from "./kind.js";

// ---------------------------------------------------------------- payload encoding

/** The rows an ApplyDeployment is rendered from. */
export interface DeploymentContext {
  workspace: WorkspaceRow;
  project: ProjectRow;
  environment: EnvironmentRow;
  deployment: DeploymentRow;
}

export function healthCheckFromRow(text: string | null): HealthCheck | undefined {
  if (text === null) return undefined;
  const h = JSON.parse(text) as StoredHealthCheck;
  return create(HealthCheckSchema, h);
}

export function renderApplyDeployment(ctx: DeploymentContext, region: string, replicas: number): ApplyDeployment {
  const { workspace, project, environment, deployment: d } = ctx;
  return create(ApplyDeploymentSchema, {
    workspaceId: workspace.id,
    projectId: project.id,
    environmentId: environment.id,
    deploymentId: d.id,
    k8sNamespace: workspace.k8s_namespace,
    k8sName: d.k8s_name,
    image: d.image,
    command: parseJsonList<string>(d.command),
    args: parseJsonList<string>(d.args),
    port: d.port,
    env: parseJsonList<StoredEnvVar>(d.env).map((e) => create(EnvVarSchema, e)),
    replicas,
    cpuMillicores: BigInt(d.cpu_millicores),
    memoryMib: BigInt(d.memory_mib),
    healthCheck: healthCheckFromRow(d.health_check),
    buildId: d.build_id,
    region,
    workspaceSlug: workspace.slug,
    projectSlug: project.slug,
    environmentSlug: environment.slug,
    revision: BigInt(d.revision),
    minReadySeconds: environment.min_ready_seconds,
    ...revisionSettingsMessages(d),
  });
}

/** A revision's configuration, secret keys and external references, as the agent gets them. */
export function revisionSettingsMessages(
  d: DeploymentRow,
): Pick<ApplyDeployment, "config" | "secrets" | "externalSecrets"> {
  const v = revisionSettingsView(d);
  return {
    config: v.config
      ? create(RevisionConfigSchema, {
          configMapName: v.config.name,
          values: v.config.values.map((e) => create(EnvVarSchema, e)),
        })
      : undefined,
    secrets: v.secrets
      ? create(RevisionSecretsSchema, { secretName: v.secrets.name, keys: v.secrets.keys })
      : undefined,
    externalSecrets: v.external
      ? create(ExternalSecretsSchema, {
          secretProviderClassName: v.external.name,
          secrets: v.external.refs.map((x) => create(ExternalSecretRefSchema, x)),
        })
      : undefined,
  };
}

/** The desired-state payload of a revision in a region at `replicas`. */
export function encodeApplyDeployment(ctx: DeploymentContext, region: string, replicas: number): Uint8Array {
  return toBinary(ApplyDeploymentSchema, renderApplyDeployment(ctx, region, replicas));
}

export function encodeDeleteDeployment(workspace: WorkspaceRow, d: DeploymentRow): Uint8Array {
  return toBinary(
    DeleteDeploymentSchema,
    create(DeleteDeploymentSchema, {
      k8sNamespace: workspace.k8s_namespace,
      k8sName: d.k8s_name,
      deploymentId: d.id,
      secretName: revisionSettingsView(d).secrets?.name ?? "",
    }),
  );
}

// ---------------------------------------------------------------- reports

export type InstanceStatusName = "pending" | "running" | "failed" | "terminating" | "unknown";

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

/** `id` may be empty: the agent then names the deployment by its `k8sName`. */
export type DeploymentReport =
  | { type: "update"; id: string; k8sName: string; instances: ReportedInstance[] }
  | { type: "delete"; id: string; k8sName: string }
  | { type: "rejected"; id: string; k8sName: string; reason: string };

function instanceStatus(field: string, s: InstanceStatus): InstanceStatusName {
  switch (s) {
    case InstanceStatus.PENDING:
      return "pending";
    case InstanceStatus.RUNNING:
      return "running";
    case InstanceStatus.FAILED:
      return "failed";
    case InstanceStatus.TERMINATING:
      return "terminating";
    case InstanceStatus.UNSPECIFIED:
      return "unknown";
    default:
      throw invalidArgument(field, "is not a known instance status");
  }
}

export function validateDeploymentReport(req: ReportDeploymentStatusRequest): DeploymentReport {
  const c = req.change;
  switch (c.case) {
    case "update": {
      const u = c.value;
      const subject = reportSubject("update", "deployment_id", "dep", { id: u.deploymentId, k8sName: u.k8sName });
      r.list("update.instances", u.instances, r.LIMITS.instancesMax);
      const instances = u.instances.map((i, n) => {
        const f = `update.instances[${n}]`;
        return {
          k8sName: k8sName(`${f}.k8s_name`, i.k8sName, true),
          address: r.text(`${f}.address`, i.address, r.LIMITS.shortTextMax),
          status: instanceStatus(`${f}.status`, i.status),
          cpuMillicores: r.intRange(`${f}.cpu_millicores`, i.cpuMillicores, 0, 10_000_000),
          memoryMib: r.intRange(`${f}.memory_mib`, i.memoryMib, 0, 100_000_000),
          nodeName: r.text(`${f}.node_name`, i.nodeName, r.LIMITS.shortTextMax),
          zone: r.text(`${f}.zone`, i.zone, r.LIMITS.shortTextMax),
          readySince: r.intRange(`${f}.ready_since_unix_ms`, i.readySinceUnixMs, 0, Number.MAX_SAFE_INTEGER),
        };
      });
      return { type: "update", ...subject, instances };
    }
    case "delete":
      return {
        type: "delete",
        ...reportSubject("delete", "deployment_id", "dep", { id: c.value.deploymentId, k8sName: c.value.k8sName }),
      };
    case "rejected": {
      const subject = reportSubject("rejected", "deployment_id", "dep", {
        id: c.value.deploymentId,
        k8sName: c.value.k8sName,
      });
      return { type: "rejected", ...subject, reason: rejectionReason("rejected.reason", c.value.reason) };
    }
    default:
      throw invalidArgument("change", "is required (update, delete or rejected)");
  }
}

async function findDeploymentForReport(
  db: Kysely<Database>,
  id: string,
  name: string,
): Promise<DeploymentRow | undefined> {
  if (id !== "") return db.selectFrom("deployments").selectAll().where("id", "=", id).executeTakeFirst();
  return db.selectFrom("deployments").selectAll().where("k8s_name", "=", name).executeTakeFirst();
}

export async function recordDeploymentReport(store: Store, region: string, report: DeploymentReport): Promise<void> {
  await store.write(async (tx) => {
    const d = await findDeploymentForReport(tx.trx, report.id, report.k8sName);
    if (!d) {
      // A delete of something already gone is the agent confirming what we want.
      if (report.type === "delete") return;
      throw notFound(`deployment "${report.id || report.k8sName}"`);
    }
    if (report.k8sName !== "" && report.k8sName !== d.k8s_name) {
      throw new DomainError("invalid_argument", `k8s_name: does not match deployment ${d.id}`, "k8s_name");
    }
    if (report.type === "rejected") {
      await tx.trx
        .insertInto("deployment_reports")
        .values({ deployment_id: d.id, region, rejected_reason: report.reason, reported_at: tx.now })
        .onConflict((oc) =>
          oc.columns(["deployment_id", "region"]).doUpdateSet({ rejected_reason: report.reason, reported_at: tx.now }),
        )
        .execute();
      return;
    }
    await tx.trx.deleteFrom("instances").where("deployment_id", "=", d.id).where("region", "=", region).execute();
    await tx.trx
      .insertInto("deployment_reports")
      .values({ deployment_id: d.id, region, rejected_reason: null, reported_at: tx.now })
      .onConflict((oc) =>
        oc.columns(["deployment_id", "region"]).doUpdateSet({ rejected_reason: null, reported_at: tx.now }),
      )
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
      for (let k = 0; k < rows.length; k += 200)
        await tx.trx
          .insertInto("instances")
          .values(rows.slice(k, k + 200))
          .execute();
    }
  });
}

// ---------------------------------------------------------------- descriptor

/** A DeleteDeployment from a stored ApplyDeployment (deleting an environment). */
export function deleteDeploymentFromApply(payload: Uint8Array): Uint8Array {
  const a = fromBinary(ApplyDeploymentSchema, payload);
  return toBinary(
    DeleteDeploymentSchema,
    create(DeleteDeploymentSchema, {
      k8sNamespace: a.k8sNamespace,
      k8sName: a.k8sName,
      deploymentId: a.deploymentId,
      secretName: a.secrets?.secretName ?? "",
    }),
  );
}

export const deploymentKind: Kind<typeof DeploymentStateSchema, DeploymentReport> = {
  name: "deployment",
  deletePayloadOf: deleteDeploymentFromApply,
  idPrefix: "dep",
  wire: { state: DeploymentStateSchema, apply: ApplyDeploymentSchema, delete: DeleteDeploymentSchema },
  recordReport: recordDeploymentReport,
  subject: (report) => ({ id: report.id, k8sName: report.k8sName }),
  methods: (h) => ({
    watchDeployments: (req, ctx) => h.watch(req, ctx),
    getDesiredDeploymentState: (req, ctx) => h.getOne(req, "deployment_id", req.deploymentId, ctx),
    getDesiredDeploymentStates: async (req, ctx) =>
      create(GetDesiredDeploymentStatesResponseSchema, await h.getMany(req, "deployment_ids", req.deploymentIds, ctx)),
    reportDeploymentStatus: async (req, ctx) => {
      await h.report(req, () => validateDeploymentReport(req), ctx);
      return {};
    },
  }),
};
