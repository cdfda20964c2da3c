// How the integration tests run the `krane` CLI: `node bin/krane.js` (the npm package's), or,
// with KRANE_TEST_CLI naming an executable, that executable with no Node.js on its PATH: the
// single-file CLI (dist/single-file/…), whose test (test/integration/ctrl/cli-single-file.test.ts)
// runs the CLI's integration tests so.
import { spawn, type ChildProcessByStdio } from "node:child_process";
import { existsSync } from "node:fs";
import { delimiter, join } from "node:path";
import type { Readable } from "node:stream";

export const KRANE_BIN = new URL("../../bin/krane.js", import.meta.url).pathname;

/** The executable KRANE_TEST_CLI names, or undefined for `node bin/krane.js`. */
export const TEST_CLI: string | undefined = process.env.KRANE_TEST_CLI || undefined;
if (TEST_CLI !== undefined && !existsSync(TEST_CLI)) throw new Error(`KRANE_TEST_CLI: no such file ${TEST_CLI}`);

/** PATH without the folders that hold a `node`: what the single-file CLI runs with here. */
export function pathWithoutNode(path = process.env.PATH ?? ""): string {
  return path
    .split(delimiter)
    .filter((d) => d !== "" && !existsSync(join(d, "node")))
    .join(delimiter);
}

/** The command, arguments and environment of one `krane <args>` run. */
export function kraneInvocation(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
): { command: string; args: string[]; env: NodeJS.ProcessEnv } {
  if (TEST_CLI === undefined)
    return { command: process.execPath, args: [KRANE_BIN, ...args], env: { ...process.env, ...env } };
  return { command: TEST_CLI, args: [...args], env: { ...process.env, ...env, PATH: pathWithoutNode() } };
}

/** Starts `krane <args>` with its output piped. */
export function spawnKrane(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
): ChildProcessByStdio<null, Readable, Readable> {
  const run = kraneInvocation(args, env);
  return spawn(run.command, run.args, { env: run.env, stdio: ["ignore", "pipe", "pipe"] });
}
