// `krane sentinel` settings: flags > KRANE_* environment variables > defaults. Pure (inputs in,
// settings or a list of problems naming each bad field out), so precedence and checks are
// unit-tested. The sentinel Deployment sets KRANE_ENVIRONMENT_ID and KRANE_REGION.
import { SENTINEL_PORT } from "../contracts/cluster.js";
import { SENTINEL_OPS_PORT, SENTINEL_PEER_PORT } from "../contracts/routing.js";
import { parseAddressMapping, type AddressMapping } from "../contracts/address-map.js";

export interface SentinelSettings {
  readonly environmentId: string;
  readonly region: string;
  /** A kubeconfig path or "in-cluster"; undefined = in-cluster inside a pod, else the usual lookup. */
  readonly kubeconfig: string | undefined;
  /** Address to bind (both ports); undefined = all interfaces. */
  readonly listen: string | undefined;
  readonly port: number;
  readonly opsPort: number;
  /** Upstream: connect timeout, time to response headers (then 504), idle time between body chunks. */
  readonly connectTimeoutMs: number;
  readonly upstreamTimeoutMs: number;
  readonly bodyIdleTimeoutMs: number;
  /** Client side: time to send the request headers (slowloris), keep-alive idle time, socket idle time. */
  readonly headerTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly maxHeaderBytes: number;
  /**
   * SIGTERM: how long the sentinel still accepts new connections while not ready, so the Service's
   * endpoints (kube-proxy, a gateway) stop sending it connections before its listener closes.
   */
  readonly drainDelayMs: number;
  /** SIGTERM: how long in-flight requests may take to finish, after the delay. */
  readonly drainTimeoutMs: number;
  /** API authentication: JWKS refresh age, and the least time between early refetches (unknown key). */
  readonly jwksCacheMs: number;
  readonly jwksCooldownMs: number;
  readonly podAddressMap: AddressMapping | undefined;
  readonly logLevel: string;
  /**
   * The rate-limit exchange with the environment's other replicas (src/sentinel/peers.ts): the
   * sentinel's Service, whose EndpointSlices list them (undefined: no exchange, each replica
   * counts alone), the port they speak on, and the secret their messages are signed with.
   */
  readonly peerService: string | undefined;
  readonly peerPort: number;
  readonly peerSecret: string | undefined;
}

export type SentinelFlags = Partial<Record<Exclude<keyof SentinelSettings, "podAddressMap">, string>> & {
  podAddressMap?: string;
};

const envNames: Record<keyof SentinelSettings, string> = {
  environmentId: "KRANE_ENVIRONMENT_ID",
  region: "KRANE_REGION",
  kubeconfig: "KRANE_KUBECONFIG",
  listen: "KRANE_SENTINEL_LISTEN",
  port: "KRANE_SENTINEL_PORT",
  opsPort: "KRANE_SENTINEL_OPS_PORT",
  connectTimeoutMs: "KRANE_SENTINEL_CONNECT_TIMEOUT_MS",
  upstreamTimeoutMs: "KRANE_SENTINEL_UPSTREAM_TIMEOUT_MS",
  bodyIdleTimeoutMs: "KRANE_SENTINEL_BODY_IDLE_TIMEOUT_MS",
  headerTimeoutMs: "KRANE_SENTINEL_HEADER_TIMEOUT_MS",
  keepAliveTimeoutMs: "KRANE_SENTINEL_KEEPALIVE_TIMEOUT_MS",
  idleTimeoutMs: "KRANE_SENTINEL_IDLE_TIMEOUT_MS",
  maxHeaderBytes: "KRANE_SENTINEL_MAX_HEADER_BYTES",
  drainDelayMs: "KRANE_SENTINEL_DRAIN_DELAY_MS",
  drainTimeoutMs: "KRANE_SENTINEL_DRAIN_TIMEOUT_MS",
  jwksCacheMs: "KRANE_SENTINEL_JWKS_CACHE_MS",
  jwksCooldownMs: "KRANE_SENTINEL_JWKS_COOLDOWN_MS",
  podAddressMap: "KRANE_SENTINEL_POD_ADDRESS_MAP",
  logLevel: "KRANE_LOG_LEVEL",
  peerService: "KRANE_SENTINEL_PEER_SERVICE",
  peerPort: "KRANE_SENTINEL_PEER_PORT",
  peerSecret: "KRANE_SENTINEL_PEER_SECRET",
};

export const SENTINEL_ENV = envNames;

