// The top-level command listing: each top-level command's group, name, usage and description, as
// the build writes it (dist/cli/commands.json, and into the single file). Defining every
// command's options is most of a short command's start, so a run with a listing defines in full
// only the group of the command it runs; the other top-level commands are stand-ins with the
// listing's name, usage and description, which is all `krane --help` shows of them.
import { Command, Help } from "commander";
import type { Group } from "./program.js";

/** A top-level command as `krane --help` lists it. */
export interface Listed {
  readonly group: string;
  readonly name: string;
  readonly term: string;
  readonly description: string;
}

/** A listing's JSON text, or undefined when it is not a list. */
export function parseListing(text: string): Listed[] | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return Array.isArray(v) ? (v as Listed[]) : undefined;
  } catch {
    return undefined;
  }
}

/** The command word of argv (`help <word>` included), or undefined when there is none. */
export function commandWord(args: readonly string[]): string | undefined {
  const words = args.filter((a) => !a.startsWith("-"));
  return words[0] === "help" ? (words[1] ?? "help") : words[0];
}

/** Every group in full, and what each adds at the top level (written into the build as the listing). */
export function defineAll(program: Command, groups: readonly Group[]): Listed[] {
  const help = program.createHelp();
  const listed: Listed[] = [];
  for (const [group, register] of groups) {
    const before = program.commands.length;
    register(program);
    for (const c of program.commands.slice(before))
      listed.push({ group, name: c.name(), term: help.subcommandTerm(c), description: help.subcommandDescription(c) });
  }
  return listed;
}

/**
 * The group of `word` in full (and `version`, which also defines --version), the others as
 * stand-ins; false when the listing has no such command among `groups`.
 */
export function defineFor(
  program: Command,
  groups: readonly Group[],
  listing: readonly Listed[],
  word: string | undefined,
): boolean {
  const names = new Set(groups.map(([name]) => name));
  const group =
    word === undefined || word === "help"
      ? undefined
      : listing.find((l) => l.name === word && names.has(l.group))?.group;
  if (word !== undefined && word !== "help" && group === undefined) return false;
  const standIns = new Map<Command, Listed>();
  for (const [name, register] of groups) {
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
