// `krane ctrl serve`: runs the control plane until SIGINT/SIGTERM, then drains gracefully.
// Settings and their precedence are documented in src/ctrl/server/config.ts. The store, the
// servers and pino are loaded only when the command runs.
import type { Command } from "commander";
import type { RawSettings } from "../ctrl/server/config.js";

interface ServeFlags {
  config?: string;
  database?: string;
  listen?: string;
  opsListen?: string;
  tlsCert?: string;
  tlsKey?: string;
  adminToken?: string;
  adminTokenFile?: string;
  outboxRetention?: string;
  poolSize?: string;
  logLevel?: string;
  masterKeyFile?: string;
  previousMasterKeyFile?: string[];
  releaseAllowedKinds?: string;
  publicApex?: string;
  organizationApex?: string;
  hostPattern?: string;
  sharedHostPattern?: string;
  endpointScheme?: string;
  dnsServers?: string;
  auditRetention?: string;
  auditWebhookUrl?: string;
  auditWebhookSecretFile?: string;
  webhookListen?: string;
  webhookReplayWindow?: string;
  streamKeepalive?: string;
  imageDigests?: string;
  localImageHosts?: string;
  registryCaFile?: string;
  registryPrivateHosts?: string;
  notifyAllowLoopback?: boolean;
  defaultQuota?: string;
  buildRegistry?: string;
  buildRegistryUsername?: string;
  buildRegistryTokenKey?: string;
  buildRegistryService?: string;
  buildkitd?: string;
  buildctl?: string;
  buildBases?: string;
  buildStateDir?: string;
  buildSlots?: string;
  buildTimeout?: string;
  buildsIn?: string;
  gitCaFile?: string;
  oidcIssuer?: string;
  oidcClientId?: string;
  oidcClientSecretFile?: string;
  oidcGroupRole?: string[];
  publicUrl?: string;
}

