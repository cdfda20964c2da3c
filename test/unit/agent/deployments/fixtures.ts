// A valid ApplyDeployment for tests, with every field set.
import { create } from "@bufbuild/protobuf";
import { ApplyDeploymentSchema, type ApplyDeployment } from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";

export function sampleDeployment(overrides: Partial<Omit<ApplyDeployment, "$typeName">> = {}): ApplyDeployment {
  return create(ApplyDeploymentSchema, {
    workspaceId: "ws_1",
    projectId: "proj_1",
    environmentId: "env_1",
    deploymentId: "dep_1",
    k8sNamespace: "ws-1",
    k8sName: "dep-1",
    image: "ghcr.io/acme/web:1.2.3",
    command: ["/bin/web"],
    args: ["--listen", ":8080"],
    port: 8080,
    env: [{ name: "GREETING", value: "hello" }],
    replicas: 3,
    cpuMillicores: 500n,
    memoryMib: 256n,
    healthCheck: {
      method: "GET",
      path: "/health",
      intervalSeconds: 10,
      timeoutSeconds: 2,
      failureThreshold: 3,
      initialDelaySeconds: 5,
    },
    buildId: "build_9",
    region: "local",
    workspaceSlug: "acme",
    projectSlug: "web",
    environmentSlug: "production",
    revision: 7n,
    minReadySeconds: 15,
    config: { configMapName: "dep-1-config-0123456789", values: [{ name: "LOG_LEVEL", value: "debug" }] },
    secrets: { secretName: "dep-1-secrets-0123456789", keys: ["DB_PASSWORD"] },
    externalSecrets: {
      secretProviderClassName: "dep-1-external-0123456789",
      secrets: [{ key: "API_KEY", path: "secret/data/api#key" }],
    },
    pullSecret: { secretName: "krane-registry-credentials", version: "0123456789abcdef" },
    workspaceQuota: { cpuMillicores: 4000n, memoryMib: 4096n, instances: 10n },
    ...overrides,
  });
}
