// `npm run bench`: runs every area's benchmark in turn and prints its figures.
// Pass area names to run only some: `npm run bench -- cluster ctrl`.
import { benchAgent } from "./agent/agent.js";
import { benchAudit } from "./audit/audit.js";
import { benchAutoscale } from "./autoscale/autoscale.js";
import { benchBuild } from "./build.js";
import { benchCli } from "./cli/cli.js";
import { benchCluster } from "./cluster.js";
import { benchCtrl } from "./ctrl/ctrl.js";
import { benchReleases } from "./releases.js";
import { benchGateway } from "./gateway/gateway.js";
import { benchMeasurements } from "./measurements.js";
import { benchRollout } from "./rollout/rollout.js";
import { benchRolloutPropagation } from "./rollout-e2e.js";
import { benchRouting } from "./routing.js";
import { benchSentinel } from "./sentinel/sentinel.js";
import { benchEdge } from "./sentinel/rate-limit.js";
import { benchRolloutConformance } from "./rollout-conformance.js";
import { benchFaults } from "./faults.js";
import { benchOutages } from "./outages.js";
import { benchProgressive } from "./progressive.js";
import { benchNodes } from "./nodes.js";
import { benchLogs } from "./logs/logs.js";
import { benchDashboard } from "./dashboard.js";
import { benchObserve } from "./observe/observe.js";

const benches: Record<string, () => Promise<void>> = {
  cluster: benchCluster,
  ctrl: benchCtrl,
  rollout: benchRollout,
  "rollout-e2e": benchRolloutPropagation,
  "rollout-conformance": benchRolloutConformance,
  agent: benchAgent,
  sentinel: benchSentinel,
  edge: benchEdge,
  routing: benchRouting,
  cli: benchCli,
  gateway: benchGateway,
  faults: benchFaults,
  outages: benchOutages,
  releases: benchReleases,
  progressive: benchProgressive,
  measurements: benchMeasurements,
  audit: benchAudit,
  nodes: benchNodes,
  logs: benchLogs,
  dashboard: benchDashboard,
  autoscale: benchAutoscale,
  build: benchBuild,
  observe: benchObserve,
};

const wanted = process.argv.slice(2);
for (const [name, run] of Object.entries(benches)) {
  if (wanted.length > 0 && !wanted.includes(name)) continue;
  console.log(`\n== ${name}`);
  await run();
}
