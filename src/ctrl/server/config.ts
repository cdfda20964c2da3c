// Settings of `krane ctrl serve`, resolved from flags, then KRANE_* environment variables, then
// a YAML config file, then defaults. Pure, so precedence and parsing are unit-testable.
//
//   flag                 env                        file key            default
//   --database           KRANE_DATABASE_URL         database            ./.krane/ctrl.db
//   --listen             KRANE_LISTEN               listen              0.0.0.0:7070
//   --ops-listen         KRANE_OPS_LISTEN           opsListen           0.0.0.0:7071 ("off" disables)
//   --tls-cert/--tls-key KRANE_TLS_CERT/_KEY        tlsCert/tlsKey      (h2c)
//   --admin-token        KRANE_ADMIN_TOKEN          adminToken          (see below; the flag form shows in `ps`)
//   --admin-token-file   KRANE_ADMIN_TOKEN_FILE     adminTokenFile      <database dir>/admin-token
//   --outbox-retention   KRANE_OUTBOX_RETENTION     outboxRetention     100000 versions per stream
//   --pool-size          KRANE_POOL_SIZE            poolSize            10 PostgreSQL connections
//   --log-level          KRANE_LOG_LEVEL            logLevel            info
//   --master-key-file    KRANE_MASTER_KEY_FILE      masterKeyFile       (SQLite: <database dir>/master-key, generated)
//   (env only)           KRANE_MASTER_KEY           masterKey           the key itself (32 bytes, base64 or hex)
//   --previous-master-key-file KRANE_PREVIOUS_MASTER_KEY_FILES previousMasterKeyFiles  comma-separated, unwrap only
//   --release-allowed-kinds KRANE_RELEASE_ALLOWED_KINDS releaseAllowedKinds ConfigMap,Secret,Service,… (group/Kind)
//   --public-apex        KRANE_PUBLIC_APEX          publicApex          krane.localhost (endpoints' generated hostnames)
//   --organization-apex  KRANE_ORGANIZATION_APEX    organizationApex    internal.<public apex>
//   --host-pattern       KRANE_HOST_PATTERN         hostPattern         {env}-{project}-{workspace}
//   --shared-host-pattern KRANE_SHARED_HOST_PATTERN sharedHostPattern   {workspace} (path routing)
//   --endpoint-scheme    KRANE_ENDPOINT_SCHEME      endpointScheme      https (URLs shown for endpoints)
//   --dns-servers        KRANE_DNS_SERVERS          dnsServers          the system's (domain verification; host[:port],…)
//   --audit-retention    KRANE_AUDIT_RETENTION      auditRetention      400d (audit events older than this are pruned)
//   --audit-webhook-url  KRANE_AUDIT_WEBHOOK_URL    auditWebhookUrl     (none: every audit event is POSTed there, signed)
//   --audit-webhook-secret-file KRANE_AUDIT_WEBHOOK_SECRET_FILE auditWebhookSecretFile  the HMAC key of those deliveries
//   (env only)           KRANE_AUDIT_WEBHOOK_SECRET auditWebhookSecret  the key itself
//   --webhook-listen     KRANE_WEBHOOK_LISTEN       webhookListen       off (pull-request webhooks, HTTP/1.1: host:port)
//   --webhook-replay-window KRANE_WEBHOOK_REPLAY_WINDOW webhookReplayWindow 10m (how old a delivery may be)
//   --stream-keepalive   KRANE_STREAM_KEEPALIVE_SECONDS streamKeepalive  10 s (a quiet watch stream gets a bookmark)
//   --image-digests      KRANE_IMAGE_DIGESTS        imageDigests        resolve (each deploy's tag → digest; "off": run tags)
//   --local-image-hosts  KRANE_LOCAL_IMAGE_HOSTS    localImageHosts     krane.local (images in no registry: never resolved)
//   --registry-ca-file   KRANE_REGISTRY_CA_FILE     registryCaFile      (none: Node's roots) extra CAs of registries, PEM
//   --registry-private-hosts KRANE_REGISTRY_PRIVATE_HOSTS registryPrivateHosts (none) registry hosts ctrl may reach at private addresses
//   --notify-allow-loopback KRANE_NOTIFY_ALLOW_LOOPBACK notifyAllowLoopback false (channels may deliver to this machine)
//   --default-quota      KRANE_DEFAULT_QUOTA        defaultQuota        (none: unlimited, previews 10) "cpu=8,memory=16Gi,…"
//   --build-registry     KRANE_BUILD_REGISTRY       buildRegistry       off (builds from source push here, host:port; TLS, CAs of --registry-ca-file)
//   --build-registry-username KRANE_BUILD_REGISTRY_USERNAME buildRegistryUsername (none: anonymous pushes)
//   (env only)           KRANE_BUILD_REGISTRY_PASSWORD buildRegistryPassword its password
//   --build-registry-token-key KRANE_BUILD_REGISTRY_TOKEN_KEY_FILE buildRegistryTokenKeyFile (none: Basic) token mode: ctrl signs the registry's tokens with this EC P-256 key (PEM)
//   --build-registry-service KRANE_BUILD_REGISTRY_SERVICE buildRegistryService krane-build-registry (the registry's auth.token.service)
//   --buildkitd/--buildctl KRANE_BUILDKITD/_BUILDCTL buildkitd/buildctl buildkitd, buildctl on PATH
//   --build-bases        KRANE_BUILD_BASES          buildBases          (required with builds) the base images' OCI layout
//   --build-state-dir    KRANE_BUILD_STATE_DIR      buildStateDir       <database dir>/builds (BuildKit's caches, per project)
//   --build-slots        KRANE_BUILD_SLOTS          buildSlots          1 (builds at once)
//   --build-timeout      KRANE_BUILD_TIMEOUT        buildTimeout        15m (a build's time limit)
//   --builds-in          KRANE_BUILDS_IN            buildsIn            ctrl (or cluster: builder pods, pulled by agents)
//   --git-ca-file        KRANE_GIT_CA_FILE          gitCaFile           (none: the system's) extra CAs of repositories' HTTPS certificates, PEM
//   --oidc-issuer        KRANE_OIDC_ISSUER          oidcIssuer          (none: no sign-in) the OpenID provider, https (http only on loopback)
//   --oidc-client-id     KRANE_OIDC_CLIENT_ID       oidcClientId        ctrl's client id at the provider (needed with an issuer)
//   --oidc-client-secret-file KRANE_OIDC_CLIENT_SECRET_FILE oidcClientSecretFile (none: a public client, PKCE only)
//   (env only)           KRANE_OIDC_CLIENT_SECRET   oidcClientSecret    the secret itself
//   --oidc-group-role    KRANE_OIDC_GROUP_ROLES     oidcGroupRoles      (none) group=role or group=workspace:role, comma-separated in env/file
//   --public-url         KRANE_PUBLIC_URL           publicUrl           (none: each request's own origin) the origin browsers use, e.g. behind a TLS proxy
//
// Bootstrap: a given admin token is registered as a user API token (idempotent; never again
// once revoked through the API: ctrl then logs an error and serves without it). Without one, the
// admin token file holds it: a token in an existing file is registered the same way (a file
// keeps the token out of the process list, where --admin-token is visible to every user of the
// machine); a missing file, on a database with no user token yet, is created with a generated
// token (mode 0600), logging only the file's path: tokens never go to logs. --admin-token and an
// explicitly given --admin-token-file exclude each other.
import { dirname, join } from "node:path";
import { parse as parseYaml } from "yaml";
import { registryHost } from "../../contracts/images.js";
import { parseQuotaList, type QuotaName, type QuotaSetting } from "../../contracts/quotas.js";
import { DEFAULT_LOCAL_IMAGE_HOSTS } from "../images/resolve.js";
import { DEFAULT_TOKEN_SERVICE } from "../builds/registry-token.js";
import { parseGroupRole, type GroupRole } from "../auth/oidc-rules.js";
import { DEFAULT_RELEASE_KINDS, parseAllowedKinds, type AllowedKind } from "../../contracts/releases.js";
import type { ListenAddress } from "./server.js";

