// `krane build <project/env> --source DIR`, `krane deploy <project/env> --source DIR` (deploy.ts
// calls sourceBuild) and `krane build logs | list | cancel`: builds from source through ctrl's
// BuildService. The directory is packed as git sees it less .kraneignore (src/builds/source-dir.ts),
// uploaded in chunks under its digest, built and, for deploy, deployed; the build's log follows
// on stderr, so stdout holds only the result (the image@digest, or the revision).
import type { Command } from "commander";
import type { Build } from "../gen/krane/ctrl/v1/build_pb.js";
import { splitTarget, userAction, when, withConnection, type ConnectionFlags, type UserContext } from "./command.js";

/** A chunk of an upload (ctrl takes at most 2 MiB; its requests at most 4). */
const CHUNK_BYTES = 1024 * 1024;
/** What the CLI packs at most; ctrl has its own bound. */
const SOURCE_LIMITS = { maxBytes: 256 * 1024 * 1024, maxArchiveBytes: 64 * 1024 * 1024 };
const POLL_MS = 1_000;

async function service(x: UserContext) {
  const m = await import("../gen/krane/ctrl/v1/build_pb.js");
  return { m, client: x.ctrl.client(m.BuildService) };
}

function finished(state: string): boolean {
  return state === "succeeded" || state === "failed" || state === "cancelled";
}

/** Prints a build's log from line `from` on (stderr) until it ends, or once without `follow`. */
async function followBuild(x: UserContext, workspace: string, id: string, follow: boolean): Promise<Build> {
  const { client } = await service(x);
  let from = 0;
  for (;;) {
    const res = await client.getBuild({ workspace, buildId: id, logFrom: from });
    for (const line of res.log) process.stderr.write(`${line}\n`);
    from = res.logNext;
    const b = res.build;
    if (!b) throw new Error(`ctrl answered no build ${id}`);
    if (!follow || finished(b.state)) return b;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/** Why a build did not succeed, with its failed step's last lines. */
function failure(b: Build): Error {
  const lines = [`build ${b.id} ${b.state}: ${b.error || "no reason given"}`];
  if (b.failedStep !== "") lines.push(`failed step: ${b.failedStep}`, ...b.failedOutput.map((l) => `  ${l}`));
  return new Error(lines.join("\n"));
}

export interface SourceBuildFlags {
  readonly source: string;
  readonly dockerfile?: string;
}

/** Packs, uploads and builds `flags.source` for `target`; answers the finished build (throws unless it succeeded). */
export async function sourceBuild(
  x: UserContext,
  target: string,
  flags: SourceBuildFlags,
  deploy: boolean,
): Promise<Build> {
  const { packSourceDir, mib } = await import("../builds/source-dir.js");
  const workspace = await x.ctrl.workspace();
  const ref = { workspace, ...splitTarget(target) };
  const packed = await packSourceDir(flags.source, SOURCE_LIMITS);
  process.stderr.write(
    `packed ${flags.source}: ${packed.files} files, ${mib(packed.bytes)} (${mib(packed.archive.length)} compressed), ${packed.digest}\n`,
  );
  const { client } = await service(x);
  const size = BigInt(packed.archive.length);
  for (let at = 0; at < packed.archive.length; at += CHUNK_BYTES) {
    const res = await client.uploadSource({
      workspace,
      project: ref.project,
      digest: packed.digest,
      size,
      offset: BigInt(at),
      data: packed.archive.subarray(at, at + CHUNK_BYTES),
    });
    if (res.received === size) break;
  }
  const started = await client.startBuild({
    ...ref,
    sourceDigest: packed.digest,
    deploy,
    dockerfile: flags.dockerfile ?? "",
  });
  const id = started.build?.id ?? "";
  process.stderr.write(`build ${id} queued`);
  if (started.cancelledBuildIds.length > 0)
    process.stderr.write(` (cancelled the older ${started.cancelledBuildIds.join(", ")})`);
  process.stderr.write("\n");
  const b = await followBuild(x, workspace, id, true);
  if (b.state !== "succeeded") throw failure(b);
  return b;
}

interface BuildFlags extends ConnectionFlags, SourceBuildFlags {}

interface LogsFlags extends ConnectionFlags {
  follow?: boolean;
}

const HEAD = ["ID", "STATE", "SOURCE", "DEPLOY", "IMAGE", "CREATED", "ERROR"];

function row(b: Build): string[] {
  return [
    b.id,
    b.state,
    // A repository build's branch and commit (and a pull request's preview); an upload's digest.
    b.commit === ""
      ? b.sourceDigest.slice(0, 19)
      : `${b.branch}@${b.commit.slice(0, 12)}${b.preview === "" ? "" : ` → ${b.preview}`}`,
    b.deploy ? b.deploymentId || "yes" : "no",
    b.imageDigest === "" ? "-" : `${b.image.replace(/:[^:/]+$/, "")}@${b.imageDigest}`,
    when(b.createdAtUnixMs),
    b.error || "-",
  ];
}

export function registerBuildCommands(program: Command): void {
  const build = program.command("build").description("builds from source: build, logs, list, cancel");
  withConnection(
    build
      .command("start <project/env>", { isDefault: true })
      .description("build a source directory into an image in the build registry; prints image@digest")
      .requiredOption("--source <dir>", "the directory to build (.gitignore and .kraneignore are honoured)")
      .option("--dockerfile <path>", "a Dockerfile's path in the source (default: ./Dockerfile, else detection)"),
    { workspace: true },
  ).action(
    userAction(async (x, target: string, f: BuildFlags) => {
      const b = await sourceBuild(x, target, f, false);
      const { m } = await service(x);
      if (x.json) x.printJson(m.BuildSchema, b);
      else process.stdout.write(`${b.image.replace(/:[^:/]+$/, "")}@${b.imageDigest}\n`);
    }),
  );
  withConnection(
    build
      .command("logs <id>")
      .description("a build's log (with -f, until it ends)")
      .option("-f, --follow", "follow the log until the build ends"),
    { workspace: true },
  ).action(
    userAction(async (x, id: string, f: LogsFlags) => {
      const b = await followBuild(x, await x.ctrl.workspace(), id, f.follow === true);
      if (b.state === "failed" || b.state === "cancelled") throw failure(b);
    }),
  );
  withConnection(build.command("list <project/env>").description("an environment's builds, newest first"), {
    workspace: true,
  }).action(
    userAction(async (x, target: string) => {
      const { m, client } = await service(x);
      const res = await client.listBuilds({ workspace: await x.ctrl.workspace(), ...splitTarget(target) });
      if (x.json) x.printJson(m.ListBuildsResponseSchema, res);
      else x.printTable(HEAD, res.builds.map(row));
    }),
  );
  withConnection(build.command("cancel <id>").description("cancel a queued or running build"), {
    workspace: true,
  }).action(
    userAction(async (x, id: string) => {
      const { m, client } = await service(x);
      const res = await client.cancelBuild({ workspace: await x.ctrl.workspace(), buildId: id });
      if (!res.build) return;
      if (x.json) x.printJson(m.BuildSchema, res.build);
      else process.stdout.write(`build ${res.build.id}: ${res.build.state}\n`);
    }),
  );
}
