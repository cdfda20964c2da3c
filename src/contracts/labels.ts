// Labels are the contract between krane, the cluster and ctrl. Every managed object
// carries managed-by, component, region and the owning ids; agents list and collect only
// objects labelled with their own region. Both sides (ctrl, the agent's kinds, the sentinel,
// the admission fence) read these names from here and nowhere else.
import { POD_SECURITY_ENFORCE_LABEL, WORKSPACE_POD_SECURITY_LEVELS } from "./cluster.js";

export const LABEL_MANAGED_BY = "app.kubernetes.io/managed-by";
export const LABEL_COMPONENT = "app.kubernetes.io/component";
export const LABEL_REGION = "krane.dev/region";
export const LABEL_WORKSPACE_ID = "krane.dev/workspace-id";
export const LABEL_PROJECT_ID = "krane.dev/project-id";
export const LABEL_ENVIRONMENT_ID = "krane.dev/environment-id";
export const LABEL_DEPLOYMENT_ID = "krane.dev/deployment-id";
export const LABEL_BUILD_ID = "krane.dev/build-id";
export const LABEL_SENTINEL_ID = "krane.dev/sentinel-id";
/** The cron job a CronJob (and its Jobs and pods) belongs to. */
export const LABEL_JOB_ID = "krane.dev/job-id";
/** The gateway (an environment's exposure in a region) an HTTPRoute, Certificate or policy belongs to. */
export const LABEL_GATEWAY_ID = "krane.dev/gateway-id";
export const MANAGED_BY = "krane";

/** The value of LABEL_COMPONENT per kind of managed object. */
export const COMPONENT = {
  deployment: "deployment",
  sentinel: "sentinel",
  /** The routing table (contracts/routing.ts). */
  routing: "routing",
  /** An environment's cron jobs (CronJobs; their pods are labelled as deployment pods, see agent/jobs). */
  job: "job",
  /** Objects of a release (contracts/releases.ts). */
  release: "release",
  /** An environment's exposure: HTTPRoutes, Certificates, ReferenceGrants, gateway policies. */
  gateway: "gateway",
  /** A workspace namespace's pull Secret: its registry credentials (contracts/images.ts). */
  pullSecret: "pull-secret",
  /** A workspace namespace's ResourceQuota and LimitRange: its quota's backstop (agent/deployments/quota.ts). */
  quota: "quota",
  /** A source build's builder pod and its key's Secret (agent/builds), in BUILDS_NAMESPACE. */
  builder: "builder",
} as const;
export type Component = (typeof COMPONENT)[keyof typeof COMPONENT];

/**
 * An object of a whole workspace namespace (the pull Secret, the quota backstop). No region: every
 * region's agent on a cluster writes it. No workspace id either: the namespace is the workspace's,
 * and a namespace that outlived a deleted workspace is taken over by a new one of the same slug,
 * whose agent could not rewrite an object labelled with the old id (the fence keeps ownership
 * labels as they are, deploy/rbac/fence.yaml).
 */
export function workspaceObjectLabels(component: Component): Record<string, string> {
  return { [LABEL_MANAGED_BY]: MANAGED_BY, [LABEL_COMPONENT]: component };
}

/**
 * The labels that make a namespace a workspace namespace: the agent's fence
 * (deploy/rbac/fence.yaml) lets the agent write only in namespaces carrying all three (plus
 * `sentinel`), and lets it create no other namespace. The agent renders a workspace's namespace
 * with exactly these; Pod Security "baseline" is a second fence for the pods themselves.
 */
export function workspaceNamespaceLabels(workspaceId: string): Record<string, string> {
  return {
    [LABEL_MANAGED_BY]: MANAGED_BY,
    [LABEL_WORKSPACE_ID]: workspaceId,
    [POD_SECURITY_ENFORCE_LABEL]: "baseline",
  };
}

/** Whether a namespace's labels make it a workspace namespace (the fence's rule, in TypeScript). */
export function isWorkspaceNamespace(labels: Readonly<Record<string, string>> | undefined): boolean {
  const level = labels?.[POD_SECURITY_ENFORCE_LABEL] ?? "";
  return (
    labels?.[LABEL_MANAGED_BY] === MANAGED_BY &&
    (labels[LABEL_WORKSPACE_ID] ?? "") !== "" &&
    (WORKSPACE_POD_SECURITY_LEVELS as readonly string[]).includes(level)
  );
}

/**
 * The labels that say who owns a managed object. The fence refuses an update by the agent that
 * removes or changes any of them (moving an object to another tenant, region or component).
 */
export const OWNERSHIP_LABELS = [
  LABEL_COMPONENT,
  LABEL_REGION,
  LABEL_WORKSPACE_ID,
  LABEL_PROJECT_ID,
  LABEL_ENVIRONMENT_ID,
  LABEL_DEPLOYMENT_ID,
  LABEL_SENTINEL_ID,
  LABEL_GATEWAY_ID,
] as const;

/** Who an object belongs to: the tenant path every streamed kind carries. */
export interface Owner {
  readonly workspaceId: string;
  readonly projectId: string;
  readonly environmentId: string;
}

/**
 * The labels every object an agent writes carries: managed by krane, its component and region,
 * and its owner (workspace, project, environment). Kinds add their own id after these.
 */
export function ownerLabels(component: Component, region: string, o: Owner): Record<string, string> {
  return {
    [LABEL_MANAGED_BY]: MANAGED_BY,
    [LABEL_COMPONENT]: component,
    [LABEL_REGION]: region,
    [LABEL_WORKSPACE_ID]: o.workspaceId,
    [LABEL_PROJECT_ID]: o.projectId,
    [LABEL_ENVIRONMENT_ID]: o.environmentId,
  };
}

/** The selector of every object krane manages in one region (all components). */
export function regionSelector(region: string): string {
  return `${LABEL_MANAGED_BY}=${MANAGED_BY},${LABEL_REGION}=${region}`;
}

/** The selector of everything one component manages in one region. */
export function managedSelector(component: Component, region: string): string {
  return `${regionSelector(region)},${LABEL_COMPONENT}=${component}`;
}

const labelValueRe = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const dnsLabelRe = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export function isLabelValue(v: string): boolean {
  return v.length <= 63 && labelValueRe.test(v);
}

/** The first id (field, value) that is empty or not a valid label value, as a reason; undefined when all are. */
export function labelValueProblem(ids: readonly (readonly [field: string, value: string])[]): string | undefined {
  for (const [field, value] of ids)
    if (value === "" || !isLabelValue(value)) return `${field} "${value}" is not a valid Kubernetes label value`;
  return undefined;
}

export function isDnsLabel(v: string): boolean {
  return v.length > 0 && v.length <= 63 && dnsLabelRe.test(v);
}
