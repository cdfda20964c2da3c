// Pure: whether a desired build (ApplyBuild) can run here; the reason (naming the field) if not.
import type { ApplyBuild } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { builderName } from "./pod.js";

export function validateApplyBuild(a: ApplyBuild): string | undefined {
  try {
    builderName(a.buildId);
  } catch (err) {
    return `build_id: ${(err as Error).message}`;
  }
  if (!/^sha256:[0-9a-f]{64}$/.test(a.sourceDigest)) return "source_digest: must be sha256:<64 hex digits>";
  if (a.registry === "" || a.repository === "" || a.tag === "") return "registry, repository and tag are required";
  if (a.image !== `${a.registry}/${a.repository}:${a.tag}`) return "image: must be <registry>/<repository>:<tag>";
  if (a.cpuMillicores < 100n) return "cpu_millicores: a build needs at least 100";
  if (a.memoryMib < 128n) return "memory_mib: a build needs at least 128";
  if (a.timeoutSeconds < 1n || a.timeoutSeconds > 86_400n) return "timeout_seconds: from 1 to 86400";
  if (a.maxSourceBytes < 1n) return "max_source_bytes: must be positive";
  return undefined;
}
