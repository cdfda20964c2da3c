// `krane agent` configuration: flags > KRANE_* environment variables > YAML config file >
// defaults. Pure (inputs in, config or a list of problems out) so precedence is unit-tested.
import { parse } from "yaml";
import type { GatewayRef, GatewaySettings } from "./gateways/settings.js";
import { parseAddressMapping } from "../contracts/address-map.js";
import { AGENT_NAMESPACE } from "../contracts/cluster.js";
import { LOCAL_BUILDER_IMAGE } from "../contracts/builds.js";
import type { BuilderSettings } from "./builds/run.js";

export interface AgentSettings {
  ctrlUrl: string;
  token: string;
  region: string;
  kubeconfig?: string;
  concurrency: number;
  resyncPeriodSeconds: number;
  kubeQps: number;
  opsPort: number;
  agentId?: string;
  logLevel: string;
  /** The image of krane's own sentinel (environments that name no sentinel image). */
  sentinelImage?: string;
  /** Elect a leader among several replicas with a Lease ("true"/"false"). */
  leaderElect: boolean;
  leaderElectionNamespace: string;
  /** The Secrets Store CSI provider of this cluster ("" or unset: none). */
  secretStoreProvider?: string;
  /** Its parameters, "k=v,k=v" (e.g. vaultAddress=https://vault:8200,roleName=krane). */
  secretStoreParameters?: string;
  /** Exposure: "namespace/name[/listener]" of the platform's Gateways. */
  publicGateway?: string;
  organizationGateway?: string;
  /** "ClusterIssuer/name" or "Issuer/name" (cert-manager). */
  certificateIssuer?: string;
  endpointCertificates: boolean;
  /** GatewayClass of the per-environment Gateways that serve the certificates over HTTPS (unset: none). */
  httpsGatewayClass?: string;
  /** Port of their HTTPS listeners. */
  httpsPort: number;
  /** Remove the SecurityPolicies earlier versions rendered on Envoy Gateway (they render none now). */
  envoyGatewayPolicies: boolean;
  /** Local cluster only: where pod IPs are served on this machine. */
  podAddressMap?: string;
  /** Seconds between collections of the sentinels' metrics for rollout analysis (0: off). */
  measureIntervalSeconds: number;
  /** Seconds ctrl has to accept a stream and to answer an HTTP/2 PING (PINGs after twice this without data). */
  ctrlTimeoutSeconds: number;
  /** A starting instance's CPU limit until it is Ready, in millicores (0: no startup boost). */
  startupCpuBoostMillicores: number;
  /** Builds from source run at once in builder pods (0: the build kind does not run). */
  builds: number;
  /** buildctl, the base images' OCI layout and the builder image, for those builds. */
  buildctl?: string;
  buildBases?: string;
  builderImage?: string;
}

type Raw = Partial<Record<keyof AgentSettings, string | number | boolean | undefined>>;

const envNames: Record<keyof AgentSettings, string> = {
  ctrlUrl: "KRANE_CTRL_URL",
  token: "KRANE_CTRL_TOKEN",
  region: "KRANE_REGION",
  kubeconfig: "KRANE_KUBECONFIG",
  concurrency: "KRANE_AGENT_CONCURRENCY",
  resyncPeriodSeconds: "KRANE_RESYNC_PERIOD_SECONDS",
  kubeQps: "KRANE_KUBE_QPS",
  opsPort: "KRANE_OPS_PORT",
  agentId: "KRANE_AGENT_ID",
  logLevel: "KRANE_LOG_LEVEL",
  sentinelImage: "KRANE_SENTINEL_IMAGE",
  leaderElect: "KRANE_LEADER_ELECT",
  leaderElectionNamespace: "KRANE_LEADER_ELECTION_NAMESPACE",
  secretStoreProvider: "KRANE_SECRET_STORE_PROVIDER",
  secretStoreParameters: "KRANE_SECRET_STORE_PARAMETERS",
  publicGateway: "KRANE_PUBLIC_GATEWAY",
  organizationGateway: "KRANE_ORGANIZATION_GATEWAY",
  certificateIssuer: "KRANE_CERTIFICATE_ISSUER",
  endpointCertificates: "KRANE_ENDPOINT_CERTIFICATES",
  httpsGatewayClass: "KRANE_HTTPS_GATEWAY_CLASS",
  httpsPort: "KRANE_HTTPS_PORT",
  envoyGatewayPolicies: "KRANE_ENVOY_GATEWAY_POLICIES",
  podAddressMap: "KRANE_POD_ADDRESS_MAP",
  measureIntervalSeconds: "KRANE_MEASURE_INTERVAL_SECONDS",
  ctrlTimeoutSeconds: "KRANE_CTRL_TIMEOUT_SECONDS",
  startupCpuBoostMillicores: "KRANE_STARTUP_CPU_BOOST_MILLICORES",
  builds: "KRANE_BUILDS",
  buildctl: "KRANE_BUILDCTL",
  buildBases: "KRANE_BUILD_BASES",
  builderImage: "KRANE_BUILDER_IMAGE",
};

