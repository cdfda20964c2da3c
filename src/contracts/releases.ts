// Names the release controller (src/agent/releases) and ctrl's release validation
// (src/ctrl/validate/release.ts) share: the labels every release object carries, the field
// manager it is applied with, the platform's default allow-list of kinds, and kinds that are
// never namespaced (refused even when a platform allow-lists them).

/** The release an object belongs to (its id). */
export const LABEL_RELEASE_ID = "krane.dev/release-id";
/** A hash of the object's identity within the release (group/Kind/name). */
export const LABEL_RELEASE_OBJECT = "krane.dev/release-object";
/** The release version that last applied the object. */
export const LABEL_RELEASE_VERSION = "krane.dev/release-version";
/** Release objects are applied with server-side apply under this field manager. */
export const RELEASE_FIELD_MANAGER = "krane-release";

/** An allowed kind: its API group ("" for core) and Kind, any version. */
export interface AllowedKind {
  readonly group: string;
  readonly kind: string;
}

/** The default allow-list (a platform setting: ctrl's --release-allowed-kinds). */
export const DEFAULT_RELEASE_KINDS: readonly AllowedKind[] = [
  { group: "", kind: "ConfigMap" },
  { group: "", kind: "Secret" },
  { group: "", kind: "Service" },
  { group: "", kind: "ServiceAccount" },
  { group: "batch", kind: "Job" },
  { group: "batch", kind: "CronJob" },
  { group: "policy", kind: "PodDisruptionBudget" },
  { group: "autoscaling", kind: "HorizontalPodAutoscaler" },
];

/**
 * Kinds krane writes itself in a workspace's namespace (the quota backstop the agent renders from
 * the workspace's quota, src/agent/deployments/quota.ts): never in a release, whatever the
 * allow-list says, so a tenant cannot loosen or replace them.
 */
export const RESERVED_KINDS: readonly AllowedKind[] = [
  { group: "", kind: "ResourceQuota" },
  { group: "", kind: "LimitRange" },
];

/** Cluster-scoped kinds: never in a release, whatever the allow-list says. */
export const CLUSTER_SCOPED_KINDS: readonly AllowedKind[] = [
  { group: "", kind: "Namespace" },
  { group: "", kind: "Node" },
  { group: "", kind: "PersistentVolume" },
  { group: "rbac.authorization.k8s.io", kind: "ClusterRole" },
  { group: "rbac.authorization.k8s.io", kind: "ClusterRoleBinding" },
  { group: "apiextensions.k8s.io", kind: "CustomResourceDefinition" },
  { group: "storage.k8s.io", kind: "StorageClass" },
  { group: "scheduling.k8s.io", kind: "PriorityClass" },
  { group: "node.k8s.io", kind: "RuntimeClass" },
  { group: "admissionregistration.k8s.io", kind: "ValidatingWebhookConfiguration" },
  { group: "admissionregistration.k8s.io", kind: "MutatingWebhookConfiguration" },
  { group: "admissionregistration.k8s.io", kind: "ValidatingAdmissionPolicy" },
  { group: "admissionregistration.k8s.io", kind: "ValidatingAdmissionPolicyBinding" },
  { group: "certificates.k8s.io", kind: "CertificateSigningRequest" },
];

/** "group/Kind" ("Kind" for the core group), how allow-lists are written. */
export function kindName(k: AllowedKind): string {
  return k.group === "" ? k.kind : `${k.group}/${k.kind}`;
}

/** Parses "ConfigMap,batch/Job,policy/PodDisruptionBudget". */
export function parseAllowedKinds(text: string): AllowedKind[] {
  const out: AllowedKind[] = [];
  for (const part of text
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const i = part.lastIndexOf("/");
    const k = i < 0 ? { group: "", kind: part } : { group: part.slice(0, i), kind: part.slice(i + 1) };
    if (
      !/^[A-Z][A-Za-z0-9]*$/.test(k.kind) ||
      !/^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$/.test(k.group)
    ) {
      throw new Error(
        `release allowed kinds: "${part}" is not group/Kind (e.g. batch/Job, or ConfigMap for the core group)`,
      );
    }
    out.push(k);
  }
  return out;
}

export function sameKind(a: AllowedKind, b: AllowedKind): boolean {
  return a.group === b.group && a.kind === b.kind;
}
