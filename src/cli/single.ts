// The single-file CLI's entry: scripts/build-single.mjs compiles it, with everything it loads,
// into one executable that needs no Node.js (`bun build --compile`; why Bun: docs/scaling.md,
// "The single-file CLI"). It holds the user commands (USER_GROUPS) and none of the servers: they
// need native modules and the npm package's files, so `krane ctrl …`, `krane agent` and the others
// say where they run instead, and `--help` lists none of them. As dist/cli/main.js does, a run
// defines in full only the group of its command, from the listing the build writes into the code
// (KRANE_SINGLE_FILE_LISTING): defining every group took about a third of `krane status`'s CPU
// time in the single file (docs/scaling.md).
import { commandWord, defineAll, defineFor, parseListing } from "./listing.js";
import { newProgram, runProgram, SERVER_COMMANDS as servers, USER_GROUPS } from "./program.js";

/** dist/cli/commands.json's text: scripts/build-single.mjs replaces this name with it. */
declare const KRANE_SINGLE_FILE_LISTING: string | undefined;

/** What `krane <server command>` says in the single file. */
function elsewhere(name: string): string {
  return `${name} is not in this single-file krane (user commands only): ${servers.join(", ")} run from the npm package (npm install -g krane) or the container image; see docs/running-for-real.md#install`;
}

const program = newProgram().description(
  "The user commands of krane, which runs untrusted user code on Kubernetes (single file: no Node.js needed).",
);
const listing = typeof KRANE_SINGLE_FILE_LISTING === "string" ? parseListing(KRANE_SINGLE_FILE_LISTING) : undefined;
const word = commandWord(process.argv.slice(2));
if (!listing || !defineFor(program, USER_GROUPS, listing, word)) defineAll(program, USER_GROUPS);
for (const name of servers)
  program
    .command(name, { hidden: true })
    .helpOption(false)
    .allowUnknownOption()
    .argument("[args...]")
    .action(() => {
      throw new Error(elsewhere(name));
    });
program.addHelpText(
  "after",
  `\nThis single file has the user commands only. The servers and the local system\n(${servers.join(", ")}) run from the npm package or the container image.`,
);
void runProgram(program);
