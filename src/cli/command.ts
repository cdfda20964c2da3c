// What every user command file uses, kept light so that defining the whole command tree (for
// `krane --help`) loads only commander: the connection and output options, argument parsers,
// and userAction, which loads the ctrl client, the generated API and the table printer only
// when a command actually runs.
import { Option, type Command } from "commander";
import { EXIT_UNAVAILABLE } from "./exit-codes.js";
import type { ConnectionFlags, UserContext } from "./user-client.js";

export type { ConnectionFlags, UserContext } from "./user-client.js";

/** Adds the connection and output options to a user command. */
export function withConnection(cmd: Command, opts: { workspace?: boolean } = {}): Command {
  cmd
    .addOption(new Option("--ctrl-url <url>", "ctrl's API URL").env("KRANE_CTRL_URL").default("http://127.0.0.1:7070"))
    .addOption(new Option("--token <token>", "user API token").env("KRANE_TOKEN"))
    .addOption(new Option("-o, --output <format>", "table or json").choices(["table", "json"]).default("table"))
    .addOption(
      new Option(
        "--retry-for <duration>",
        `retry calls this long while ctrl or its database is unavailable (0 disables; creates are repeated under their Idempotency-Key, never applied twice), then exit ${EXIT_UNAVAILABLE}`,
      )
        .env("KRANE_RETRY_FOR")
        .default("10s"),
    );
  if (opts.workspace)
    cmd.addOption(
      new Option("-w, --workspace <slug>", "workspace (default: your token's, or the only one)").env("KRANE_WORKSPACE"),
    );
  return cmd;
}

/**
 * A commander action for a command that talks to ctrl: commander passes the positional
 * arguments, then the options, then the command; `body` gets a connected context first.
 * Errors from ctrl become one line "code: message" and a non-zero exit (see user-client.ts).
 */
export function userAction<A extends unknown[]>(
  body: (ctx: UserContext, ...args: A) => Promise<void>,
): (...args: unknown[]) => Promise<void> {
  return async (...args: unknown[]) => {
    const flags = args[args.length - 2] as ConnectionFlags;
    const { runUserCommand } = await import("./user-client.js");
    await runUserCommand(flags, (ctx) => body(ctx, ...(args as A)));
  };
}

/** A user command (`cmd`, its own options given) with the connection options and `body` as its action. */
export function userCommand<A extends unknown[]>(
  cmd: Command,
  body: (ctx: UserContext, ...args: A) => Promise<void>,
): Command {
  return withConnection(cmd).action(userAction(body));
}

/** The same for a command about something in a workspace: it also takes --workspace. */
export function workspaceCommand<A extends unknown[]>(
  cmd: Command,
  body: (ctx: UserContext, ...args: A) => Promise<void>,
): Command {
  return withConnection(cmd, { workspace: true }).action(userAction(body));
}

/** The workspace and the "project/env" target (checked first): what a request about one environment names. */
export async function environmentRef(
  x: UserContext,
  target: string,
): Promise<{ workspace: string; project: string; environment: string }> {
  const { project, environment } = splitTarget(target);
  return { workspace: await x.ctrl.workspace(), project, environment };
}

/** "project/env" → both parts. */
export function splitTarget(target: string): { project: string; environment: string } {
  const m = /^([^/]+)\/([^/]+)$/.exec(target);
  if (!m || m[1] === undefined || m[2] === undefined) throw new Error(`expected <project>/<env>, got "${target}"`);
  return { project: m[1], environment: m[2] };
}

/** A repeatable option's accumulator. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

export function intArg(name: string): (v: string) => number {
  return (v) => {
    if (!/^-?\d+$/.test(v)) throw new Error(`${name}: expected an integer, got "${v}"`);
    return Number(v);
  };
}

export function parseKeyValue(what: string, v: string): { key: string; value: string } {
  const i = v.indexOf("=");
  if (i <= 0) throw new Error(`${what}: expected KEY=VALUE, got "${v}"`);
  return { key: v.slice(0, i), value: v.slice(i + 1) };
}

/** A Unix-milliseconds time as ISO 8601 to the second; "-" for none. */
export function when(ms: bigint): string {
  return ms === 0n ? "-" : new Date(Number(ms)).toISOString().replace(/\.\d+Z$/, "Z");
}

/** All of standard input, as UTF-8. */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(Buffer.isBuffer(c) ? c : Buffer.from(String(c)));
  return Buffer.concat(chunks).toString("utf8");
}

/** Standard input as one value: a trailing line break (from echo, or a file) is not part of it. */
export async function readStdinValue(): Promise<string> {
  return (await readStdin()).replace(/\r?\n$/, "");
}

/** A secret from a file, stdin ("-"), or an environment variable, never from the command line. */
export async function readSecret(flag: string, spec: string | undefined): Promise<string> {
  if (spec === undefined) return "";
  if (spec === "-") return (await readStdin()).trim();
  if (spec.startsWith("env:")) {
    const v = process.env[spec.slice(4)];
    if (v === undefined) throw new Error(`${flag}: environment variable ${spec.slice(4)} is not set`);
    return v.trim();
  }
  const { readFile } = await import("node:fs/promises");
  return (await readFile(spec, "utf8")).trim();
}
