// The `krane` command line of the npm package and the image: one executable for every role
// (ctrl, agent, local cluster, dev mode) and the user commands. Each command group registers
// itself from its own file with one line below or in program.ts (the user commands, which the
// single-file CLI holds too: single.ts); registering loads only commander, and a command loads
// what it needs (ctrl client, agent, store, cluster harness) when it runs, so `krane --help` and
// `krane version` stay quick.
// How to add a command: README.md in this folder.
//
// Defining every command's options costs commander more than the rest of a short command's
// start, so the build (scripts/build.mjs) writes the top-level listing into
// dist/cli/commands.json, and a run defines in full only the group of the command it runs
// (listing.ts). Without the listing (from source), or for a word no command has, every group is
// defined.
import { readFileSync, writeFileSync } from "node:fs";
import { registerAgentCommands } from "./agent.js";
import { registerClusterCommands } from "./cluster.js";
import { registerCtrlCommands } from "./ctrl.js";
import { registerDevCommand } from "./dev.js";
import { commandWord, defineAll, defineFor, parseListing, type Listed } from "./listing.js";
import { newProgram, runProgram, USER_GROUPS, type Group } from "./program.js";
import { registerSentinelCommand } from "./sentinel.js";

/** Servers and the local system (program.ts's SERVER_COMMANDS), then the user commands. */
const GROUPS: readonly Group[] = [
  ["ctrl", registerCtrlCommands],
  ["agent", registerAgentCommands],
  ["cluster", registerClusterCommands],
  ["dev", registerDevCommand],
  ["sentinel", registerSentinelCommand],
  ...USER_GROUPS,
];

function readListing(): Listed[] | undefined {
  try {
    return parseListing(readFileSync(new URL("./commands.json", import.meta.url), "utf8"));
  } catch {
    return undefined;
  }
}

const program = newProgram();
const listingOut = process.env.KRANE_CLI_WRITE_LISTING;
if (listingOut) {
  // The build: define everything and write the listing.
  writeFileSync(listingOut, `${JSON.stringify(defineAll(program, GROUPS), null, 2)}\n`);
  process.exit(0);
}
const listing = readListing();
if (!listing || !defineFor(program, GROUPS, listing, commandWord(process.argv.slice(2)))) defineAll(program, GROUPS);

await runProgram(program);
