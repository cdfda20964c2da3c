// Runs `krane ctrl serve` as a real child process and finds its URL in its JSON log.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { KRANE_BIN, kraneInvocation, spawnKrane } from "../../support/cli.js";

export { KRANE_BIN, spawnKrane };

export interface CtrlProcess {
  url: string;
  child: ChildProcess;
  /** Everything ctrl wrote to stdout (its JSON log) so far. */
  stdout(): string;
  /** SIGTERM and wait for a clean exit; returns the exit code. */
  stop(): Promise<number | null>;
}

export async function spawnCtrl(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CtrlProcess> {
  const child = spawn(
    process.execPath,
    [KRANE_BIN, "ctrl", "serve", "--listen", "127.0.0.1:0", "--ops-listen", "off", ...args],
    {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stderr = "";
  let stdout = "";
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  child.stdout?.on("data", (d: Buffer) => (stdout += d.toString()));
  const lines = createInterface({ input: child.stdout! });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`ctrl did not start: ${stderr}`)), 60_000);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`ctrl exited with ${code}: ${stderr}`));
    });
    lines.on("line", (line) => {
      try {
        const rec = JSON.parse(line) as { msg?: string; url?: string };
        if (rec.msg === "ctrl listening" && rec.url) {
          clearTimeout(timer);
          resolve(rec.url);
        }
      } catch {
        // not a log line
      }
    });
  });
  return {
    url,
    child,
    stdout: () => stdout,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      const exited = once(child, "exit");
      child.kill("SIGTERM");
      // ctrl exits on its own within 35 s (its shutdown watchdog); past a minute it never will.
      const late = setTimeout(() => child.kill("SIGKILL"), 60_000);
      const [code, signal] = (await exited) as [number | null, NodeJS.Signals | null];
      clearTimeout(late);
      if (signal === "SIGKILL")
        throw new Error(`ctrl did not exit within 60 s of SIGTERM: ${stdout.slice(-2000)}${stderr.slice(-1000)}`);
      return code;
    },
  };
}

/**
 * The admin token a ctrl on SQLite generated at its first start, read from the file it writes next
 * to its database (`--admin-token-file`'s default, mode 0600) once it is there whole: how an
 * operator gets the first token, so nothing needs to mint one outside ctrl.
 */
export async function generatedAdminToken(database: string, timeoutMs = 60_000): Promise<string> {
  const file = join(dirname(database), "admin-token");
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = await readFile(file, "utf8").catch((e: NodeJS.ErrnoException) => {
      if (e.code === "ENOENT") return "";
      throw e;
    });
    // ctrl writes the token and its newline in one write; a shorter read caught it mid-write.
    if (text.endsWith("\n")) return text.trim();
    if (Date.now() > deadline) throw new Error(`ctrl wrote no admin token to ${file} within ${timeoutMs} ms`);
    await sleep(100);
  }
}

export interface CliResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the real `krane` CLI (or KRANE_TEST_CLI's: test/support/cli.ts). */
export function krane(args: string[], env: NodeJS.ProcessEnv): CliResult {
  const run = kraneInvocation(args, env);
  const res = spawnSync(run.command, run.args, {
    env: run.env,
    encoding: "utf8",
    timeout: 120_000,
  });
  return { status: res.status, stdout: res.stdout, stderr: res.stderr };
}

/** Runs the real `krane` CLI without blocking this process (a ctrl in this process keeps answering). */
export async function kraneAsync(args: string[], env: NodeJS.ProcessEnv): Promise<CliResult> {
  const child = spawnKrane(args, env);
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
  const [status] = (await once(child, "exit")) as [number | null];
  clearTimeout(timer);
  return { status, stdout, stderr };
}