const defaults: Raw = {
  concurrency: 16,
  resyncPeriodSeconds: 60,
  kubeQps: 100,
  opsPort: 8071,
  logLevel: "info",
  leaderElect: false,
  leaderElectionNamespace: AGENT_NAMESPACE,
  measureIntervalSeconds: 10,
  ctrlTimeoutSeconds: 5,
  httpsPort: 443,
  startupCpuBoostMillicores: 1_000,
  builds: 0,
};

const LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** "namespace/name[/listener]" → a Gateway reference, or undefined when malformed. */
export function parseGatewayRef(v: string): GatewayRef | undefined {
  const parts = v.split("/");
  if (parts.length < 2 || parts.length > 3 || !parts.every((p) => LABEL.test(p))) return undefined;
  return { namespace: parts[0] ?? "", name: parts[1] ?? "", sectionName: parts[2] ?? "" };
}

export function parseIssuer(v: string): GatewaySettings["certificateIssuer"] {
  const m = /^(ClusterIssuer|Issuer)\/([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)$/.exec(v);
  return m ? { kind: m[1] as "Issuer" | "ClusterIssuer", name: m[2] ?? "" } : undefined;
}

/** The gateway kind's settings, or undefined when no Gateway is configured. */
export function gatewaySettingsOf(s: AgentSettings): GatewaySettings | undefined {
  const pub = s.publicGateway === undefined ? undefined : parseGatewayRef(s.publicGateway);
  const org = s.organizationGateway === undefined ? undefined : parseGatewayRef(s.organizationGateway);
  if (!pub && !org) return undefined;
  return {
    public: pub,
    organization: org,
    certificateIssuer: s.certificateIssuer === undefined ? undefined : parseIssuer(s.certificateIssuer),
    endpointCertificates: s.endpointCertificates,
    https:
      s.httpsGatewayClass === undefined || s.certificateIssuer === undefined
        ? undefined
        : { className: s.httpsGatewayClass, port: s.httpsPort },
    removeSecurityPolicies: s.envoyGatewayPolicies,
  };
}

/** The build kind's settings, or undefined when this agent runs no builds. */
export function builderSettingsOf(s: AgentSettings): BuilderSettings | undefined {
  if (s.builds === 0) return undefined;
  return {
    maxBuilds: s.builds,
    buildctl: s.buildctl ?? "buildctl",
    basesLayout: s.buildBases ?? "",
    builderImage: s.builderImage ?? LOCAL_BUILDER_IMAGE,
  };
}

/** Reads the YAML config file's keys (camelCase or kebab-case). */
export function parseConfigFile(text: string): Raw {
  const doc: unknown = parse(text);
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== "object" || Array.isArray(doc)) throw new Error("agent config file must be a YAML mapping");
  const out: Raw = {};
  for (const [k, v] of Object.entries(doc as Record<string, unknown>)) {
    const key = k.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase()) as keyof AgentSettings;
    if (!(key in envNames)) throw new Error(`agent config file: unknown key "${k}"`);
    if (typeof v !== "string" && typeof v !== "number" && typeof v !== "boolean")
      throw new Error(`agent config file: "${k}" must be a string, number or boolean`);
    out[key] = v;
  }
  return out;
}

