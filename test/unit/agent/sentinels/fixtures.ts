// A valid ApplySentinel for tests, with every field set.
import { create } from "@bufbuild/protobuf";
import { ApplySentinelSchema, type ApplySentinel } from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";

export function sampleSentinel(overrides: Partial<Omit<ApplySentinel, "$typeName">> = {}): ApplySentinel {
  return create(ApplySentinelSchema, {
    workspaceId: "ws_1",
    projectId: "proj_1",
    environmentId: "env_1",
    sentinelId: "snt_1",
    k8sName: "snt-web-production-ab12cd34",
    image: "ghcr.io/krane/sentinel:1.0.0",
    replicas: 3,
    cpuMillicores: 250n,
    memoryMib: 256n,
    region: "local",
    ...overrides,
  });
}