export interface CtrlSettings {
  databaseUrl: string;
  listen: ListenAddress;
  opsListen: ListenAddress | null;
  tls: { certFile: string; keyFile: string } | undefined;
  adminToken: string | undefined;
  adminTokenFile: string;
  /** Where adminToken came from, so ctrl can warn about a token on the command line. */
  adminTokenSource: "flag" | "env" | "config" | undefined;
  outboxRetention: number;
  poolSize: number;
  logLevel: string;
  /** Where the master key of secrets at rest comes from (see src/ctrl/secrets). */
  masterKey: { key?: string; file?: string; previousFiles: string[]; generateAt?: string };
  releaseKinds: AllowedKind[];
  /** Endpoints' generated addresses. */
  exposure: {
    publicApex: string;
    organizationApex: string;
    hostPattern: string;
    sharedHostPattern: string;
    scheme: "https" | "http";
  };
  /** DNS servers for domain verification (empty: the system's). */
  dnsServers: string[];
  /** The audit log: retention, and the webhook sink (its key from a file or the environment). */
  audit: { retentionMs: number; webhookUrl: string | undefined; webhookSecret: { value?: string; file?: string } };
  /** The pull-request webhook listener (null: none) and the replay window of its deliveries. */
  previews: { webhookListen: ListenAddress | null; replayWindowMs: number };
  /** A watch stream quiet this long gets a bookmark; agents reconnect after two silent intervals. */
  streamKeepaliveMs: number;
  /** Deploys' images pinned to digests (null: off), the hosts never asked, extra registry CAs (a file). */
  images: { localHosts: string[]; caFile: string | undefined; privateHosts: string[] } | null;
  /** Notification channels may deliver to this machine (loopback and link-local addresses). */
  notifyAllowLoopback: boolean;
  /** The installation's default quotas (every workspace that sets none of its own). */
  defaultQuota: Map<QuotaName, QuotaSetting>;
  /** Builds from source in ctrl's build worker (null: off); registry CAs are images.caFile's. */
  builds: {
    registry: string;
    username: string | undefined;
    password: string | undefined;
    /** Token mode: the signing key's file and the registry's service name (undefined: Basic). */
    token: { keyFile: string; service: string } | undefined;
    buildkitd: string;
    buildctl: string;
    basesLayout: string;
    stateDir: string;
    slots: number;
    timeoutMs: number;
    /** Where builds run: in ctrl's worker, or in builder pods of a region's agent. */
    runIn: "ctrl" | "cluster";
    /** CAs (a PEM file) repositories' HTTPS certificates may come from, beside the system's. */
    gitCaFile?: string;
    /** Extra CAs (a PEM file) of the build registry: --registry-ca-file's, whether deploys resolve digests or not. */
    registryCaFile?: string;
  } | null;
  /** Sign-in through an OpenID provider (undefined: none, API tokens only). */
  oidc:
    | { issuer: string; clientId: string; clientSecret: { value?: string; file?: string }; groupRoles: GroupRole[] }
    | undefined;
  /** The origin browsers reach ctrl at (a TLS-terminating proxy's); undefined: each request's own. */
  publicUrl: string | undefined;
}

