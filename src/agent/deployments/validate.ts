// Validation of an ApplyDeployment before anything is applied (names, labels and namespaces as
// the cluster contract wants them; nothing half-applied). A refused deployment is reported to
// ctrl as Rejected with the first reason found, and the stream moves on.
import type { ApplyDeployment, DeleteDeployment } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { isReservedNamespace } from "../../contracts/cluster.js";
import { isDnsLabel, isLabelValue, labelValueProblem } from "../../contracts/labels.js";
import { APP_PROTOCOLS, isAppProtocol } from "../../contracts/protocols.js";
import { quotaProblem } from "./quota.js";

/** Env var names krane sets itself; the user's env may not redefine them. */
export function isReservedEnvName(name: string): boolean {
  return name === "PORT" || name.startsWith("KRANE_");
}

const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function objectName(what: string, name: string): string | undefined {
  return name.length <= 253 && DNS_SUBDOMAIN.test(name)
    ? undefined
    : `${what} "${name.slice(0, 80)}" is not a valid object name`;
}

/**
 * A revision's configuration, secret keys, external references and pull Secret (names valid,
 * keys environment variable names, external secrets only where this cluster has a store).
 */
export function validateSettings(
  d: Pick<ApplyDeployment, "config" | "secrets" | "externalSecrets" | "pullSecret">,
  externalStore: boolean,
): string | undefined {
  if (d.pullSecret) {
    const bad = objectName("pull_secret.secret_name", d.pullSecret.secretName);
    if (bad) return bad;
    if (d.pullSecret.version === "" || !isLabelValue(d.pullSecret.version))
      return `pull_secret.version "${d.pullSecret.version.slice(0, 80)}" is not a valid Kubernetes label value`;
  }
  if (d.config && d.config.values.length > 0) {
    const bad = objectName("config.config_map_name", d.config.configMapName);
    if (bad) return bad;
    for (const v of d.config.values)
      if (!ENV_KEY.test(v.name) || isReservedEnvName(v.name))
        return `config key "${v.name.slice(0, 80)}" is not a usable environment variable name`;
  }
  if (d.secrets && d.secrets.keys.length > 0) {
    const bad = objectName("secrets.secret_name", d.secrets.secretName);
    if (bad) return bad;
    for (const k of d.secrets.keys)
      if (!ENV_KEY.test(k) || isReservedEnvName(k))
        return `secret key "${k.slice(0, 80)}" is not a usable environment variable name`;
  }
  const ext = d.externalSecrets;
  if (ext && ext.secrets.length > 0) {
    if (!externalStore)
      return "the revision reads secrets from an external store, and this cluster has none configured (krane agent --secret-store-provider)";
    const bad = objectName("external_secrets.secret_provider_class_name", ext.secretProviderClassName);
    if (bad) return bad;
    for (const s of ext.secrets)
      if (!ENV_KEY.test(s.key) || isReservedEnvName(s.key))
        return `external secret key "${s.key.slice(0, 80)}" is not a usable environment variable name`;
  }
  return undefined;
}

/** What a deployment and a sentinel both run: an image in this agent's region at a size. */
export function workloadProblem(
  w: { image: string; region: string; replicas: number; cpuMillicores: bigint; memoryMib: bigint },
  agentRegion: string,
): string | undefined {
  if (/\s/.test(w.image)) return "image must not contain whitespace";
  if (w.region !== "" && w.region !== agentRegion) {
    return `region "${w.region}" does not match this agent's region "${agentRegion}"`;
  }
  if (w.replicas < 0) return `replicas must be >= 0 (got ${w.replicas})`;
  if (w.cpuMillicores <= 0n) return `cpu_millicores must be > 0 (got ${w.cpuMillicores})`;
  if (w.memoryMib <= 0n) return `memory_mib must be > 0 (got ${w.memoryMib})`;
  return undefined;
}

export function validateApplyDeployment(
  d: ApplyDeployment,
  agentRegion: string,
  externalStore = false,
): string | undefined {
  const required: Array<[string, string]> = [
    ["workspace_id", d.workspaceId],
    ["project_id", d.projectId],
    ["environment_id", d.environmentId],
    ["deployment_id", d.deploymentId],
    ["k8s_namespace", d.k8sNamespace],
    ["k8s_name", d.k8sName],
    ["image", d.image],
  ];
  for (const [field, value] of required) if (value.trim() === "") return `${field} is required`;
  const badId = labelValueProblem(required.slice(0, 4));
  if (badId !== undefined) return badId;
  if (d.buildId !== "" && !isLabelValue(d.buildId))
    return `build_id "${d.buildId}" is not a valid Kubernetes label value`;
  if (!isDnsLabel(d.k8sNamespace)) return `k8s_namespace "${d.k8sNamespace}" is not a valid DNS label`;
  if (isReservedNamespace(d.k8sNamespace)) return `k8s_namespace "${d.k8sNamespace}" is reserved`;
  if (!isDnsLabel(d.k8sName)) return `k8s_name "${d.k8sName}" is not a valid DNS label`;
  const workload = workloadProblem(d, agentRegion);
  if (workload !== undefined) return workload;
  if (d.port < 1 || d.port > 65535) return `port must be between 1 and 65535 (got ${d.port})`;
  if (d.minReadySeconds < 0) return `min_ready_seconds must be >= 0 (got ${d.minReadySeconds})`;
  // Empty: a ctrl that predates the field (HTTP/1.1).
  if (d.protocol !== "" && !isAppProtocol(d.protocol))
    return `protocol "${d.protocol.slice(0, 40)}" is not one of ${APP_PROTOCOLS.join(", ")}`;
  const names = new Set<string>();
  for (const e of d.env) {
    if (e.name === "" || e.name.includes("=") || /[\s\0]/.test(e.name)) return `env name "${e.name}" is invalid`;
    if (isReservedEnvName(e.name)) return `env name "${e.name}" is reserved by krane`;
    if (names.has(e.name)) return `env name "${e.name}" appears twice`;
    names.add(e.name);
  }
  const settings = validateSettings(d, externalStore) ?? quotaProblem(d.workspaceQuota);
  if (settings !== undefined) return settings;
  const hc = d.healthCheck;
  if (hc) {
    if (hc.method !== "" && hc.method !== "GET" && hc.method !== "POST")
      return `health_check.method "${hc.method}" must be GET or POST`;
    if (!hc.path.startsWith("/")) return `health_check.path "${hc.path}" must start with "/"`;
    for (const [field, v] of [
      ["interval_seconds", hc.intervalSeconds],
      ["timeout_seconds", hc.timeoutSeconds],
      ["failure_threshold", hc.failureThreshold],
      ["initial_delay_seconds", hc.initialDelaySeconds],
    ] as const) {
      if (v < 0) return `health_check.${field} must be >= 0 (got ${v})`;
    }
  }
  return undefined;
}

export function validateDeleteDeployment(d: DeleteDeployment): string | undefined {
  if (d.deploymentId === "") return "deployment_id is required";
  if (!isDnsLabel(d.k8sNamespace)) return `k8s_namespace "${d.k8sNamespace}" is not a valid DNS label`;
  if (!isDnsLabel(d.k8sName)) return `k8s_name "${d.k8sName}" is not a valid DNS label`;
  return undefined;
}
