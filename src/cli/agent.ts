// `krane agent`: runs the agent of one cluster/region until SIGINT/SIGTERM. The agent, its
// Kubernetes client and pino are loaded only when the command runs.
import type { Command } from "commander";
import { AGENT_NAMESPACE } from "../contracts/cluster.js";

interface AgentFlags {
  config?: string;
  ctrlUrl?: string;
  token?: string;
  tokenFile?: string;
  region?: string;
  kubeconfig?: string;
  concurrency?: string;
  resyncPeriod?: string;
  kubeQps?: string;
  opsPort?: string;
  agentId?: string;
  logLevel?: string;
  sentinelImage?: string;
  secretStoreProvider?: string;
  secretStoreParameters?: string;
  leaderElect?: boolean;
  leaderElectionNamespace?: string;
  publicGateway?: string;
  organizationGateway?: string;
  certificateIssuer?: string;
  endpointCertificates?: boolean;
  httpsGatewayClass?: string;
  httpsPort?: string;
  envoyGatewayPolicies?: boolean;
  podAddressMap?: string;
  measureInterval?: string;
  ctrlTimeout?: string;
  startupCpuBoost?: string;
  builds?: string;
  buildctl?: string;
  buildBases?: string;
  builderImage?: string;
}

export function registerAgentCommands(program: Command): void {
  program
    .command("agent")
    .description("Run the krane agent of one cluster: pull desired state from ctrl, apply it, report what runs.")
    .option("--config <file>", "YAML config file (keys as the flags, camelCase or kebab-case); env KRANE_AGENT_CONFIG")
    .option("--ctrl-url <url>", "ctrl's ClusterService URL; env KRANE_CTRL_URL")
    .option("--token <token>", "the cluster's bearer token for ctrl; env KRANE_CTRL_TOKEN")
    .option("--token-file <file>", "read the token from a file")
    .option("--region <region>", "the region this cluster serves; env KRANE_REGION")
    .option(
      "--kubeconfig <path>",
      'kubeconfig file, or "in-cluster" (the pod\'s ServiceAccount); env KRANE_KUBECONFIG, KUBECONFIG',
    )
    .option("--concurrency <n>", "keys reconciled in parallel per controller (default 16); env KRANE_AGENT_CONCURRENCY")
    .option("--resync-period <seconds>", "resync period (default 60); env KRANE_RESYNC_PERIOD_SECONDS")
    .option("--kube-qps <n>", "Kubernetes requests per second (default 100); env KRANE_KUBE_QPS")
    .option("--ops-port <port>", "HTTP port of /healthz, /readyz, /metrics (default 8071); env KRANE_OPS_PORT")
    .option("--agent-id <id>", "a stable id of this agent (default host-pid); env KRANE_AGENT_ID")
    .option("--log-level <level>", "debug|info|warn|error (default info); env KRANE_LOG_LEVEL")
    .option(
      "--leader-elect",
      "elect a leader among several replicas of this agent with a Lease (only the leader writes); env KRANE_LEADER_ELECT",
    )
    .option(
      "--leader-election-namespace <ns>",
      `namespace of the Lease (default ${AGENT_NAMESPACE}); env KRANE_LEADER_ELECTION_NAMESPACE`,
    )
    .option(
      "--secret-store-provider <name>",
      "the Secrets Store CSI provider of this cluster (e.g. vault), for external secrets; env KRANE_SECRET_STORE_PROVIDER",
    )
    .option(
      "--secret-store-parameters <k=v,...>",
      "its SecretProviderClass parameters (e.g. vaultAddress=https://vault:8200,roleName=krane); env KRANE_SECRET_STORE_PARAMETERS",
    )
    .option(
      "--pod-address-map <from=to>",
      "local cluster only: reach pod IPs in FROM_CIDR at the same offset in TO_CIDR on this machine; env KRANE_POD_ADDRESS_MAP",
    )
    .option(
      "--measure-interval <seconds>",
      "how often the sentinels' per-revision metrics are collected for rollout analysis (default 10, 0: off); env KRANE_MEASURE_INTERVAL_SECONDS",
    )
    .option(
      "--ctrl-timeout <seconds>",
      "how long ctrl has to accept a stream and to answer an HTTP/2 PING (sent after twice this without data) (default 5); env KRANE_CTRL_TIMEOUT_SECONDS",
    )
    .option(
      "--startup-cpu-boost <millicores>",
      "a starting instance's CPU limit until it is Ready, then its own (in-place resize; default 1000, 0: off); env KRANE_STARTUP_CPU_BOOST_MILLICORES",
    )
    .option(
      "--sentinel-image <image>",
      "krane's sentinel image, for environments that name none (default: krane's image of this build); env KRANE_SENTINEL_IMAGE",
    )
    .option(
      "--public-gateway <ns/name[/listener]>",
      "the platform's external Gateway: public endpoints and custom domains attach there; env KRANE_PUBLIC_GATEWAY",
    )
    .option(
      "--organization-gateway <ns/name[/listener]>",
      "the platform's internal Gateway, for organization endpoints; env KRANE_ORGANIZATION_GATEWAY",
    )
    .option(
      "--certificate-issuer <Kind/name>",
      "cert-manager issuer of custom domains' Certificates (ClusterIssuer/… or Issuer/…); env KRANE_CERTIFICATE_ISSUER",
    )
    .option(
      "--endpoint-certificates",
      "also a Certificate per generated endpoint hostname (default: the Gateway's wildcard certificate covers them); env KRANE_ENDPOINT_CERTIFICATES",
    )
    .option(
      "--https-gateway-class <class>",
      "serve the certificates: a Gateway of this GatewayClass per environment, one HTTPS listener per public hostname with a Certificate; env KRANE_HTTPS_GATEWAY_CLASS",
    )
    .option("--https-port <port>", "port of those HTTPS listeners (default 443); env KRANE_HTTPS_PORT")
    .option(
      "--envoy-gateway-policies",
      "on Envoy Gateway clusters: delete the JWT SecurityPolicies earlier krane versions rendered (none are rendered now: the sentinel enforces); env KRANE_ENVOY_GATEWAY_POLICIES",
    )
    .option(
      "--builds <n>",
      "run up to n builds from source at once in builder pods (ctrl in --builds-in cluster mode hands them to this region; default 0: none); env KRANE_BUILDS",
    )
    .option("--buildctl <path>", "buildctl, for those builds (default: on PATH); env KRANE_BUILDCTL")
    .option("--build-bases <dir>", "the base images' OCI layout (scripts/build-bases.sh); env KRANE_BUILD_BASES")
    .option(
      "--builder-image <image>",
      "the builder pods' image (scripts/build-builder.sh; default krane.local/builder:builder); env KRANE_BUILDER_IMAGE",
    )
    .action(async (flags: AgentFlags) => {
      const { readFileSync } = await import("node:fs");
      const { builderSettingsOf, gatewaySettingsOf, parseConfigFile, parseStoreParameters, resolveAgentSettings } =
        await import("../agent/config.js");
      const configPath = flags.config ?? process.env.KRANE_AGENT_CONFIG;
      const file = configPath ? parseConfigFile(readFileSync(configPath, "utf8")) : {};
      const token = flags.token ?? (flags.tokenFile ? readFileSync(flags.tokenFile, "utf8").trim() : undefined);
      const { settings, problems } = resolveAgentSettings(
        {
          ctrlUrl: flags.ctrlUrl,
          token,
          region: flags.region,
          kubeconfig: flags.kubeconfig,
          concurrency: flags.concurrency,
          resyncPeriodSeconds: flags.resyncPeriod,
          kubeQps: flags.kubeQps,
          opsPort: flags.opsPort,
          agentId: flags.agentId,
          logLevel: flags.logLevel,
          sentinelImage: flags.sentinelImage,
          secretStoreProvider: flags.secretStoreProvider,
          secretStoreParameters: flags.secretStoreParameters,
          leaderElect: flags.leaderElect,
          leaderElectionNamespace: flags.leaderElectionNamespace,
          publicGateway: flags.publicGateway,
          organizationGateway: flags.organizationGateway,
          certificateIssuer: flags.certificateIssuer,
          endpointCertificates: flags.endpointCertificates,
          httpsGatewayClass: flags.httpsGatewayClass,
          httpsPort: flags.httpsPort,
          envoyGatewayPolicies: flags.envoyGatewayPolicies,
          podAddressMap: flags.podAddressMap,
          measureIntervalSeconds: flags.measureInterval,
          ctrlTimeoutSeconds: flags.ctrlTimeout,
          startupCpuBoostMillicores: flags.startupCpuBoost,
          builds: flags.builds,
          buildctl: flags.buildctl,
          buildBases: flags.buildBases,
          builderImage: flags.builderImage,
        },
        process.env,
        file,
      );
      if (!settings) throw new Error(`invalid agent configuration:\n  ${problems.join("\n  ")}`);
      const kubeconfig =
        settings.kubeconfig === "in-cluster"
          ? (await import("./in-cluster.js")).loadInClusterConfig()
          : settings.kubeconfig;
      const [{ pino }, { Agent }] = await Promise.all([import("pino"), import("../agent/agent.js")]);
      const log = pino({ level: settings.logLevel, base: { component: "krane-agent", region: settings.region } });
      const agent = new Agent({
        ctrlUrl: settings.ctrlUrl,
        token: settings.token,
        region: settings.region,
        kubeconfig,
        concurrency: settings.concurrency,
        resyncPeriodMs: settings.resyncPeriodSeconds * 1000,
        kubeQps: settings.kubeQps,
        opsPort: settings.opsPort,
        agentId: settings.agentId,
        sentinelImage: settings.sentinelImage,
        secretStore: settings.secretStoreProvider
          ? {
              provider: settings.secretStoreProvider,
              parameters: parseStoreParameters(settings.secretStoreParameters ?? ""),
            }
          : undefined,
        leaderElection: settings.leaderElect ? { namespace: settings.leaderElectionNamespace } : undefined,
        gateway: gatewaySettingsOf(settings),
        podAddressMap: settings.podAddressMap,
        measureIntervalMs: settings.measureIntervalSeconds * 1000,
        ctrlTimeoutMs: Math.round(settings.ctrlTimeoutSeconds * 1000),
        startupCpuBoostMillicores: settings.startupCpuBoostMillicores,
        builds: builderSettingsOf(settings),
        log,
      });
      await agent.start();
      await new Promise<void>((resolve) => {
        const stop = (signal: string): void => {
          log.info({ signal }, "stopping");
          process.off("SIGINT", onInt);
          process.off("SIGTERM", onTerm);
          agent.stop().then(resolve, (err: unknown) => {
            log.error({ err: String(err) }, "stop failed");
            resolve();
          });
        };
        const onInt = (): void => stop("SIGINT");
        const onTerm = (): void => stop("SIGTERM");
        process.on("SIGINT", onInt);
        process.on("SIGTERM", onTerm);
      });
    });
}
