import { Command } from "commander";
import { registerAgentCommands } from "./src/cli/agent.ts";
const program = new Command().enablePositionalOptions();
registerAgentCommands(program);
await program.parseAsync(process.argv);
