// Deployments for the agent benchmark: deployment i of N, ten per environment.
import { create } from "@bufbuild/protobuf";
import { ApplyDeploymentSchema, type ApplyDeployment } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";

/** What each sample pod requests (render.ts: half the 100m / 64 MiB limits). */
export const SAMPLE_POD_REQUEST = { cpuMillicores: 50, memoryMib: 32 };

export function sampleDeploymentInit(
  i: number,
  namespace: string,
  replicas: number,
): Omit<ApplyDeployment, "$typeName"> & { deploymentId: string } {
  const d = create(ApplyDeploymentSchema, {
    workspaceId: "ws_bench",
    projectId: "proj_bench",
    environmentId: `env_${Math.floor(i / 10)}`,
    deploymentId: `bench_${i}`,
    k8sNamespace: namespace,
    k8sName: `bench-${i}`,
    image: "ghcr.io/acme/web:1",
    port: 8080,
    env: [{ name: "GREETING", value: "hello" }],
    replicas,
    cpuMillicores: 100n,
    memoryMib: 64n,
    healthCheck: { method: "GET", path: "/healthz", intervalSeconds: 10, timeoutSeconds: 1, failureThreshold: 3 },
    region: "bench",
    revision: 1n,
  });
  const { $typeName: _t, ...rest } = d;
  return rest;
}