export type RawSettings = Partial<Record<keyof typeof ENV, string>>;

const ENV = {
  database: "KRANE_DATABASE_URL",
  listen: "KRANE_LISTEN",
  opsListen: "KRANE_OPS_LISTEN",
  tlsCert: "KRANE_TLS_CERT",
  tlsKey: "KRANE_TLS_KEY",
  adminToken: "KRANE_ADMIN_TOKEN",
  adminTokenFile: "KRANE_ADMIN_TOKEN_FILE",
  outboxRetention: "KRANE_OUTBOX_RETENTION",
  poolSize: "KRANE_POOL_SIZE",
  logLevel: "KRANE_LOG_LEVEL",
  masterKey: "KRANE_MASTER_KEY",
  masterKeyFile: "KRANE_MASTER_KEY_FILE",
  previousMasterKeyFiles: "KRANE_PREVIOUS_MASTER_KEY_FILES",
  releaseAllowedKinds: "KRANE_RELEASE_ALLOWED_KINDS",
  publicApex: "KRANE_PUBLIC_APEX",
  organizationApex: "KRANE_ORGANIZATION_APEX",
  hostPattern: "KRANE_HOST_PATTERN",
  sharedHostPattern: "KRANE_SHARED_HOST_PATTERN",
  endpointScheme: "KRANE_ENDPOINT_SCHEME",
  dnsServers: "KRANE_DNS_SERVERS",
  auditRetention: "KRANE_AUDIT_RETENTION",
  auditWebhookUrl: "KRANE_AUDIT_WEBHOOK_URL",
  auditWebhookSecretFile: "KRANE_AUDIT_WEBHOOK_SECRET_FILE",
  auditWebhookSecret: "KRANE_AUDIT_WEBHOOK_SECRET",
  webhookListen: "KRANE_WEBHOOK_LISTEN",
  webhookReplayWindow: "KRANE_WEBHOOK_REPLAY_WINDOW",
  streamKeepalive: "KRANE_STREAM_KEEPALIVE_SECONDS",
  imageDigests: "KRANE_IMAGE_DIGESTS",
  localImageHosts: "KRANE_LOCAL_IMAGE_HOSTS",
  registryCaFile: "KRANE_REGISTRY_CA_FILE",
  registryPrivateHosts: "KRANE_REGISTRY_PRIVATE_HOSTS",
  notifyAllowLoopback: "KRANE_NOTIFY_ALLOW_LOOPBACK",
  defaultQuota: "KRANE_DEFAULT_QUOTA",
  buildRegistry: "KRANE_BUILD_REGISTRY",
  buildRegistryUsername: "KRANE_BUILD_REGISTRY_USERNAME",
  buildRegistryPassword: "KRANE_BUILD_REGISTRY_PASSWORD",
  buildRegistryTokenKeyFile: "KRANE_BUILD_REGISTRY_TOKEN_KEY_FILE",
  buildRegistryService: "KRANE_BUILD_REGISTRY_SERVICE",
  buildkitd: "KRANE_BUILDKITD",
  buildctl: "KRANE_BUILDCTL",
  buildBases: "KRANE_BUILD_BASES",
  buildStateDir: "KRANE_BUILD_STATE_DIR",
  buildSlots: "KRANE_BUILD_SLOTS",
  buildTimeout: "KRANE_BUILD_TIMEOUT",
  buildsIn: "KRANE_BUILDS_IN",
  gitCaFile: "KRANE_GIT_CA_FILE",
  oidcIssuer: "KRANE_OIDC_ISSUER",
  oidcClientId: "KRANE_OIDC_CLIENT_ID",
  oidcClientSecretFile: "KRANE_OIDC_CLIENT_SECRET_FILE",
  oidcClientSecret: "KRANE_OIDC_CLIENT_SECRET",
  oidcGroupRoles: "KRANE_OIDC_GROUP_ROLES",
  publicUrl: "KRANE_PUBLIC_URL",
} as const;

