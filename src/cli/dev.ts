// `krane dev` (what `npm start` runs): the whole system locally until Ctrl-C. Everything it
// runs is loaded only when the command does.
import type { Command } from "commander";

const say = (line: string) => console.error(line);

export function registerDevCommand(program: Command): void {
  program
    .command("dev")
    .description("run everything locally: a real local Kubernetes, ctrl on SQLite, an agent, and an example deployment")
    .option("--kubeconfig <path>", "use this cluster instead of starting a local one")
    .option("--ctrl-port <port>", "ctrl's API port", "7070")
    .option("--data-dir <dir>", "keep ctrl's SQLite database here (default: a temporary directory)")
    .option("--log-level <level>", "log level of ctrl and the agent", "error")
    .option("--exit-when-ready", "stop once the example runs (for scripts and CI)")
    .option(
      "--nodes <kind>",
      "real: real nodes (containers under gVisor; needs root); standins: KWOK nodes and pod stand-ins; auto: real where the machine allows it",
      "auto",
    )
    .option(
      "--tls",
      "also run the local Gateway and cert-manager, and serve the example over HTTPS with its own certificate",
    )
    .action(
      async (opts: {
        kubeconfig?: string;
        ctrlPort: string;
        dataDir?: string;
        logLevel: string;
        exitWhenReady?: boolean;
        nodes: string;
        tls?: boolean;
      }) => {
        if (!["auto", "real", "standins"].includes(opts.nodes))
          throw new Error(`--nodes: auto, real or standins, not "${opts.nodes}"`);
        const [
          { exampleConverged, exampleEntry, exampleStatus, servesItsCertificate, startDev, EXAMPLE },
          { renderEnvironmentStatus },
          { toJson },
          { GetEnvironmentStatusResponseSchema },
        ] = await Promise.all([
          import("../dev/dev.js"),
          import("./status-view.js"),
          import("@bufbuild/protobuf"),
          import("../gen/krane/ctrl/v1/api_pb.js"),
        ]);
        const session = await startDev({
          kubeconfig: opts.kubeconfig,
          ctrlPort: Number(opts.ctrlPort),
          dataDir: opts.dataDir,
          logLevel: opts.logLevel,
          nodes: opts.nodes as "auto" | "real" | "standins",
          tls: opts.tls,
          say,
        });
        let stopping = false;
        const stop = async (why: string) => {
          if (stopping) return;
          stopping = true;
          say(`\n${why}: stopping the agent, ctrl and the local cluster…`);
          await session.stop();
          say("stopped; nothing is left running");
        };
        process.once("SIGINT", () => void stop("interrupted").then(() => process.exit(130)));
        process.once("SIGTERM", () => void stop("terminated").then(() => process.exit(143)));

        const deadline = Date.now() + 180_000;
        const local = session.cluster !== undefined;
        let status = await exampleStatus(session.api);
        // With --tls the example's endpoint must be served too: certificate issued, listener
        // programmed, and then the certificate really presented on the listener — the Gateway
        // says Programmed a moment before it serves the certificate (servesItsCertificate).
        const https = session.https;
        let httpsServed = https === undefined;
        const servedOverHttps = async (): Promise<boolean> =>
          (httpsServed ||=
            https !== undefined &&
            status.endpoints.every((e) => e.regions.every((r) => r.readiness === "ready")) &&
            (await servesItsCertificate(https)));
        while (!(exampleConverged(status, local) && (await servedOverHttps())) && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 500));
          status = await exampleStatus(session.api);
        }
        console.log(renderEnvironmentStatus(toJson(GetEnvironmentStatusResponseSchema, status)));
        if (!exampleConverged(status, local)) say("the example has not converged yet; see `krane status` below");
        say("");
        say("try, in another terminal:");
        say(`  export KRANE_CTRL_URL=${session.ctrlUrl} KRANE_TOKEN=${session.userToken}`);
        if (session.kubeconfigPath) say(`  export KUBECONFIG=${session.kubeconfigPath}`);
        say(`  npx krane status ${EXAMPLE.project}/${EXAMPLE.environment}`);
        const entry = await exampleEntry(session);
        if (entry) {
          say(
            `  curl -s ${entry}                # through the sentinel: the answering instance, its revision and image`,
          );
          say(
            `  while sleep 0.2; do curl -s ${entry}; echo; done   # then deploy in a third terminal and watch traffic move`,
          );
        }
        if (https && httpsServed)
          say(`  curl -s --cacert ${https.caFile} ${https.url}   # HTTPS through the local Gateway`);
        else if (https)
          say(
            `  (HTTPS: ${https.url} does not serve its certificate yet; \`npx krane status ${EXAMPLE.project}/${EXAMPLE.environment}\` shows when it does)`,
          );
        say(`  npx krane deploy ${EXAMPLE.project}/${EXAMPLE.environment} --image ${EXAMPLE.nextImage}`);
        say("");
        say(`the dashboard: ${session.ctrlUrl}/ (sign in with the token above)`);
        if (opts.exitWhenReady) {
          await stop("ready");
          if (!exampleConverged(status) || !httpsServed) process.exitCode = 1;
          return;
        }
        say("Ctrl-C stops everything.");
        setInterval(() => {}, 1 << 30); // keep running until a signal arrives
      },
    );
}
