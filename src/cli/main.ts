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
// dist/cli/commands.json, and a run defines in full only the group of the command it runs; the
// other top-level commands are stand-ins with the listing's name, usage and description, which
// is all `krane --help` shows of them. Without the listing (from source), or for a word no
// command has, every group is defined as before.
import { readFileSync, writeFileSync } from "node:fs";
import { Command, Help } from "commander";
import { registerAgentCommands } from "./agent.js";
import { registerClusterCommands } from "./cluster.js";
import { registerCtrlCommands } from "./ctrl.js";
import { registerDevCommand } from "./dev.js";
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

/** A top-level command as `krane --help` lists it. */
interface Listed {
  readonly group: string;
  readonly name: string;
  readonly term: string;
  readonly description: string;
}

const LISTING_URL = new URL("./commands.json", import.meta.url);

function readListing(): Listed[] | undefined {
  try {
    const v: unknown = JSON.parse(readFileSync(LISTING_URL, "utf8"));
    return Array.isArray(v) ? (v as Listed[]) : undefined;
  } catch {
    return undefined;
  }
}

/** The command word of argv (`help <word>` included), or undefined when there is none. */
function commandWord(args: readonly string[]): string | undefined {
  const words = args.filter((a) => !a.startsWith("-"));
  return words[0] === "help" ? (words[1] ?? "help") : words[0];
}

/** Every group in full, and what each adds at the top level (written into the build as the listing). */
function defineAll(program: Command): Listed[] {
  const help = program.createHelp();
  const listed: Listed[] = [];
  for (const [group, register] of GROUPS) {
    const before = program.commands.length;
    register(program);
    for (const c of program.commands.slice(before))
      listed.push({ group, name: c.name(), term: help.subcommandTerm(c), description: help.subcommandDescription(c) });
  }
  return listed;
}

/**
 * The group of `word` in full (and `version`, which also defines --version), the others as
 * stand-ins; false when the listing has no such command.
 */
function defineFor(program: Command, listing: readonly Listed[], word: string | undefined): boolean {
  const group = word === undefined || word === "help" ? undefined : listing.find((l) => l.name === word)?.group;
  if (word !== undefined && word !== "help" && group === undefined) return false;
  const standIns = new Map<Command, Listed>();
  for (const [name, register] of GROUPS) {
    if (name === group || name === "version") {
      register(program);
      continue;
    }
    for (const l of listing.filter((x) => x.group === name)) {
      const c = new Command(l.name).description(l.description);
      standIns.set(c, l);
      program.addCommand(c);
    }
  }
  program.configureHelp({
    subcommandTerm(this: Help, c: Command): string {
      return standIns.get(c)?.term ?? Help.prototype.subcommandTerm.call(this, c);
    },
    subcommandDescription(this: Help, c: Command): string {
      return standIns.get(c)?.description ?? Help.prototype.subcommandDescription.call(this, c);
    },
  });
  return true;
}

const program = newProgram();
const listingOut = process.env.KRANE_CLI_WRITE_LISTING;
if (listingOut) {
  // The build: define everything and write the listing.
  writeFileSync(listingOut, `${JSON.stringify(defineAll(program), null, 2)}\n`);
  process.exit(0);
}
const listing = readListing();
if (!listing || !defineFor(program, listing, commandWord(process.argv.slice(2)))) defineAll(program);

await runProgram(program);