/** Bounds of the stream keepalive interval, in seconds: below, bookmarks would be busy work. */
export const STREAM_KEEPALIVE_SECONDS = { min: 0.1, max: 600, default: 10 } as const;

/** "400d", "72h", "10m", "30s", "500ms": a duration in milliseconds. */
export function parseDurationMs(what: string, v: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(v.trim());
  if (!m) throw new Error(`${what}: expected a duration such as 400d, 72h, 10m or 30s, got "${v}"`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as "ms" | "s" | "m" | "h" | "d"];
  const ms = Math.round(Number(m[1]) * unit);
  if (ms <= 0) throw new Error(`${what}: must be more than 0`);
  return ms;
}

export function parseListen(what: string, v: string): ListenAddress {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(v.trim());
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65_535) throw new Error(`${what}: expected host:port, got "${v}"`);
  const host = m[1] ?? m[2] ?? "";
  return { host: host === "" ? "0.0.0.0" : host, port };
}

/** Reads a YAML config file's text into raw settings (camelCase or kebab-case keys). */
export function parseCtrlConfigFile(text: string): RawSettings {
  const doc: unknown = parseYaml(text);
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== "object" || Array.isArray(doc)) throw new Error("config file: expected a mapping");
  const out: RawSettings = {};
  for (const [k, v] of Object.entries(doc as Record<string, unknown>)) {
    const key = k.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
    if (!(key in ENV)) throw new Error(`config file: unknown key "${k}"`);
    if (typeof v !== "string" && typeof v !== "number" && typeof v !== "boolean")
      throw new Error(`config file: "${k}" must be a scalar`);
    out[key as keyof RawSettings] = String(v);
  }
  return out;
}

