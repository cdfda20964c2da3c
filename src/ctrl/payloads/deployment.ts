// The deployment kind's payloads: how a revision's rows become the ApplyDeployment /
// DeleteDeployment messages agents get, at the replica count the rollout driver set for a region
// (desired_objects.replicas). Pure, so field coverage is unit-tested.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  ApplyDeploymentSchema,
  DeleteDeploymentSchema,
  EnvVarSchema,
  ExternalSecretRefSchema,
  ExternalSecretsSchema,
  RevisionConfigSchema,
  RevisionSecretsSchema,
  HealthCheckSchema,
  PullSecretSchema,
  WorkspaceQuotaSchema,
  type ApplyDeployment,
  type HealthCheck,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import {
  parseJsonList,
  type DeploymentRow,
  type EnvironmentRow,
  type ProjectRow,
  type WorkspaceRow,
} from "../db/schema.js";
import { imageAsRun } from "../../contracts/images.js";
import type { Limits } from "../../contracts/quotas.js";
import type { StoredEnvVar, StoredHealthCheck } from "../validate/types.js";
import type { KindPayloads } from "./kind.js";
import { revisionSettingsView } from "./revision-settings.js";

/** The workspace's quota as the agent backs it (src/agent/deployments/quota.ts); unlimited ones absent. */
export function workspaceQuotaMessage(limits: Limits): Pick<ApplyDeployment, "workspaceQuota"> {
  const n = (v: number | null): bigint | undefined => (v === null ? undefined : BigInt(v));
  return {
    workspaceQuota: create(WorkspaceQuotaSchema, {
      cpuMillicores: n(limits.cpu),
      memoryMib: n(limits.memory),
      instances: n(limits.instances),
    }),
  };
}

/** A workspace's pull Secret as payloads name it (../domain/registries.ts: pullSecretOf). */
export interface PullSecretRef {
  readonly secretName: string;
  readonly version: string;
}

/** The pull Secret field of an ApplyDeployment or ApplyJob; absent without credentials. */
export function pullSecretMessage(ref: PullSecretRef | undefined): Pick<ApplyDeployment, "pullSecret"> {
  return { pullSecret: ref ? create(PullSecretSchema, ref) : undefined };
}

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

/** What a revision runs, as the agent's ApplyDeployment and the API's Deployment both carry it. */
export function revisionWorkload(
  d: DeploymentRow,
): Pick<
  ApplyDeployment,
  | "k8sName"
  | "revision"
  | "image"
  | "command"
  | "args"
  | "port"
  | "protocol"
  | "env"
  | "cpuMillicores"
  | "memoryMib"
  | "healthCheck"
  | "buildId"
> {
  return {
    k8sName: d.k8s_name,
    revision: BigInt(d.revision),
    image: d.image,
    command: parseJsonList<string>(d.command),
    args: parseJsonList<string>(d.args),
    port: d.port,
    protocol: d.protocol,
    env: parseJsonList<StoredEnvVar>(d.env).map((e) => create(EnvVarSchema, e)),
    cpuMillicores: BigInt(d.cpu_millicores),
    memoryMib: BigInt(d.memory_mib),
    healthCheck: healthCheckFromRow(d.health_check),
    buildId: d.build_id,
  };
}

export function renderApplyDeployment(
  ctx: DeploymentContext,
  region: string,
  replicas: number,
  pullSecret?: PullSecretRef,
  quota?: Limits,
): ApplyDeployment {
  const { workspace, project, environment, deployment: d } = ctx;
  return create(ApplyDeploymentSchema, {
    workspaceId: workspace.id,
    projectId: project.id,
    environmentId: environment.id,
    deploymentId: d.id,
    k8sNamespace: workspace.k8s_namespace,
    ...revisionWorkload(d),
    // Pinned: every instance, in every region and at any time, runs the bytes resolved at deploy.
    image: imageAsRun(d.image, d.image_digest),
    replicas,
    region,
    workspaceSlug: workspace.slug,
    projectSlug: project.slug,
    environmentSlug: environment.slug,
    minReadySeconds: environment.min_ready_seconds,
    ...revisionSettingsMessages(d),
    ...pullSecretMessage(pullSecret),
    ...(quota ? workspaceQuotaMessage(quota) : {}),
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
export function encodeApplyDeployment(
  ctx: DeploymentContext,
  region: string,
  replicas: number,
  pullSecret?: PullSecretRef,
  quota?: Limits,
): Uint8Array {
  return toBinary(ApplyDeploymentSchema, renderApplyDeployment(ctx, region, replicas, pullSecret, quota));
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

export const deploymentPayloads: KindPayloads = {
  name: "deployment",
  apply: ApplyDeploymentSchema,
  delete: DeleteDeploymentSchema,
  deletePayloadOf: deleteDeploymentFromApply,
};