const defaults: Partial<Record<keyof SentinelSettings, string>> = {
  port: String(SENTINEL_PORT),
  opsPort: String(SENTINEL_OPS_PORT),
  connectTimeoutMs: "5000",
  upstreamTimeoutMs: "60000",
  bodyIdleTimeoutMs: "300000",
  headerTimeoutMs: "15000",
  // Longer than a gateway's idle backend connections (Traefik keeps them 90 s), so the gateway
  // never reuses a connection the sentinel is closing.
  keepAliveTimeoutMs: "95000",
  idleTimeoutMs: "300000",
  maxHeaderBytes: "16384",
  // kube-proxy and gateways take a moment to drop a terminating endpoint; a listener closed before
  // then refuses connections they still send. Delay and drain fit the sentinel pod's 35 s grace.
  drainDelayMs: "5000",
  drainTimeoutMs: "25000",
  jwksCacheMs: "600000",
  jwksCooldownMs: "30000",
  logLevel: "info",
  peerPort: String(SENTINEL_PEER_PORT),
};

/** The least length of the peer secret (an HMAC key: 32 characters of a random token). */
export const MIN_PEER_SECRET_LENGTH = 32;

const LOG_LEVELS = new Set(["trace", "debug", "info", "warn", "error", "fatal", "silent"]);

export function resolveSentinelSettings(
  flags: SentinelFlags,
  env: Record<string, string | undefined>,
): { settings?: SentinelSettings; problems: string[] } {
  const problems: string[] = [];
  const pick = (k: keyof SentinelSettings): string | undefined => {
    const e = env[envNames[k]];
    return flags[k] ?? (e !== undefined && e !== "" ? e : undefined) ?? defaults[k];
  };
  const str = (k: keyof SentinelSettings, required: boolean): string | undefined => {
    const v = pick(k);
    if (v === undefined || v === "") {
      if (required) problems.push(`${k} is required (--${kebab(k)} or ${envNames[k]})`);
      return undefined;
    }
    return v;
  };
  const int = (k: keyof SentinelSettings, min: number, max: number): number => {
    const raw = pick(k);
    const n = Number(raw);
    if (raw === undefined || !Number.isInteger(n) || n < min || n > max)
      problems.push(`${k} must be an integer from ${min} to ${max} (got ${String(raw)})`);
    return n;
  };
  let podAddressMap: AddressMapping | undefined;
  const mapText = str("podAddressMap", false);
  if (mapText !== undefined) {
    try {
      podAddressMap = parseAddressMapping(mapText);
    } catch (err) {
      problems.push(`podAddressMap: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  const logLevel = str("logLevel", false) ?? "info";
  if (!LOG_LEVELS.has(logLevel)) problems.push(`logLevel must be one of ${[...LOG_LEVELS].join(", ")}`);
  const settings: SentinelSettings = {
    environmentId: str("environmentId", true) ?? "",
    region: str("region", true) ?? "",
    kubeconfig: str("kubeconfig", false) ?? (env.KUBERNETES_SERVICE_HOST ? "in-cluster" : env.KUBECONFIG || undefined),
    listen: str("listen", false),
    port: int("port", 0, 65_535),
    opsPort: int("opsPort", -1, 65_535),
    connectTimeoutMs: int("connectTimeoutMs", 1, 600_000),
    upstreamTimeoutMs: int("upstreamTimeoutMs", 1, 86_400_000),
    bodyIdleTimeoutMs: int("bodyIdleTimeoutMs", 0, 86_400_000),
    headerTimeoutMs: int("headerTimeoutMs", 100, 600_000),
    keepAliveTimeoutMs: int("keepAliveTimeoutMs", 0, 3_600_000),
    idleTimeoutMs: int("idleTimeoutMs", 0, 86_400_000),
    maxHeaderBytes: int("maxHeaderBytes", 1024, 1_048_576),
    drainDelayMs: int("drainDelayMs", 0, 600_000),
    drainTimeoutMs: int("drainTimeoutMs", 0, 3_600_000),
    jwksCacheMs: int("jwksCacheMs", 1000, 86_400_000),
    jwksCooldownMs: int("jwksCooldownMs", 0, 3_600_000),
    podAddressMap,
    logLevel,
    peerService: str("peerService", false),
    peerPort: int("peerPort", 0, 65_535),
    peerSecret: str("peerSecret", false),
  };
  if (settings.port !== 0 && settings.port === settings.opsPort) problems.push("port and opsPort must differ");
  if (settings.peerService !== undefined) {
    if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(settings.peerService))
      problems.push("peerService must be a Service name (DNS label)");
    // No secret at all: the exchange stays off (the sentinel warns) rather than routing stopping.
    if (settings.peerSecret !== undefined && settings.peerSecret.length < MIN_PEER_SECRET_LENGTH)
      problems.push(`peerSecret must have at least ${MIN_PEER_SECRET_LENGTH} characters (${envNames.peerSecret})`);
    if (settings.peerPort !== 0 && (settings.peerPort === settings.port || settings.peerPort === settings.opsPort))
      problems.push("peerPort must differ from port and opsPort");
  }
  return problems.length > 0 ? { problems } : { settings, problems };
}

function kebab(k: string): string {
  return k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}
