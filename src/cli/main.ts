// The `krane` command line: one executable for every role (ctrl, agent, local cluster, dev
// mode) and the user commands. Each area registers its own subcommands.
import { Command } from "commander";
import { registerClusterCommands } from "./cluster.js";
import { registerRolloutPlanCommand } from "./rollout-plan.js";
import { registerAgentCommands } from "./agent.js";
import { registerApiTokenCommands } from "./api-token.js";
import { registerDevCommand } from "./dev.js";
import { registerCtrlCommands } from "./ctrl.js";
import { registerUserCommands } from "./user.js";
import { registerRolloutCommands } from "./rollout.js";
import { registerSentinelCommand } from "./sentinel.js";

const program = new Command()
  .name("krane")
  .description("Run untrusted user code on Kubernetes: control plane, agents and user commands.")
  .showHelpAfterError()
  .enablePositionalOptions();

registerClusterCommands(program);
registerRolloutPlanCommand(program);
registerAgentCommands(program);
registerDevCommand(program);
registerCtrlCommands(program);
registerUserCommands(program);
registerRolloutCommands(program);
registerApiTokenCommands(program);
registerSentinelCommand(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  console.error(`krane: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = process.exitCode && process.exitCode !== 0 ? process.exitCode : 1;
}
