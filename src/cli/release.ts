// `krane release apply|get|list|delete` (releases of arbitrary allow-listed objects in an
// environment's workspace namespace, versioned in ctrl, applied by each region's agent) and
// `krane job put|list|delete` (cron jobs run as CronJobs with the user workloads' isolation).
// `release apply -f` takes files or directories (their *.yaml, *.yml and *.json files, sorted by
// name; -R for subdirectories); ctrl parses and checks them, so a refused manifest applies nothing.
import type { Command } from "commander";
import type { Release } from "../gen/krane/ctrl/v1/release_pb.js";
import type { Job } from "../gen/krane/ctrl/v1/job_pb.js";
import {
  collect,
  environmentRef,
  intArg,
  when,
  workspaceCommand,
  type ConnectionFlags,
  type UserContext,
} from "./command.js";

const HEALTH = ["unknown", "Progressing", "Healthy", "Degraded", "Suspended", "KindMissing", "Refused"];
const RESULT = ["unknown", "running", "succeeded", "failed"];

async function manifestFiles(
  paths: readonly string[],
  recursive: boolean,
): Promise<{ name: string; content: string }[]> {
  const { readdir, readFile, stat } = await import("node:fs/promises");
  const { join } = await import("node:path");
  const out: { name: string; content: string }[] = [];
  const walk = async (p: string, top: boolean): Promise<void> => {
    const s = await stat(p);
    if (s.isDirectory()) {
      if (!top && !recursive) return;
      for (const e of (await readdir(p)).sort()) {
        const child = join(p, e);
        if ((await stat(child)).isDirectory()) await walk(child, false);
        else if (/\.(ya?ml|json)$/i.test(e)) out.push({ name: child, content: await readFile(child, "utf8") });
      }
    } else {
      out.push({ name: p, content: await readFile(p, "utf8") });
    }
  };
  for (const p of paths) await walk(p, true);
  if (out.length === 0) throw new Error(`no manifest found in ${paths.join(", ")} (*.yaml, *.yml, *.json)`);
  return out;
}

function printRelease(x: UserContext, r: Release, schema: unknown): void {
  if (x.json) {
    x.printJson(schema as never, r as never);
    return;
  }
  x.printTable(
    ["RELEASE", "VERSION", "OBJECTS", "UPDATED", "ID"],
    [[r.name, String(r.version), r.objects.length, when(r.updatedAtUnixMs), r.id]],
  );
  const rows: (string | number)[][] = [];
  for (const reg of r.regions) {
    if (reg.rejectedReason) rows.push([reg.region, String(reg.observedVersion), "-", "Rejected", reg.rejectedReason]);
    for (const o of reg.objects)
      rows.push([
        reg.region,
        String(reg.observedVersion),
        `${o.kind?.kind ?? ""}/${o.name}`,
        HEALTH[o.health] ?? "unknown",
        o.message,
      ]);
  }
  if (rows.length > 0) x.printTable(["REGION", "OBSERVED", "OBJECT", "HEALTH", "MESSAGE"], rows);
}

function printJob(x: UserContext, jobs: Job[]): void {
  x.printTable(
    ["JOB", "SCHEDULE", "IMAGE", "SUSPENDED", "ID"],
    jobs.map((j) => [
      j.spec?.name ?? "",
      `${j.spec?.schedule ?? ""}${j.spec?.timeZone ? ` (${j.spec.timeZone})` : ""}`,
      j.spec?.image || "(revision's)",
      j.spec?.suspend ? "yes" : "no",
      j.id,
    ]),
  );
  const rows: (string | number)[][] = [];
  for (const j of jobs) {
    for (const r of j.regions) {
      if (r.rejectedReason) rows.push([j.spec?.name ?? "", r.region, "-", "rejected", r.rejectedReason]);
      for (const run of r.runs.slice(0, 5))
        rows.push([
          j.spec?.name ?? "",
          r.region,
          run.k8sName,
          RESULT[run.result] ?? "unknown",
          `${when(run.startedUnixMs)} → ${when(run.finishedUnixMs)}`,
        ]);
    }
  }
  if (rows.length > 0) x.printTable(["JOB", "REGION", "RUN", "RESULT", "STARTED → FINISHED"], rows);
}

