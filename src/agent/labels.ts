// Labels are the contract between krane, the cluster and ctrl (DESIGN §4). Every managed object
// carries managed-by, component, region and the owning ids; agents list and collect only
// objects labelled with their own region.
export const LABEL_MANAGED_BY = "app.kubernetes.io/managed-by";
export const LABEL_COMPONENT = "app.kubernetes.io/component";
export const LABEL_REGION = "krane.dev/region";
export const LABEL_WORKSPACE_ID = "krane.dev/workspace-id";
export const LABEL_PROJECT_ID = "krane.dev/project-id";
export const LABEL_ENVIRONMENT_ID = "krane.dev/environment-id";
export const LABEL_DEPLOYMENT_ID = "krane.dev/deployment-id";
export const LABEL_BUILD_ID = "krane.dev/build-id";
export const LABEL_SENTINEL_ID = "krane.dev/sentinel-id";
export const MANAGED_BY = "krane";

export const ZONE_LABEL = "topology.kubernetes.io/zone";
export const NODE_CLASS_LABEL = "node-class";

/** The selector of everything one controller manages in one region. */
export function managedSelector(component: string, region: string): string {
  return `${LABEL_MANAGED_BY}=${MANAGED_BY},${LABEL_COMPONENT}=${component},${LABEL_REGION}=${region}`;
}

const labelValueRe = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const dnsLabelRe = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export function isLabelValue(v: string): boolean {
  return v.length <= 63 && labelValueRe.test(v);
}

export function isDnsLabel(v: string): boolean {
  return v.length > 0 && v.length <= 63 && dnsLabelRe.test(v);
}
