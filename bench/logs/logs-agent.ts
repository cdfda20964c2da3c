// The agent's log path alone, in a process of its own (`npm run bench -- logs`, its first part):
// the agent's own LogChannel, with its own connection to ctrl (createCtrlConnection) and its own
// Kubernetes client, pointed at the stand-in API server (logs-standin.ts). Nothing else of the
// agent runs, so its CPU is the log path's.
//
//   KRANE_PROFILE=<dir> to write a CPU profile (node --cpu-prof) is done by the caller.
//   node --import tsx bench/logs/logs-agent.ts <ctrl-url> <cluster-token> <region> <api-url> <ca-file>
import { readFileSync } from "node:fs";
import { createCtrlConnection } from "../../src/agent/ctrl-client.js";
import { LogChannel } from "../../src/agent/logs/channel.js";
import { silentLogger } from "../../src/base/log.js";
import { KubeClient } from "../../src/kube/client.js";

const [ctrlUrl, token, region, apiUrl, caFile] = process.argv.slice(2);
const ca = readFileSync(caFile ?? "");
const kube = new KubeClient({
  getCurrentCluster: () => ({ server: apiUrl ?? "" }),
  applyToHTTPSOptions: async (o) => {
    o.ca = ca;
  },
});
const conn = createCtrlConnection(ctrlUrl ?? "", token ?? "");
const channel = new LogChannel({
  transport: conn.transport,
  kube,
  region: region ?? "",
  log: silentLogger,
  leading: () => true,
});
channel.start();
// Ends at once (a CPU profile is written on exit): the sessions' state does not matter here.
process.on("SIGTERM", () => process.exit(0));
process.on("SIGINT", () => process.exit(0));