export function resolveCtrlSettings(flags: RawSettings, env: NodeJS.ProcessEnv, file: RawSettings): CtrlSettings {
  const pick = (k: keyof typeof ENV): string | undefined => flags[k] ?? env[ENV[k]] ?? file[k];
  const databaseUrl = pick("database") ?? "./.krane/ctrl.db";
  const ops = pick("opsListen") ?? "0.0.0.0:7071";
  const cert = pick("tlsCert");
  const key = pick("tlsKey");
  if ((cert === undefined) !== (key === undefined)) throw new Error("TLS needs both a certificate and a key");
  const retention = Number(pick("outboxRetention") ?? "100000");
  if (!Number.isInteger(retention) || retention < 1) throw new Error("outbox retention must be a positive integer");
  const poolSize = Number(pick("poolSize") ?? "10");
  if (!Number.isInteger(poolSize) || poolSize < 1 || poolSize > 1000)
    throw new Error("pool size must be an integer from 1 to 1000");
  const keepalive = Number(pick("streamKeepalive") ?? String(STREAM_KEEPALIVE_SECONDS.default));
  if (!(keepalive >= STREAM_KEEPALIVE_SECONDS.min && keepalive <= STREAM_KEEPALIVE_SECONDS.max))
    throw new Error(
      `stream keepalive must be a number of seconds from ${STREAM_KEEPALIVE_SECONDS.min} to ${STREAM_KEEPALIVE_SECONDS.max}`,
    );
  const isPg = /^postgres(ql)?:\/\//.test(databaseUrl);
  const adminToken = pick("adminToken");
  const explicitTokenFile = pick("adminTokenFile");
  if (adminToken !== undefined && explicitTokenFile !== undefined) {
    throw new Error(
      "admin token: give either --admin-token (KRANE_ADMIN_TOKEN) or --admin-token-file (KRANE_ADMIN_TOKEN_FILE), not both",
    );
  }
  if (adminToken !== undefined && adminToken.trim() === "") throw new Error("admin token: empty");
  const publicApex = (pick("publicApex") ?? "krane.localhost").toLowerCase();
  const scheme = pick("endpointScheme") ?? "https";
  if (scheme !== "https" && scheme !== "http") throw new Error('endpoint scheme must be "https" or "http"');
  const dnsServers = (pick("dnsServers") ?? "")
    .split(",")
    .map((x) => x.trim())
    .filter((x) => x !== "");
  for (const d of dnsServers)
    if (!/^(\[[0-9a-fA-F:]+\]|[0-9.]+|[0-9a-fA-F:]+)(:\d{1,5})?$/.test(d))
      throw new Error(`dns servers: "${d}" is not an IP address with an optional port`);
  return {
    databaseUrl,
    listen: parseListen("listen", pick("listen") ?? "0.0.0.0:7070"),
    opsListen: ops === "off" ? null : parseListen("ops listen", ops),
    tls: cert !== undefined && key !== undefined ? { certFile: cert, keyFile: key } : undefined,
    adminToken,
    adminTokenFile:
      explicitTokenFile ??
      (isPg || databaseUrl === ":memory:" ? "./.krane/admin-token" : join(dirname(databaseUrl), "admin-token")),
    adminTokenSource:
      flags.adminToken !== undefined
        ? "flag"
        : env[ENV.adminToken] !== undefined
          ? "env"
          : file.adminToken !== undefined
            ? "config"
            : undefined,
    outboxRetention: retention,
    poolSize,
    logLevel: pick("logLevel") ?? "info",
    masterKey: {
      key: pick("masterKey"),
      file: pick("masterKeyFile"),
      previousFiles: (pick("previousMasterKeyFiles") ?? "")
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean),
      // Only a local SQLite database gets a generated key: replicas on PostgreSQL must share one.
      generateAt: isPg || databaseUrl === ":memory:" ? undefined : join(dirname(databaseUrl), "master-key"),
    },
    releaseKinds:
      pick("releaseAllowedKinds") === undefined
        ? [...DEFAULT_RELEASE_KINDS]
        : parseAllowedKinds(pick("releaseAllowedKinds") ?? ""),
    exposure: {
      publicApex,
      organizationApex: (pick("organizationApex") ?? `internal.${publicApex}`).toLowerCase(),
      hostPattern: pick("hostPattern") ?? "{env}-{project}-{workspace}",
      sharedHostPattern: pick("sharedHostPattern") ?? "{workspace}",
      scheme,
    },
    dnsServers,
    audit: {
      retentionMs: parseDurationMs("audit retention", pick("auditRetention") ?? "400d"),
      webhookUrl: auditWebhookUrl(pick("auditWebhookUrl")),
      webhookSecret: { value: pick("auditWebhookSecret"), file: pick("auditWebhookSecretFile") },
    },
    previews: {
      webhookListen:
        (pick("webhookListen") ?? "off") === "off" ? null : parseListen("webhook listen", pick("webhookListen") ?? ""),
      replayWindowMs: parseDurationMs("webhook replay window", pick("webhookReplayWindow") ?? "10m"),
    },
    streamKeepaliveMs: Math.round(keepalive * 1000),
    images: imageSettings(
      pick("imageDigests"),
      pick("localImageHosts"),
      pick("registryCaFile"),
      pick("registryPrivateHosts"),
    ),
    notifyAllowLoopback: parseBool("notify allow loopback", pick("notifyAllowLoopback") ?? "false"),
    defaultQuota: defaultQuota(pick("defaultQuota")),
    builds: buildSettings(
      pick,
      isPg || databaseUrl === ":memory:" ? "./.krane/builds" : join(dirname(databaseUrl), "builds"),
    ),
    oidc: oidcSettings(pick),
    publicUrl: parsePublicUrl(pick("publicUrl")),
  };
}