export function registerReleaseCommands(program: Command): void {
  const release = program
    .command("release")
    .description("releases of arbitrary objects (allow-listed kinds) in an environment's namespace");
  workspaceCommand(
    release
      .command("apply <project/env>")
      .description("store a new version of a release from manifests and apply it in every region")
      .requiredOption("-f, --filename <path>", "a manifest file or directory (repeatable)", collect, [])
      .option("-R, --recursive", "read directories recursively")
      .option("--name <name>", "the release's name (default: default)"),
    async (x, target: string, f: ConnectionFlags & { filename: string[]; recursive?: boolean; name?: string }) => {
      const { ReleaseService, ReleaseSchema } = await import("../gen/krane/ctrl/v1/release_pb.js");
      const files = await manifestFiles(f.filename, f.recursive ?? false);
      const res = await x.ctrl
        .client(ReleaseService)
        .applyRelease({ ...(await environmentRef(x, target)), name: f.name ?? "", files });
      if (!res.release) return;
      if (!x.json)
        process.stdout.write(
          res.changed
            ? `release ${res.release.name}: version ${res.release.version}\n`
            : `release ${res.release.name}: unchanged (version ${res.release.version})\n`,
        );
      printRelease(x, res.release, ReleaseSchema);
    },
  );
  workspaceCommand(
    release
      .command("get <project/env>")
      .description("a release's objects and their health per region")
      .option("--name <name>", "the release's name (default: default)"),
    async (x, target: string, f: ConnectionFlags & { name?: string }) => {
      const { ReleaseService, ReleaseSchema } = await import("../gen/krane/ctrl/v1/release_pb.js");
      const { release: r } = await x.ctrl
        .client(ReleaseService)
        .getRelease({ ...(await environmentRef(x, target)), name: f.name ?? "" });
      if (r) printRelease(x, r, ReleaseSchema);
    },
  );
  workspaceCommand(
    release.command("list <project/env>").description("the releases of an environment"),
    async (x, target: string) => {
      const { ReleaseService, ListReleasesResponseSchema } = await import("../gen/krane/ctrl/v1/release_pb.js");
      const res = await x.ctrl.client(ReleaseService).listReleases(await environmentRef(x, target));
      if (x.json) x.printJson(ListReleasesResponseSchema, res);
      else
        x.printTable(
          ["RELEASE", "VERSION", "OBJECTS", "UPDATED", "ID"],
          res.releases.map((r) => [r.name, String(r.version), r.objects.length, when(r.updatedAtUnixMs), r.id]),
        );
    },
  );
  workspaceCommand(
    release
      .command("delete <project/env>")
      .description("remove a release's objects from every region")
      .option("--name <name>", "the release's name (default: default)"),
    async (x, target: string, f: ConnectionFlags & { name?: string }) => {
      const { ReleaseService } = await import("../gen/krane/ctrl/v1/release_pb.js");
      await x.ctrl.client(ReleaseService).deleteRelease({ ...(await environmentRef(x, target)), name: f.name ?? "" });
      if (!x.json) process.stdout.write("release deleted; each region's agent removes its objects\n");
    },
  );

  const job = program.command("job").description("cron jobs of an environment");
  workspaceCommand(
    job
      .command("put <project/env> <name>")
      .description("create or replace a cron job (runs the image of the revision each region runs unless --image)")
      .requiredOption("--schedule <cron>", 'standard cron ("*/15 * * * *", @hourly …)')
      .option("--time-zone <tz>", "IANA time zone (default UTC)")
      .option("--image <image>", "an image of its own")
      .option("--command <arg>", "command (repeatable)", collect, [])
      .option("--arg <arg>", "argument (repeatable)", collect, [])
      .option("--concurrency-policy <policy>", "Allow, Forbid (default) or Replace")
      .option("--deadline-seconds <n>", "stop a run after this long (default 3600)", intArg("--deadline-seconds"))
      .option("--successful-history <n>", "finished runs kept (default 3)", intArg("--successful-history"))
      .option("--failed-history <n>", "failed runs kept (default 1)", intArg("--failed-history"))
      .option("--cpu <millicores>", "CPU (default 250)", intArg("--cpu"))
      .option("--memory <mib>", "memory (default 256)", intArg("--memory"))
      .option("--suspend", "create it suspended"),
    async (
      x,
      target: string,
      name: string,
      f: ConnectionFlags & {
        schedule: string;
        timeZone?: string;
        image?: string;
        command: string[];
        arg: string[];
        concurrencyPolicy?: string;
        deadlineSeconds?: number;
        successfulHistory?: number;
        failedHistory?: number;
        cpu?: number;
        memory?: number;
        suspend?: boolean;
      },
    ) => {
      const { JobService, JobSchema } = await import("../gen/krane/ctrl/v1/job_pb.js");
      const { job: j } = await x.ctrl.client(JobService).putJob({
        ...(await environmentRef(x, target)),
        spec: {
          name,
          schedule: f.schedule,
          timeZone: f.timeZone ?? "",
          image: f.image ?? "",
          command: f.command,
          args: f.arg,
          concurrencyPolicy: f.concurrencyPolicy ?? "",
          deadlineSeconds: BigInt(f.deadlineSeconds ?? 0),
          successfulJobsHistoryLimit: f.successfulHistory,
          failedJobsHistoryLimit: f.failedHistory,
          cpuMillicores: BigInt(f.cpu ?? 0),
          memoryMib: BigInt(f.memory ?? 0),
          suspend: f.suspend ?? false,
        },
      });
      if (!j) return;
      if (x.json) x.printJson(JobSchema, j);
      else printJob(x, [j]);
    },
  );
  workspaceCommand(
    job.command("list <project/env>").description("cron jobs and their last runs per region"),
    async (x, target: string) => {
      const { JobService, ListJobsResponseSchema } = await import("../gen/krane/ctrl/v1/job_pb.js");
      const res = await x.ctrl.client(JobService).listJobs(await environmentRef(x, target));
      if (x.json) x.printJson(ListJobsResponseSchema, res);
      else printJob(x, res.jobs);
    },
  );
  workspaceCommand(
    job.command("delete <project/env> <name>").description("delete a cron job in every region"),
    async (x, target: string, name: string) => {
      const { JobService } = await import("../gen/krane/ctrl/v1/job_pb.js");
      await x.ctrl.client(JobService).deleteJob({ ...(await environmentRef(x, target)), name });
      if (!x.json) process.stdout.write("job deleted\n");
    },
  );
}
