// `krane sentinel`: runs the routing proxy of one environment in one region until SIGTERM or
// SIGINT, then drains (stops accepting, finishes in-flight requests) and exits.
import type { Command } from "commander";
import { resolveSentinelSettings, SENTINEL_ENV, type SentinelFlags } from "../sentinel/config.js";

export function registerSentinelCommand(program: Command): void {
  const e = SENTINEL_ENV;
  program
    .command("sentinel")
    .description(
      "Run the routing proxy of one environment in one region (reads its routing table from namespace sentinel).",
    )
    .option("--environment-id <id>", `the environment served; env ${e.environmentId}`)
    .option("--region <region>", `the region; env ${e.region}`)
    .option(
      "--kubeconfig <path>",
      `kubeconfig file, or "in-cluster" (the default inside a pod); env ${e.kubeconfig}, KUBECONFIG`,
    )
    .option("--listen <address>", `address to bind both ports to (default: all); env ${e.listen}`)
    .option("--port <port>", `proxy port (default 8040); env ${e.port}`)
    .option(
      "--ops-port <port>",
      `HTTP port of /healthz, /readyz, /metrics, /status (default 8041, -1 = off); env ${e.opsPort}`,
    )
    .option("--connect-timeout-ms <ms>", `connect timeout to an instance (default 5000); env ${e.connectTimeoutMs}`)
    .option(
      "--upstream-timeout-ms <ms>",
      `wait for an instance's response headers, then 504 (default 60000); env ${e.upstreamTimeoutMs}`,
    )
    .option(
      "--body-idle-timeout-ms <ms>",
      `longest pause inside a response body (default 300000, 0 = none); env ${e.bodyIdleTimeoutMs}`,
    )
    .option(
      "--header-timeout-ms <ms>",
      `time a client has to send its request headers (default 15000); env ${e.headerTimeoutMs}`,
    )
    .option(
      "--keep-alive-timeout-ms <ms>",
      `idle keep-alive connections are closed after (default 95000); env ${e.keepAliveTimeoutMs}`,
    )
    .option(
      "--idle-timeout-ms <ms>",
      `a socket with no traffic either way is closed after (default 300000); env ${e.idleTimeoutMs}`,
    )
    .option(
      "--max-header-bytes <n>",
      `largest request head accepted, else 431 (default 16384); env ${e.maxHeaderBytes}`,
    )
    .option(
      "--drain-delay-ms <ms>",
      `on SIGTERM, how long new connections are still accepted while not ready (default 5000); env ${e.drainDelayMs}`,
    )
    .option(
      "--drain-timeout-ms <ms>",
      `on SIGTERM, how long in-flight requests may take (default 25000); env ${e.drainTimeoutMs}`,
    )
    .option(
      "--jwks-cache-ms <ms>",
      `API authentication: JWKS refreshed after this long (default 600000); env ${e.jwksCacheMs}`,
    )
    .option(
      "--jwks-cooldown-ms <ms>",
      `API authentication: least time between refetches for an unknown key (default 30000); env ${e.jwksCooldownMs}`,
    )
    .option(
      "--pod-address-map <from=to>",
      `local cluster only: connect to pod IPs in FROM_CIDR at the same offset in TO_CIDR; env ${e.podAddressMap}`,
    )
    .option(
      "--peer-service <name>",
      `rate limits: the sentinel's Service in namespace sentinel, whose EndpointSlices list the replicas to exchange counts with (default: none, each replica counts alone); env ${e.peerService}, with the exchange's HMAC key in ${e.peerSecret} (never a flag: argv is visible to every process)`,
    )
    .option("--peer-port <port>", `rate limits: port of the replicas' exchange (default 8043); env ${e.peerPort}`)
    .option("--log-level <level>", `debug|info|warn|error (default info); env ${e.logLevel}`)
    .action(async (flags: SentinelFlags) => {
      const { settings, problems } = resolveSentinelSettings(flags, process.env);
      if (!settings) throw new Error(`invalid sentinel configuration:\n  ${problems.join("\n  ")}`);
      // The proxy and the logger load only when a sentinel runs (krane --help stays light).
      const [{ pino }, { Sentinel }] = await Promise.all([import("pino"), import("../sentinel/sentinel.js")]);
      const log = pino({
        level: settings.logLevel,
        base: { component: "krane-sentinel", environmentId: settings.environmentId, region: settings.region },
      });
      const sentinel = new Sentinel({ settings, log });
      await sentinel.start();
      await new Promise<void>((resolve) => {
        const stop = (signal: string): void => {
          process.off("SIGINT", onInt);
          process.off("SIGTERM", onTerm);
          log.info({ signal }, "stopping");
          // SIGTERM comes from the kubelet while endpoints are still being withdrawn; SIGINT from a
          // person at a terminal, who waits for nothing.
          sentinel.drain(signal === "SIGTERM").then(resolve, (err: unknown) => {
            log.error({ err: String(err) }, "drain failed");
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