function collectList(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

export function registerCtrlCommands(program: Command): void {
  const ctrl = program.command("ctrl").description("the krane control plane");
  ctrl
    .command("serve")
    .description(
      "Serve the public API and the agents' ClusterService (one HTTP/2 port) plus /healthz, /readyz, /metrics, /version.",
    )
    .option("--config <file>", "YAML config file (keys as the flags, camelCase or kebab-case); env KRANE_CONFIG")
    .option(
      "--database <url>",
      "SQLite file path or postgres:// URL (default ./.krane/ctrl.db); env KRANE_DATABASE_URL",
    )
    .option("--listen <host:port>", "API address, HTTP/2 (default 0.0.0.0:7070); env KRANE_LISTEN")
    .option("--ops-listen <host:port>", 'ops address, HTTP/1.1, or "off" (default 0.0.0.0:7071); env KRANE_OPS_LISTEN')
    .option("--tls-cert <file>", "serve TLS with this certificate (PEM); env KRANE_TLS_CERT")
    .option("--tls-key <file>", "private key of --tls-cert (PEM); env KRANE_TLS_KEY")
    .option(
      "--admin-token <token>",
      "register this user API token for the admin; env KRANE_ADMIN_TOKEN. The flag form is visible to every user of the machine in the process list (ps): prefer --admin-token-file",
    )
    .option(
      "--admin-token-file <file>",
      "file with the admin's user API token, registered at start; when it does not exist and the database has no token yet, a generated token is written there (mode 0600). Default <database dir>/admin-token; env KRANE_ADMIN_TOKEN_FILE",
    )
    .option(
      "--outbox-retention <n>",
      "outbox versions kept per region stream (default 100000); env KRANE_OUTBOX_RETENTION",
    )
    .option("--pool-size <n>", "PostgreSQL connections kept open (default 10); env KRANE_POOL_SIZE")
    .option("--log-level <level>", "debug|info|warn|error (default info); env KRANE_LOG_LEVEL")
    .option(
      "--master-key-file <file>",
      "the master key that encrypts secrets at rest (32 random bytes, base64 or hex); env KRANE_MASTER_KEY_FILE, or the key itself in KRANE_MASTER_KEY. SQLite default: <database dir>/master-key, generated on first start",
    )
    .option(
      "--previous-master-key-file <file>",
      "an older master key, still accepted to unwrap data keys during a rotation (repeatable); env KRANE_PREVIOUS_MASTER_KEY_FILES (comma-separated)",
      collectList,
      [],
    )
    .option(
      "--release-allowed-kinds <list>",
      "kinds a release may hold, group/Kind comma-separated (default ConfigMap,Secret,Service,ServiceAccount,batch/Job,batch/CronJob,policy/PodDisruptionBudget,autoscaling/HorizontalPodAutoscaler); env KRANE_RELEASE_ALLOWED_KINDS",
    )
    .option(
      "--public-apex <domain>",
      "endpoints' generated public hostnames are <label>.<domain> (default krane.localhost); env KRANE_PUBLIC_APEX",
    )
    .option(
      "--organization-apex <domain>",
      "likewise for organization endpoints (default internal.<public apex>); env KRANE_ORGANIZATION_APEX",
    )
    .option(
      "--host-pattern <label>",
      "the label of a generated hostname (default {env}-{project}-{workspace}); env KRANE_HOST_PATTERN",
    )
    .option(
      "--shared-host-pattern <label>",
      "the label of a workspace's shared host for path routing (default {workspace}); env KRANE_SHARED_HOST_PATTERN",
    )
    .option(
      "--endpoint-scheme <scheme>",
      "https|http: the scheme of endpoint URLs shown (default https); env KRANE_ENDPOINT_SCHEME",
    )
    .option(
      "--dns-servers <list>",
      "DNS servers for custom domain verification, ip[:port],… (default: the system's); env KRANE_DNS_SERVERS",
    )
    .option(
      "--audit-retention <duration>",
      "how long audit events are kept (default 400d; pruned hourly); env KRANE_AUDIT_RETENTION",
    )
    .option(
      "--audit-webhook-url <url>",
      "deliver every audit event to this URL (NDJSON POSTs, at least once, HMAC-signed); env KRANE_AUDIT_WEBHOOK_URL",
    )
    .option(
      "--audit-webhook-secret-file <file>",
      "the key that signs those deliveries (X-Krane-Signature); env KRANE_AUDIT_WEBHOOK_SECRET_FILE, or the key itself in KRANE_AUDIT_WEBHOOK_SECRET",
    )
    .option(
      "--webhook-listen <host:port>",
      'pull-request webhooks of GitHub and GitLab (HTTP/1.1, POST /hooks/<id>), or "off" (default off); env KRANE_WEBHOOK_LISTEN',
    )
    .option(
      "--webhook-replay-window <duration>",
      "how old a pull-request delivery may be (default 10m); env KRANE_WEBHOOK_REPLAY_WINDOW",
    )
    .option(
      "--stream-keepalive <seconds>",
      "a quiet agent stream gets a bookmark this often; agents reconnect after two silent intervals (default 10); env KRANE_STREAM_KEEPALIVE_SECONDS",
    )
    .option(
      "--image-digests <mode>",
      '"resolve": each deploy pins its image\'s tag to the digest it names now (the registry is asked, with the workspace\'s credential), "off": images run as named (default resolve); env KRANE_IMAGE_DIGESTS',
    )
    .option(
      "--local-image-hosts <hosts>",
      "comma-separated registry hosts whose images are loaded into the nodes directly and never resolved (default krane.local); env KRANE_LOCAL_IMAGE_HOSTS",
    )
    .option(
      "--registry-ca-file <file>",
      "CA certificates (PEM) trusted for registries besides the system's; env KRANE_REGISTRY_CA_FILE",
    )
    .option(
      "--registry-private-hosts <hosts>",
      "comma-separated registry host names (no port) ctrl may reach at loopback or private addresses, e.g. an in-cluster registry; any other image host must be at a public address, so an image name cannot probe ctrl's network (default none); env KRANE_REGISTRY_PRIVATE_HOSTS",
    )
    .option(
      "--notify-allow-loopback",
      "notification channels may deliver to this machine (loopback and link-local addresses; for tests and a relay beside ctrl); env KRANE_NOTIFY_ALLOW_LOOPBACK=true",
    )
    .option(
      "--default-quota <quotas>",
      'the quotas of every workspace that sets none of its own, e.g. "cpu=8,memory=16Gi,instances=40,environments=10,previews=5,build_minutes=1000" (default: unlimited, previews 10); a workspace owner may set less, only an installation token more; env KRANE_DEFAULT_QUOTA',
    )
    .option(
      "--build-registry <host:port>",
      "turns on builds from source (krane build, deploy --source): the registry built images are pushed to, over TLS (its password: env KRANE_BUILD_REGISTRY_PASSWORD); env KRANE_BUILD_REGISTRY",
    )
    .option("--build-registry-username <name>", "the build registry's user; env KRANE_BUILD_REGISTRY_USERNAME")
    .option(
      "--build-registry-token-key <file>",
      "token mode: ctrl is the build registry's token issuer, signing with this EC P-256 key (PEM; the registry's JWKS: krane ctrl registry-jwks); each workspace pulls only its own repositories; env KRANE_BUILD_REGISTRY_TOKEN_KEY_FILE",
    )
    .option(
      "--build-registry-service <name>",
      "the build registry's auth.token.service (default krane-build-registry); env KRANE_BUILD_REGISTRY_SERVICE",
    )
    .option("--buildkitd <path>", "buildkitd (default: on PATH); env KRANE_BUILDKITD")
    .option("--buildctl <path>", "buildctl (default: on PATH); env KRANE_BUILDCTL")
    .option("--build-bases <dir>", "the base images' OCI layout (scripts/build-bases.sh); env KRANE_BUILD_BASES")
    .option(
      "--build-state-dir <dir>",
      "BuildKit's state, a cache per project (default <database dir>/builds); env KRANE_BUILD_STATE_DIR",
    )
    .option("--build-slots <n>", "builds at once (default 1); env KRANE_BUILD_SLOTS")
    .option("--build-timeout <duration>", "a build's time limit (default 15m); env KRANE_BUILD_TIMEOUT")
    .option(
      "--builds-in <where>",
      "where builds run: ctrl (default; BuildKit beside ctrl) or cluster (builder pods of the environment's first region, pulled by its agent); env KRANE_BUILDS_IN",
    )
    .option(
      "--git-ca-file <file>",
      "CA certificates (PEM) repositories' HTTPS certificates may come from, beside the system's; env KRANE_GIT_CA_FILE",
    )
    .option(
      "--public-url <url>",
      "the origin browsers reach ctrl at, e.g. https://krane.example.com when a TLS-terminating proxy is in front of ctrl on plain HTTP: the dashboard's sign-in redirect URI, the origin its calls must come from, Secure cookies (default: each request's own scheme and host; forwarded headers are never trusted); env KRANE_PUBLIC_URL",
    )
    .option(
      "--oidc-issuer <url>",
      "sign members in through this OpenID provider (https; its discovery document is read at the first sign-in); env KRANE_OIDC_ISSUER",
    )
    .option("--oidc-client-id <id>", "ctrl's client id at the provider; env KRANE_OIDC_CLIENT_ID")
    .option(
      "--oidc-client-secret-file <file>",
      "ctrl's client secret at the provider (none: a public client, PKCE only); env KRANE_OIDC_CLIENT_SECRET_FILE or KRANE_OIDC_CLIENT_SECRET",
    )
    .option(
      "--oidc-group-role <group=role>",
      "members of this provider group get this role (group=workspace:role: in that workspace only; repeatable); env KRANE_OIDC_GROUP_ROLES, comma-separated",
      collectList,
    )
    .action(async (flags: ServeFlags) => {
      const { readFileSync } = await import("node:fs");
      const { parseCtrlConfigFile, resolveCtrlSettings } = await import("../ctrl/server/config.js");
      const configPath = flags.config ?? process.env.KRANE_CONFIG;
      const file = configPath ? parseCtrlConfigFile(readFileSync(configPath, "utf8")) : {};
      const raw: RawSettings = {
        database: flags.database,
        listen: flags.listen,
        opsListen: flags.opsListen,
        tlsCert: flags.tlsCert,
        tlsKey: flags.tlsKey,
        adminToken: flags.adminToken,
        adminTokenFile: flags.adminTokenFile,
        outboxRetention: flags.outboxRetention,
        poolSize: flags.poolSize,
        logLevel: flags.logLevel,
        masterKeyFile: flags.masterKeyFile,
        previousMasterKeyFiles:
          flags.previousMasterKeyFile && flags.previousMasterKeyFile.length > 0
            ? flags.previousMasterKeyFile.join(",")
            : undefined,
        releaseAllowedKinds: flags.releaseAllowedKinds,
        publicApex: flags.publicApex,
        organizationApex: flags.organizationApex,
        hostPattern: flags.hostPattern,
        sharedHostPattern: flags.sharedHostPattern,
        endpointScheme: flags.endpointScheme,
        dnsServers: flags.dnsServers,
        auditRetention: flags.auditRetention,
        auditWebhookUrl: flags.auditWebhookUrl,
        auditWebhookSecretFile: flags.auditWebhookSecretFile,
        webhookListen: flags.webhookListen,
        webhookReplayWindow: flags.webhookReplayWindow,
        streamKeepalive: flags.streamKeepalive,
        imageDigests: flags.imageDigests,
        localImageHosts: flags.localImageHosts,
        registryCaFile: flags.registryCaFile,
        registryPrivateHosts: flags.registryPrivateHosts,
        notifyAllowLoopback: flags.notifyAllowLoopback ? "true" : undefined,
        defaultQuota: flags.defaultQuota,
        buildRegistry: flags.buildRegistry,
        buildRegistryUsername: flags.buildRegistryUsername,
        buildRegistryTokenKeyFile: flags.buildRegistryTokenKey,
        buildRegistryService: flags.buildRegistryService,
        buildkitd: flags.buildkitd,
        buildctl: flags.buildctl,
        buildBases: flags.buildBases,
        buildStateDir: flags.buildStateDir,
        buildSlots: flags.buildSlots,
        buildTimeout: flags.buildTimeout,
        buildsIn: flags.buildsIn,
        gitCaFile: flags.gitCaFile,
        oidcIssuer: flags.oidcIssuer,
        oidcClientId: flags.oidcClientId,
        oidcClientSecretFile: flags.oidcClientSecretFile,
        oidcGroupRoles:
          flags.oidcGroupRole && flags.oidcGroupRole.length > 0 ? flags.oidcGroupRole.join(",") : undefined,
        publicUrl: flags.publicUrl,
      };
      for (const k of Object.keys(raw) as (keyof RawSettings)[]) if (raw[k] === undefined) delete raw[k];
      const settings = resolveCtrlSettings(raw, process.env, file);
      const [{ pino }, { startCtrl, SHUTDOWN_GRACE_MS }] = await Promise.all([
        import("pino"),
        import("../ctrl/server/server.js"),
      ]);
      // Past this, a shutdown is stuck: the grace twice (calls, then streams) and 15 s for the rest.
      const shutdownDeadlineMs = 2 * SHUTDOWN_GRACE_MS + 15_000;
      const log = pino({ level: settings.logLevel, base: { component: "krane-ctrl" } });
      // Node prints process warnings as plain text on stderr; ctrl's log is JSON, so they go
      // through the logger instead.
      process.removeAllListeners("warning");
      process.on("warning", (w) => log.warn({ warning: w.name, detail: w.message }, "node process warning"));
      if (settings.adminTokenSource === "flag") {
        log.warn(
          "the admin token was given with --admin-token, which every user of this machine can read in the process list: use --admin-token-file or KRANE_ADMIN_TOKEN",
        );
      }
      const { hasMasterKeySource, loadKeyring } = await import("../ctrl/secrets/master-key.js");
      // Without a key (PostgreSQL and none given) ctrl serves everything but secrets, which are
      // refused with failed_precondition naming the flag, and says so once at start.
      const keyring = hasMasterKeySource(settings.masterKey)
        ? loadKeyring(settings.masterKey, (msg, file) => log.warn({ file }, msg))
        : undefined;
      if (!keyring)
        log.warn(
          "no master key (--master-key-file, KRANE_MASTER_KEY_FILE or KRANE_MASTER_KEY): secrets are refused until ctrl is started with one",
        );
      let auditWebhook: { url: string; secret: string } | undefined;
      if (settings.audit.webhookUrl !== undefined) {
        const { value, file } = settings.audit.webhookSecret;
        const secret = (value ?? (file !== undefined ? readFileSync(file, "utf8") : "")).trim();
        if (secret.length < 16)
          throw new Error(
            "the audit webhook needs a key of at least 16 characters: --audit-webhook-secret-file or KRANE_AUDIT_WEBHOOK_SECRET",
          );
        auditWebhook = { url: settings.audit.webhookUrl, secret };
      }
      let oidc: import("../ctrl/auth/oidc.js").OidcSettings | undefined;
      if (settings.oidc !== undefined) {
        const { value, file } = settings.oidc.clientSecret;
        const secret = (value ?? (file !== undefined ? readFileSync(file, "utf8") : "")).trim();
        oidc = {
          issuer: settings.oidc.issuer,
          clientId: settings.oidc.clientId,
          groupRoles: settings.oidc.groupRoles,
          ...(secret !== "" ? { clientSecret: secret } : {}),
        };
      }
      const running = await startCtrl({
        oidc,
        ...(settings.publicUrl !== undefined ? { publicUrl: settings.publicUrl } : {}),
        keyring,
        releaseKinds: settings.releaseKinds,
        databaseUrl: settings.databaseUrl,
        listen: settings.listen,
        opsListen: settings.opsListen,
        tls: settings.tls,
        outboxRetention: settings.outboxRetention,
        poolSize: settings.poolSize,
        bootstrapAdmin: { token: settings.adminToken, file: settings.adminTokenFile },
        logger: log,
        defaultMetrics: true,
        exposure: settings.exposure,
        domains: { dnsServers: settings.dnsServers },
        audit: { retentionMs: settings.audit.retentionMs, webhook: auditWebhook },
        previews: settings.previews,
        streamKeepaliveMs: settings.streamKeepaliveMs,
        images: settings.images
          ? {
              localHosts: settings.images.localHosts,
              privateHosts: settings.images.privateHosts,
              ca: settings.images.caFile ? [readFileSync(settings.images.caFile, "utf8")] : undefined,
            }
          : undefined,
        notifications: { allowLoopback: settings.notifyAllowLoopback },
        defaultQuota: settings.defaultQuota,
        builds: settings.builds
          ? {
              ...settings.builds,
              tokens: settings.builds.token
                ? await (
                    await import("../ctrl/builds/registry-token.js")
                  ).RegistryTokens.fromPem(
                    readFileSync(settings.builds.token.keyFile, "utf8"),
                    settings.builds.token.service,
                  )
                : undefined,
              // The build registry's CA whether deploys resolve digests or not (--image-digests off).
              ca: settings.builds.registryCaFile ? [readFileSync(settings.builds.registryCaFile, "utf8")] : undefined,
            }
          : undefined,
      });
      await new Promise<void>((resolve) => {
        const stop = (signal: string): void => {
          log.info({ signal }, "shutting down");
          process.off("SIGINT", stop);
          process.off("SIGTERM", stop);
          // A step that outlives the grace periods by far is stuck. Exit naming it rather than
          // wait for a SIGKILL that says nothing.
          const watchdog = setTimeout(() => {
            log.error({ step: running.shutdownStep(), afterMs: shutdownDeadlineMs }, "shutdown stuck; exiting");
            process.exit(1);
          }, shutdownDeadlineMs);
          watchdog.unref();
          running.close().then(
            () => {
              clearTimeout(watchdog);
              // Everything is closed: a handle still open would keep the process alive for nothing.
              setTimeout(() => {
                log.warn("ctrl stopped, but an open handle kept the process alive; exiting");
                process.exit(0);
              }, 2_000).unref();
              resolve();
            },
            (err: unknown) => {
              clearTimeout(watchdog);
              log.error({ err: String(err), step: running.shutdownStep() }, "shutdown failed");
              resolve();
            },
          );
        };
        process.on("SIGINT", stop);
        process.on("SIGTERM", stop);
      });
    });
  ctrl
    .command("registry-jwks")
    .description(
      "Print the JWKS the build registry's auth.token.jwks file must hold for ctrl's token key (--build-registry-token-key): the public keys of these key files (repeat --key during a rotation: the new key and the old one)",
    )
    .option("--key <file>", "an EC P-256 private key (PEM); repeatable", collectList)
    .action(async (flags: { key?: string[] }) => {
      const { readFileSync } = await import("node:fs");
      const { registryJwks } = await import("../ctrl/builds/registry-token.js");
      const keys = flags.key ?? [];
      if (keys.length === 0) throw new Error("--key: at least one key file");
      console.log(JSON.stringify(await registryJwks(keys.map((f) => readFileSync(f, "utf8"))), null, 2));
    });
  ctrl
    .command("rotate-key")
    .description(
      "Rewrap every environment's data key under the current master key (--master-key-file), unwrapping with --previous-master-key-file: a few rows in one transaction; secret values are not rewritten. Run ctrl with both keys during a rotation, then with the new one only.",
    )
    .option("--config <file>", "YAML config file, as for `ctrl serve`; env KRANE_CONFIG")
    .option("--database <url>", "SQLite file path or postgres:// URL; env KRANE_DATABASE_URL")
    .option("--master-key-file <file>", "the new (current) master key; env KRANE_MASTER_KEY_FILE or KRANE_MASTER_KEY")
    .option(
      "--previous-master-key-file <file>",
      "the key the data keys are wrapped with now (repeatable)",
      collectList,
      [],
    )
    .action(
      async (flags: {
        config?: string;
        database?: string;
        masterKeyFile?: string;
        previousMasterKeyFile: string[];
      }) => {
        const { readFileSync } = await import("node:fs");
        const { parseCtrlConfigFile, resolveCtrlSettings } = await import("../ctrl/server/config.js");
        const configPath = flags.config ?? process.env.KRANE_CONFIG;
        const file = configPath ? parseCtrlConfigFile(readFileSync(configPath, "utf8")) : {};
        const raw: RawSettings = {};
        if (flags.database !== undefined) raw.database = flags.database;
        if (flags.masterKeyFile !== undefined) raw.masterKeyFile = flags.masterKeyFile;
        if (flags.previousMasterKeyFile.length > 0) raw.previousMasterKeyFiles = flags.previousMasterKeyFile.join(",");
        const settings = resolveCtrlSettings(raw, process.env, file);
        const [{ loadKeyring }, { Store }, { rotateDataKeys }, { rewrapRegistryKeys }] = await Promise.all([
          import("../ctrl/secrets/master-key.js"),
          import("../ctrl/db/store.js"),
          import("../ctrl/domain/data-keys.js"),
          import("../ctrl/domain/registries.js"),
        ]);
        const keyring = loadKeyring({ ...settings.masterKey, generateAt: undefined }, (msg, f) =>
          console.error(`krane: ${msg} (${f})`),
        );
        const store = await Store.open({ url: settings.databaseUrl, poolSize: 2 });
        try {
          const { rewrapped, total } = await rotateDataKeys(store, keyring);
          console.log(`rewrapped ${rewrapped} of ${total} data keys under master key ${keyring.currentId}`);
          const registries = await rewrapRegistryKeys(store, keyring);
          console.log(`rewrapped ${registries.rewrapped} of ${registries.total} registry credential keys`);
        } finally {
          await store.close();
        }
      },
    );
}