export function resolveAgentSettings(
  flags: Raw,
  env: Record<string, string | undefined>,
  file: Raw,
): { settings?: AgentSettings; problems: string[] } {
  const pick = (k: keyof AgentSettings): string | number | boolean | undefined => {
    const e = env[envNames[k]];
    return flags[k] ?? (e !== undefined && e !== "" ? e : undefined) ?? file[k] ?? defaults[k];
  };
  const problems: string[] = [];
  const str = (k: keyof AgentSettings, required: boolean): string | undefined => {
    const v = pick(k);
    if (v === undefined || v === "") {
      if (required) problems.push(`${k} is required (flag, ${envNames[k]} or config file)`);
      return undefined;
    }
    return String(v);
  };
  const int = (k: keyof AgentSettings, min: number, max: number): number => {
    const n = Number(pick(k));
    if (!Number.isInteger(n) || n < min || n > max) problems.push(`${k} must be an integer between ${min} and ${max}`);
    return n;
  };
  const seconds = (k: keyof AgentSettings, min: number, max: number): number => {
    const n = Number(pick(k));
    if (!(n >= min && n <= max)) problems.push(`${k} must be a number of seconds between ${min} and ${max}`);
    return n;
  };
  const bool = (k: keyof AgentSettings): boolean => {
    const v = pick(k);
    if (v === true || v === "true" || v === "1") return true;
    if (v === false || v === undefined || v === "false" || v === "0") return false;
    problems.push(`${k} must be true or false`);
    return false;
  };
  const settings: AgentSettings = {
    ctrlUrl: str("ctrlUrl", true) ?? "",
    token: str("token", true) ?? "",
    region: str("region", true) ?? "",
    kubeconfig: str("kubeconfig", false) ?? env.KUBECONFIG,
    concurrency: int("concurrency", 1, 1024),
    resyncPeriodSeconds: int("resyncPeriodSeconds", 1, 86_400),
    kubeQps: int("kubeQps", 1, 100_000),
    opsPort: int("opsPort", 0, 65_535),
    agentId: str("agentId", false),
    logLevel: str("logLevel", false) ?? "info",
    sentinelImage: str("sentinelImage", false),
    leaderElect: bool("leaderElect"),
    leaderElectionNamespace: str("leaderElectionNamespace", false) ?? AGENT_NAMESPACE,
    secretStoreProvider: str("secretStoreProvider", false),
    secretStoreParameters: str("secretStoreParameters", false),
    publicGateway: str("publicGateway", false),
    organizationGateway: str("organizationGateway", false),
    certificateIssuer: str("certificateIssuer", false),
    endpointCertificates: bool("endpointCertificates"),
    httpsGatewayClass: str("httpsGatewayClass", false),
    httpsPort: int("httpsPort", 1, 65_535),
    envoyGatewayPolicies: bool("envoyGatewayPolicies"),
    podAddressMap: str("podAddressMap", false),
    measureIntervalSeconds: int("measureIntervalSeconds", 0, 3_600),
    ctrlTimeoutSeconds: seconds("ctrlTimeoutSeconds", 0.1, 300),
    startupCpuBoostMillicores: int("startupCpuBoostMillicores", 0, 64_000),
    builds: int("builds", 0, 64),
    buildctl: str("buildctl", false),
    buildBases: str("buildBases", false),
    builderImage: str("builderImage", false),
  };
  if (settings.builds > 0 && settings.buildBases === undefined)
    problems.push("builds need buildBases (the base images' OCI layout: scripts/build-bases.sh)");
  if (settings.secretStoreParameters !== undefined) {
    try {
      parseStoreParameters(settings.secretStoreParameters);
    } catch (err) {
      problems.push((err as Error).message);
    }
    if (settings.secretStoreProvider === undefined) problems.push("secretStoreParameters needs secretStoreProvider");
  }
  for (const k of ["publicGateway", "organizationGateway"] as const) {
    const v = settings[k];
    if (v !== undefined && parseGatewayRef(v) === undefined)
      problems.push(`${k} must be namespace/name or namespace/name/listener (DNS labels)`);
  }
  if (settings.certificateIssuer !== undefined && parseIssuer(settings.certificateIssuer) === undefined) {
    problems.push("certificateIssuer must be ClusterIssuer/<name> or Issuer/<name>");
  }
  if (settings.httpsGatewayClass !== undefined) {
    if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(settings.httpsGatewayClass))
      problems.push("httpsGatewayClass must be a GatewayClass name (DNS subdomain)");
    if (settings.certificateIssuer === undefined)
      problems.push("httpsGatewayClass needs certificateIssuer (the HTTPS listeners serve its certificates)");
    if (settings.publicGateway === undefined)
      problems.push("httpsGatewayClass needs publicGateway (HTTPS is served for public routes)");
  }
  if (settings.podAddressMap !== undefined) {
    try {
      parseAddressMapping(settings.podAddressMap);
    } catch (err) {
      problems.push(`podAddressMap: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  if (settings.sentinelImage !== undefined && /\s/.test(settings.sentinelImage))
    problems.push("sentinelImage must not contain whitespace");
  if (settings.ctrlUrl && !/^https?:\/\//.test(settings.ctrlUrl))
    problems.push("ctrlUrl must start with http:// or https://");
  return problems.length > 0 ? { problems } : { settings, problems };
}

/** "k=v,k=v" → a map (the secret store's SecretProviderClass parameters). */
export function parseStoreParameters(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of text
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean)) {
    const i = part.indexOf("=");
    if (i <= 0) throw new Error(`secretStoreParameters: expected key=value, got "${part}"`);
    const key = part.slice(0, i);
    if (!/^[A-Za-z][A-Za-z0-9_.-]*$/.test(key) || key === "objects")
      throw new Error(`secretStoreParameters: "${key}" is not a parameter name (objects is krane's)`);
    out[key] = part.slice(i + 1);
  }
  return out;
}
