// The build kind's payloads (`ctrl serve --builds-in cluster`): a running build handed to one
// region's builder pods. Pure: what the builder needs, nothing secret (the source and the push
// credential are asked for by build id, ../cluster-service/builds.ts).
import { create, toBinary } from "@bufbuild/protobuf";
import { ApplyBuildSchema, DeleteBuildSchema } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { KindPayloads } from "./kind.js";

export interface BuildHandoff {
  readonly buildId: string;
  readonly workspaceId: string;
  readonly projectId: string;
  readonly environmentId: string;
  readonly sourceDigest: string;
  readonly dockerfile: string | null;
  /** host:port */
  readonly registry: string;
  /** "<workspace slug>/<project slug>" */
  readonly repository: string;
  readonly registryCa: readonly string[];
  readonly cpuMillicores: number;
  readonly memoryMib: number;
  readonly timeoutMs: number;
  readonly timeLimitReason?: string;
  readonly maxSourceBytes: number;
}

/** The build's image name: its repository in the registry, tagged with the build's id. */
export function builtImageName(registry: string, repository: string, buildId: string): string {
  return `${registry}/${repository}:${buildId}`;
}

export function encodeApplyBuild(b: BuildHandoff): Uint8Array {
  return toBinary(
    ApplyBuildSchema,
    create(ApplyBuildSchema, {
      buildId: b.buildId,
      workspaceId: b.workspaceId,
      projectId: b.projectId,
      environmentId: b.environmentId,
      sourceDigest: b.sourceDigest,
      dockerfile: b.dockerfile ?? "",
      registry: b.registry,
      repository: b.repository,
      tag: b.buildId,
      image: builtImageName(b.registry, b.repository, b.buildId),
      registryCa: [...b.registryCa],
      cpuMillicores: BigInt(b.cpuMillicores),
      memoryMib: BigInt(b.memoryMib),
      // Whole seconds, never below one (the pod's activeDeadlineSeconds).
      timeoutSeconds: BigInt(Math.max(1, Math.ceil(b.timeoutMs / 1000))),
      timeLimitReason: b.timeLimitReason ?? "",
      maxSourceBytes: BigInt(b.maxSourceBytes),
    }),
  );
}

export function encodeDeleteBuild(buildId: string): Uint8Array {
  return toBinary(DeleteBuildSchema, create(DeleteBuildSchema, { buildId }));
}

export const buildPayloads: KindPayloads = {
  name: "build",
  apply: ApplyBuildSchema,
  delete: DeleteBuildSchema,
};
