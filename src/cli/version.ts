// `krane version` (and `krane --version`): this CLI's version, git commit and build date from
// src/build-info.ts, and what runs it (Node.js, or the single file's own runtime); with --ctrl
// also the build of the ctrl at --ctrl-url, which ctrl sends in a header of every response
// (src/contracts/version.ts).
import type { Command } from "commander";
import { buildInfo, type BuildInfo } from "../build-info.js";
import { userAction, withConnection, type ConnectionFlags } from "./command.js";

/** One line, for `krane --version`. */
export function versionLine(info: BuildInfo = buildInfo()): string {
  const built = info.date ? `built ${info.date}` : "running from source";
  return `krane ${info.version} (commit ${info.commit}, ${built}${info.singleFile ? ", single file" : ""})`;
}

/** Which build runs: the single file (its runtime built in) or the npm package's on Node.js. */
export function buildKind(info: BuildInfo): { build: "single-file" | "node"; runtime: string; text: string } {
  const runtime = process.versions.bun === undefined ? `node ${process.version}` : `bun ${process.versions.bun}`;
  return info.singleFile
    ? {
        build: "single-file",
        runtime,
        text: `single file for ${process.platform}-${process.arch} (${runtime} built in; user commands only)`,
      }
    : { build: "node", runtime, text: `node (Node.js ${process.version}: the npm package or the image)` };
}

/** `-o json`'s build fields: "build" and "runtime" (and "node" from the npm package, as before). */
function kindJson(info: BuildInfo): Record<string, string> {
  const { build, runtime } = buildKind(info);
  return build === "node" ? { build, runtime, node: process.version } : { build, runtime };
}

/** The `krane version` table (aligned "name value" lines). */
export function versionText(info: BuildInfo, ctrl?: string): string {
  const rows: [string, string][] = [
    ["krane", info.version],
    ["commit", info.commit],
    ["built", info.date || "- (running from source, not built)"],
    ["build", buildKind(info).text],
  ];
  if (ctrl !== undefined) rows.push(["ctrl", ctrl || "unknown (no version header in ctrl's answer)"]);
  return rows.map(([k, v]) => `${k.padEnd(7)} ${v}`).join("\n");
}

export function registerVersionCommand(program: Command): void {
  program.version(versionLine(), "--version", "print the version and exit");
  withConnection(
    program
      .command("version")
      .description("print krane's version, git commit and build date (with --ctrl also ctrl's build)")
      .option("--ctrl", "also ask the ctrl at --ctrl-url (with --token) for its build"),
  ).action(async (f: ConnectionFlags & { ctrl?: boolean }, cmd: Command) => {
    const info = buildInfo();
    const print = (ctrl?: string): void => {
      if (f.output === "json")
        process.stdout.write(
          `${JSON.stringify({ version: info.version, commit: info.commit, date: info.date, ...kindJson(info), ...(ctrl === undefined ? {} : { ctrl }) }, null, 2)}\n`,
        );
      else process.stdout.write(`${versionText(info, ctrl)}\n`);
    };
    if (!f.ctrl) {
      print();
      return;
    }
    await userAction(async (x) => {
      await x.ctrl.client(x.api.RegionService).listRegions({});
      print(x.ctrl.ctrlBuild);
    })(f, cmd);
  });
}
