// The programs some benchmarks run beside krane, from Debian: nginx (what a user would otherwise
// put in front of an app, and the fixed-answer upstream), wrk (the load generator) and GNU time
// (a command's peak memory and CPU time). CI never runs the benchmarks, so .ci/run does not
// install them; a benchmark that needs one asks for it here before it starts anything.
//
// A missing program is installed when the benchmark runs as root on a machine with apt-get (as
// .ci/run installs the tests' packages); otherwise the benchmark stops with the exact apt-get line
// to run. Either way no figure is skipped silently. The nginx package may start a system nginx
// on port 80 where an init system runs services: it is stopped again, since the benchmarks run
// their own nginx from their own configuration.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

/** A program a benchmark runs, and the Debian package it comes from. */
export interface Tool {
  readonly command: string;
  readonly apt: string;
}

export const NGINX: Tool = { command: "nginx", apt: "nginx" };
export const WRK: Tool = { command: "wrk", apt: "wrk" };
/** GNU time, at the path the CLI benchmark runs it by (the shell's `time` keyword has no -f). */
export const GNU_TIME: Tool = { command: "/usr/bin/time", apt: "time" };

function present(t: Tool): boolean {
  if (t.command.startsWith("/")) return existsSync(t.command);
  return spawnSync("sh", ["-c", `command -v ${t.command}`], { stdio: "ignore" }).status === 0;
}

/** The apt-get line that installs `packages` (with sudo when not root). */
export function aptLine(packages: readonly string[], root: boolean): string {
  return `${root ? "" : "sudo "}apt-get install -y --no-install-recommends ${packages.join(" ")}`;
}

/**
 * Makes sure `tools` are installed before benchmark `area` runs: installs the missing ones as
 * root with apt-get, or throws an error that names them and gives the apt-get line.
 */
export function ensureTools(area: string, tools: readonly Tool[]): void {
  const missing = tools.filter((t) => !present(t));
  if (missing.length === 0) return;
  const packages = [...new Set(missing.map((t) => t.apt))];
  const root = process.getuid?.() === 0;
  const apt = spawnSync("sh", ["-c", "command -v apt-get"], { stdio: "ignore" }).status === 0;
  const what = missing.map((t) => t.command).join(", ");
  if (!root || !apt) {
    throw new Error(
      `bench ${area} needs ${what}, which ${missing.length === 1 ? "is" : "are"} not installed. On Debian or Ubuntu: ${aptLine(packages, root)}`,
    );
  }
  const nginxBefore = packages.includes(NGINX.apt) && existsSync("/run/nginx.pid");
  console.log(`bench ${area}: installing ${packages.join(", ")} with apt-get (needed for its figures)`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  for (const args of [
    ["update", "-qq"],
    ["install", "-y", "-qq", "--no-install-recommends", ...packages],
  ]) {
    const r = spawnSync("apt-get", args, { stdio: "inherit", env });
    if (r.status !== 0) throw new Error(`bench ${area}: apt-get ${args.join(" ")} failed (exit ${r.status})`);
  }
  if (!nginxBefore && existsSync("/run/nginx.pid")) {
    // The package's service, started by its install: the benchmarks start their own nginx.
    spawnSync("nginx", ["-s", "quit"], { stdio: "ignore" });
  }
  const still = missing.filter((t) => !present(t));
  if (still.length > 0)
    throw new Error(`bench ${area}: ${still.map((t) => t.command).join(", ")} still missing after apt-get install`);
}
