// Pure rendering of stored rows into the agent messages kept in desired_objects and the outbox.
// Kept free of I/O so that field coverage is easy to unit-test.
import { create, toBinary } from "@bufbuild/protobuf";
import {
  ApplyDeploymentSchema,
  ApplySentinelSchema,
  DeleteDeploymentSchema,
  DeleteSentinelSchema,
  EnvVarSchema,
  HealthCheckSchema,
  type ApplyDeployment,
  type ApplySentinel,
  type HealthCheck,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { DeploymentRow, EnvironmentRow, ProjectRow, SentinelRow, WorkspaceRow } from "./schema.js";

export interface StoredHealthCheck {
  method: string;
  path: string;
  intervalSeconds: number;
  timeoutSeconds: number;
  failureThreshold: number;
  initialDelaySeconds: number;
}

export interface StoredEnvVar {
  name: string;
  value: string;
}

export function parseJsonList<T>(text: string): T[] {
  const v: unknown = JSON.parse(text);
  return Array.isArray(v) ? (v as T[]) : [];
}

export function healthCheckFromRow(text: string | null): HealthCheck | undefined {
  if (text === null) return undefined;
  const h = JSON.parse(text) as StoredHealthCheck;
  return create(HealthCheckSchema, h);
}

export interface DeploymentContext {
  workspace: WorkspaceRow;
  project: ProjectRow;
  environment: EnvironmentRow;
  deployment: DeploymentRow;
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
  });
}

export function encodeApplyDeployment(msg: ApplyDeployment): Uint8Array {
  return toBinary(ApplyDeploymentSchema, msg);
}

export function encodeDeleteDeployment(workspace: WorkspaceRow, d: DeploymentRow): Uint8Array {
  return toBinary(
    DeleteDeploymentSchema,
    create(DeleteDeploymentSchema, { k8sNamespace: workspace.k8s_namespace, k8sName: d.k8s_name, deploymentId: d.id }),
  );
}

export function renderApplySentinel(environment: EnvironmentRow, s: SentinelRow): ApplySentinel {
  return create(ApplySentinelSchema, {
    workspaceId: s.workspace_id,
    projectId: s.project_id,
    environmentId: s.environment_id,
    sentinelId: s.id,
    k8sName: s.k8s_name,
    image: environment.sentinel_image ?? "",
    replicas: environment.sentinel_replicas,
    cpuMillicores: BigInt(environment.sentinel_cpu_millicores),
    memoryMib: BigInt(environment.sentinel_memory_mib),
    region: s.region,
  });
}

export function encodeApplySentinel(msg: ApplySentinel): Uint8Array {
  return toBinary(ApplySentinelSchema, msg);
}

export function encodeDeleteSentinel(s: SentinelRow): Uint8Array {
  return toBinary(DeleteSentinelSchema, create(DeleteSentinelSchema, { k8sName: s.k8s_name, sentinelId: s.id }));
}