/**
 * The public URL: an http(s) origin with nothing after it (no path, query, fragment or
 * credentials), as browsers type it; returned as the origin ("https://krane.example.com").
 */
export function parsePublicUrl(v: string | undefined): string | undefined {
  if (v === undefined || v === "") return undefined;
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new Error(`public url: "${v}" is not a URL`);
  }
  if (u.protocol !== "https:" && u.protocol !== "http:")
    throw new Error(`public url: "${v}" must be https:// (or http://)`);
  if (u.username !== "" || u.password !== "" || u.search !== "" || u.hash !== "" || u.pathname !== "/")
    throw new Error(`public url: "${v}" must be an origin only (scheme, host and port; no path, query or credentials)`);
  return u.origin;
}

function buildSettings(
  pick: (k: keyof typeof ENV) => string | undefined,
  defaultStateDir: string,
): CtrlSettings["builds"] {
  const registry = pick("buildRegistry");
  if (registry === undefined || registry === "" || registry === "off") return null;
  if (registryHost(registry) !== registry.toLowerCase())
    throw new Error(`build registry: "${registry}" is not a registry host (host or host:port)`);
  const runIn = pick("buildsIn") ?? "ctrl";
  if (runIn !== "ctrl" && runIn !== "cluster")
    throw new Error(`builds in: "${runIn}" is not where builds run (ctrl or cluster)`);
  // In cluster mode the agents build on their own copy of the bases.
  const basesLayout = pick("buildBases") ?? (runIn === "cluster" ? "" : undefined);
  if (basesLayout === undefined || (basesLayout === "" && runIn === "ctrl"))
    throw new Error(
      "build bases: builds need the base images' OCI layout (--build-bases; scripts/build-bases.sh makes it)",
    );
  const slots = Number(pick("buildSlots") ?? "1");
  const gitCaFile = pick("gitCaFile");
  const registryCaFile = pick("registryCaFile");
  if (!Number.isInteger(slots) || slots < 1 || slots > 64) throw new Error("build slots: an integer from 1 to 64");
  const keyFile = pick("buildRegistryTokenKeyFile");
  const service = pick("buildRegistryService") ?? DEFAULT_TOKEN_SERVICE;
  if (keyFile !== undefined && keyFile !== "" && pick("buildRegistryUsername") !== undefined)
    throw new Error(
      "build registry token key: with tokens ctrl signs its own pushes; leave out --build-registry-username",
    );
  if (!/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/.test(service))
    throw new Error(`build registry service: "${service}" is not a service name (letters, digits, . _ : -)`);
  return {
    registry: registry.toLowerCase(),
    username: pick("buildRegistryUsername"),
    password: pick("buildRegistryPassword"),
    token: keyFile === undefined || keyFile === "" ? undefined : { keyFile, service },
    buildkitd: pick("buildkitd") ?? "buildkitd",
    buildctl: pick("buildctl") ?? "buildctl",
    basesLayout,
    stateDir: pick("buildStateDir") ?? defaultStateDir,
    slots,
    timeoutMs: parseDurationMs("build timeout", pick("buildTimeout") ?? "15m"),
    runIn,
    ...(gitCaFile === undefined || gitCaFile === "" ? {} : { gitCaFile }),
    ...(registryCaFile === undefined || registryCaFile === "" ? {} : { registryCaFile }),
  };
}

