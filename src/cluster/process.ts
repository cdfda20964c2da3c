// Starting, watching and stopping the control-plane processes of a local cluster.
//
// Each component runs in its own process group with its output in a log file, so a failing
// start can show the tail of that log, and stopping can reach the whole group.
import { spawn } from "node:child_process";
import { openSync, closeSync, readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

export interface ComponentSpec {
  name: string;
  command: string;
  args: string[];
  logFile: string;
  env?: NodeJS.ProcessEnv;
}

export interface RunningComponent {
  name: string;
  pid: number;
  logFile: string;
  /** Resolves with the exit code (or signal) once the process has exited. */
  exited: Promise<string>;
  hasExited(): boolean;
}

/** Starts a component detached in its own process group, logging to its log file. */
export function startComponent(spec: ComponentSpec): RunningComponent {
  const fd = openSync(spec.logFile, "a");
  const child = spawn(spec.command, spec.args, {
    detached: true,
    stdio: ["ignore", fd, fd],
    env: spec.env ?? process.env,
  });
  closeSync(fd);
  if (child.pid === undefined) throw new Error(`${spec.name}: could not start ${spec.command}`);
  let done = false;
  const exited = new Promise<string>((resolve) => {
    child.once("exit", (code, signal) => {
      done = true;
      resolve(signal ? `signal ${signal}` : `exit code ${code}`);
    });
    child.once("error", (err) => {
      done = true;
      resolve(`spawn error: ${err.message}`);
    });
  });
  // The cluster may outlive this process (`krane cluster up`); never keep the event loop alive.
  child.unref();
  return { name: spec.name, pid: child.pid, logFile: spec.logFile, exited, hasExited: () => done };
}

/** The last lines of a log file, for error messages a user can act on. */
export function logTail(file: string, lines = 25): string {
  try {
    const text = readFileSync(file, "utf8").trimEnd().split("\n");
    return text.slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

export class ComponentStartError extends Error {
  constructor(
    readonly component: string,
    readonly reason: string,
    readonly tail: string,
  ) {
    super(`${component} ${reason}; last lines of its log:\n${tail}`);
  }
}

/**
 * Polls `probe` until it returns true. Fails with the log tail when the component exits
 * first or the deadline passes.
 */
export async function waitUntilHealthy(
  component: RunningComponent,
  probe: () => Promise<boolean>,
  timeoutMs: number,
  what = "healthy",
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let delay = 50;
  while (Date.now() < deadline) {
    if (component.hasExited()) {
      const how = await component.exited;
      throw new ComponentStartError(component.name, `exited during start (${how})`, logTail(component.logFile));
    }
    if (await probe().catch(() => false)) return;
    // A poll of one starting process, not a retry of a failed call (src/retry): the probe is
    // asked often at first (most components are up within a few hundred ms), then every
    // 500 ms; one poller per process has no herd to spread with jitter.
    await sleep(delay);
    delay = Math.min(delay * 2, 500);
  }
  throw new ComponentStartError(
    component.name,
    what === "healthy" ? `was not healthy after ${timeoutMs / 1000}s` : `did not ${what} within ${timeoutMs / 1000}s`,
    logTail(component.logFile),
  );
}

/** True while the process exists and is not a zombie (an exited child nobody reaped yet). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
  try {
    // /proc/<pid>/stat: "pid (comm) S ..." — the state letter follows the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return true;
  }
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, signal);
    } catch {
      // already gone
    }
  }
}

/** SIGTERM to the process group, then SIGKILL after graceMs; resolves once it is gone. */
export async function stopPid(pid: number, graceMs = 5000): Promise<void> {
  if (!isAlive(pid)) return;
  signalGroup(pid, "SIGTERM");
  const deadline = Date.now() + graceMs;
  while (isAlive(pid) && Date.now() < deadline) await sleep(50);
  if (!isAlive(pid)) return;
  signalGroup(pid, "SIGKILL");
  const killDeadline = Date.now() + 5000;
  while (isAlive(pid) && Date.now() < killDeadline) await sleep(50);
}

/**
 * Starts a watchdog shell that kills the given pid file's processes (and removes `dir` when
 * asked) as soon as `ownerPid` dies, even by SIGKILL, after running `cleanup` (a command). That
 * keeps a crashed test run or a killed `krane dev` from leaving a cluster behind.
 */
export function startReaper(
  ownerPid: number,
  pidFile: string,
  removeDir?: string,
  removeFile?: string,
  cleanup?: readonly string[],
): number {
  const quote = (a: string): string => `'${a.replace(/'/g, "'\\''")}'`;
  const script = [
    `while kill -0 ${ownerPid} 2>/dev/null; do sleep 0.5; done`,
    `pids=$(cat '${pidFile}' 2>/dev/null)`,
    `for p in $pids; do kill -TERM -$p 2>/dev/null; kill -TERM $p 2>/dev/null; done`,
    `sleep 3`,
    `for p in $pids; do kill -KILL -$p 2>/dev/null; kill -KILL $p 2>/dev/null; done`,
    // What the processes leave behind outside the directory (real nodes: namespaces, cgroups, mounts).
    cleanup ? cleanup.map(quote).join(" ") : `true`,
    removeDir ? `rm -rf '${removeDir}'` : `true`,
    removeFile ? `rm -f '${removeFile}'` : `true`,
  ].join("\n");
  const child = spawn("sh", ["-c", script], { detached: true, stdio: "ignore" });
  child.unref();
  if (child.pid === undefined) throw new Error("could not start the cluster reaper");
  return child.pid;
}
