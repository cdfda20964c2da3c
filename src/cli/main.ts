// The `krane` command line: one executable for every role (ctrl, agent, local cluster, dev
// mode) and the user commands. Each command group registers itself from its own file with one
// line below; registering loads only commander, and a command loads what it needs (ctrl client,
// agent, store, cluster harness) when it runs, so `krane --help` and `krane version` stay quick.
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
import { registerApiTokenCommands } from "./api-token.js";
import { registerAuditCommands } from "./audit.js";
import { registerClusterCommands } from "./cluster.js";
import { registerCtrlCommands } from "./ctrl.js";
import { registerDeployCommands } from "./deploy.js";
import { registerDevCommand } from "./dev.js";
import { registerEnvCommands } from "./env.js";
import { registerEventsCommand } from "./events.js";
import { registerExposureCommands } from "./exposure.js";
import { registerPreviewCommands } from "./preview.js";
import { registerProjectCommands } from "./project.js";
import { registerRegionCommands } from "./region.js";
import { registerReleaseCommands } from "./release.js";
import { registerRolloutCommands } from "./rollout.js";
import { registerSentinelCommand } from "./sentinel.js";
import { registerSettingsCommands } from "./settings.js";
import { registerStatusCommand } from "./status.js";
import { registerLogsCommand } from "./logs.js";
import { registerMemberCommands } from "./member.js";
import { registerVersionCommand } from "./version.js";
import { registerWorkspaceCommands } from "./workspace.js";

/** One command group: its registration, and (in the listing) the top-level commands it adds. */
const GROUPS: [string, (program: Command) => void][] = [
  // Servers and the local system.
  ["ctrl", registerCtrlCommands],
  ["agent", registerAgentCommands],
  ["cluster", registerClusterCommands],
  ["dev", registerDevCommand],
  // User commands against ctrl's public API.
  ["workspace", registerWorkspaceCommands],
  ["project", registerProjectCommands],
  ["env", registerEnvCommands],
  ["deploy", registerDeployCommands],
  ["settings", registerSettingsCommands],
  ["release", registerReleaseCommands],
  ["rollout", registerRolloutCommands],
  ["status", registerStatusCommand],
  ["events", registerEventsCommand],
  ["logs", registerLogsCommand],
  ["exposure", registerExposureCommands],
  ["preview", registerPreviewCommands],
  ["region", registerRegionCommands],
  ["api-token", registerApiTokenCommands],
  ["member", registerMemberCommands],
  ["audit", registerAuditCommands],
  ["sentinel", registerSentinelCommand],
  ["version", registerVersionCommand],
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

function newProgram(): Command {
  return new Command()
    .name("krane")
    .description("Run untrusted user code on Kubernetes: control plane, agents and user commands.")
    .showHelpAfterError()
    .enablePositionalOptions();
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

try {
  await program.parseAsync(process.argv);
} catch (err) {
  console.error(`krane: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = process.exitCode && process.exitCode !== 0 ? process.exitCode : 1;
}