function oidcSettings(pick: (k: keyof typeof ENV) => string | undefined): CtrlSettings["oidc"] {
  const issuer = pick("oidcIssuer");
  const clientId = pick("oidcClientId");
  const groups = (pick("oidcGroupRoles") ?? "")
    .split(",")
    .map((g) => g.trim())
    .filter((g) => g !== "");
  if (issuer === undefined || issuer === "") {
    if (clientId !== undefined || groups.length > 0)
      throw new Error("oidc issuer: --oidc-client-id and --oidc-group-role need --oidc-issuer");
    return undefined;
  }
  let u: URL;
  try {
    u = new URL(issuer);
  } catch {
    throw new Error(`oidc issuer: "${issuer}" is not a URL`);
  }
  const loopback = u.hostname === "127.0.0.1" || u.hostname === "[::1]" || u.hostname === "localhost";
  if (u.protocol !== "https:" && !(u.protocol === "http:" && loopback))
    throw new Error("oidc issuer: must be https:// (http:// only on this machine's loopback)");
  if (clientId === undefined || clientId.trim() === "") throw new Error("oidc client id: needed with --oidc-issuer");
  return {
    issuer,
    clientId: clientId.trim(),
    clientSecret: { value: pick("oidcClientSecret"), file: pick("oidcClientSecretFile") },
    groupRoles: groups.map((g) => {
      try {
        return parseGroupRole(g);
      } catch (err) {
        throw new Error(err instanceof Error ? err.message : String(err));
      }
    }),
  };
}

function imageSettings(
  mode: string | undefined,
  hosts: string | undefined,
  caFile: string | undefined,
  privateHosts: string | undefined,
): CtrlSettings["images"] {
  if (mode !== undefined && mode !== "resolve" && mode !== "off")
    throw new Error(`image digests: "resolve" or "off", got "${mode}"`);
  if (mode === "off") return null;
  const localHosts = (hosts ?? DEFAULT_LOCAL_IMAGE_HOSTS.join(","))
    .split(",")
    .map((h) => h.trim())
    .filter((h) => h !== "")
    .map((h) => {
      const host = registryHost(h);
      if (host === undefined) throw new Error(`local image hosts: "${h}" is not a registry host (host or host:port)`);
      return host;
    });
  const privateNames = (privateHosts ?? "")
    .split(",")
    .map((h) => h.trim().toLowerCase())
    .filter((h) => h !== "")
    .map((h) => {
      // A host name or address without a port: what the connection's address is checked for.
      if (!/^(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9.-]*[a-z0-9])?|[0-9a-f:.]+)$/.test(h))
        throw new Error(`registry private hosts: "${h}" is not a host name or address (without a port)`);
      return h.replace(/^\[(.*)\]$/, "$1");
    });
  return { localHosts, caFile: caFile === "" ? undefined : caFile, privateHosts: privateNames };
}

function defaultQuota(v: string | undefined): Map<QuotaName, QuotaSetting> {
  try {
    return parseQuotaList(v ?? "");
  } catch (err) {
    throw new Error(`default quota: ${(err as Error).message}`);
  }
}

function parseBool(what: string, v: string): boolean {
  if (v === "true" || v === "1") return true;
  if (v === "false" || v === "0" || v === "") return false;
  throw new Error(`${what}: expected true or false, got "${v}"`);
}

function auditWebhookUrl(v: string | undefined): string | undefined {
  if (v === undefined || v === "") return undefined;
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new Error(`audit webhook url: "${v}" is not a URL`);
  }
  if (u.protocol !== "https:" && u.protocol !== "http:") throw new Error("audit webhook url: must be http(s)://");
  return v;
}
