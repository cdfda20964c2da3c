// The `krane` command line: one executable for every role (ctrl, agent, local cluster, dev
// mode) and the user commands. Each command group registers itself from its own file with one
// line below; registering loads only commander, and a command loads what it needs (ctrl client,
// agent, store, cluster harness) when it runs, so `krane --help` and `krane version` stay quick.
// How to add a command: README.md in this folder.
import { Command } from "commander";
import { registerAgentCommands } from "./agent.js";
import { registerApiTokenCommands } from "./api-token.js";
import { registerAuditCommands } from "./audit.js";
import { registerClusterCommands } from "./cluster.js";
import { registerCtrlCommands } from "./ctrl.js";
import { registerDeployCommands } from "./deploy.js";
import { registerDevCommand } from "./dev.js";
import { registerEnvCommands } from "./env.js";
import { registerExposureCommands } from "./exposure.js";
import { registerPreviewCommands } from "./preview.js";
import { registerProjectCommands } from "./project.js";
import { registerRegionCommands } from "./region.js";
import { registerReleaseCommands } from "./release.js";
import { registerRolloutCommands } from "./rollout.js";
import { registerSentinelCommand } from "./sentinel.js";
import { registerSettingsCommands } from "./settings.js";
import { registerStatusCommand } from "./status.js";
import { registerVersionCommand } from "./version.js";
import { registerWorkspaceCommands } from "./workspace.js";

const program = new Command()
  .name("krane")
  .description("Run untrusted user code on Kubernetes: control plane, agents and user commands.")
  .showHelpAfterError()
  .enablePositionalOptions();

// Servers and the local system.
registerCtrlCommands(program);
registerAgentCommands(program);
registerClusterCommands(program);
registerDevCommand(program);
// User commands against ctrl's public API.
registerWorkspaceCommands(program);
registerProjectCommands(program);
registerEnvCommands(program);
registerDeployCommands(program);
registerSettingsCommands(program);
registerReleaseCommands(program);
registerRolloutCommands(program);
registerStatusCommand(program);
registerExposureCommands(program);
registerPreviewCommands(program);
registerRegionCommands(program);
registerApiTokenCommands(program);
registerAuditCommands(program);
registerSentinelCommand(program);
registerVersionCommand(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  console.error(`krane: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = process.exitCode && process.exitCode !== 0 ? process.exitCode : 1;
}
