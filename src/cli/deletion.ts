// `krane env delete`, `krane project delete`, `krane workspace delete`: delete what they name
// with everything it runs in every region. `--yes` confirms (ctrl checks the slug again);
// without it nothing is deleted. The answer shows what each region still has to remove; the
// command may be repeated to follow it, `--wait` follows it until done, and `--force-region` (or
// `--force`, every region) stops waiting for a region whose agent is gone for good: that
// agent's orphan GC removes the objects if it ever returns.
import type { Command } from "commander";
import type { Deletion } from "../gen/krane/ctrl/v1/api_pb.js";
import {
  collect,
  intArg,
  splitTarget,
  userCommand,
  workspaceCommand,
  type ConnectionFlags,
  type UserContext,
} from "./command.js";

interface DeleteFlags extends ConnectionFlags {
  yes?: boolean;
  forceRegion: string[];
  force?: boolean;
  wait?: boolean;
  timeout?: number;
}

function printDeletion(x: UserContext, d: Deletion | undefined): void {
  if (!d) return;
  if (x.json) {
    x.printJson(x.api.DeletionSchema, d);
    return;
  }
  if (d.done) {
    process.stdout.write(`${d.scope} ${d.id} deleted\n`);
    return;
  }
  process.stdout.write(`${d.scope} ${d.id} is being deleted\n`);
  if (d.regions.length > 0) {
    x.printTable(
      ["REGION", "REMAINING", "KINDS", "FORCED"],
      d.regions.map((r) => [
        r.region,
        r.remaining,
        r.kinds.map((k) => `${k.kind}=${k.count}`).join(" ") || "-",
        r.forced ? "yes" : "no",
      ]),
    );
  }
}

function withDeleteOptions(cmd: Command): Command {
  return cmd
    .option("--yes", "confirm: delete it with everything it runs, in every region")
    .option("--force-region <region>", "stop waiting for this region's agent (gone for good); repeatable", collect, [])
    .option("--force", "stop waiting for every region's agent")
    .option("--wait", "follow the deletion until it is done")
    .option("--timeout <seconds>", "with --wait: give up after this long (default 300)", intArg("--timeout"));
}

async function run(
  x: UserContext,
  f: DeleteFlags,
  call: (confirm: boolean, force: string[]) => Promise<Deletion | undefined>,
): Promise<void> {
  if (!f.yes) throw new Error("deleting removes everything it runs in every region: repeat with --yes to confirm");
  const force = f.force ? ["*"] : f.forceRegion;
  let d = await call(true, force);
  const deadline = Date.now() + (f.timeout ?? 300) * 1000;
  while (f.wait && d && !d.done && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 1000));
    const last: Deletion = d;
    try {
      d = await call(true, []);
    } catch (err) {
      // Gone between two looks: the deletion finished (the first call found it, so it existed).
      if (!x.isNotFound(err)) throw err;
      d = { ...last, done: true, regions: [] };
    }
  }
  printDeletion(x, d);
  if (f.wait && d && !d.done) process.exitCode = 1;
}

export function registerEnvironmentDelete(env: Command): void {
  workspaceCommand(
    withDeleteOptions(
      env
        .command("delete <project/env>")
        .description(
          "delete an environment with its deployments, sentinels, releases, jobs, config and secrets in every region",
        ),
    ),
    async (x, target: string, f: DeleteFlags) => {
      const ref = splitTarget(target);
      const workspace = await x.ctrl.workspace();
      await run(
        x,
        f,
        async (_c, force) =>
          (
            await x.ctrl
              .client(x.api.EnvironmentService)
              .deleteEnvironment({ workspace, ...ref, confirm: ref.environment, forceRegions: force })
          ).deletion,
      );
    },
  );
}

export function registerProjectDelete(prj: Command): void {
  workspaceCommand(
    withDeleteOptions(
      prj.command("delete <project>").description("delete a project with all its environments in every region"),
    ),
    async (x, project: string, f: DeleteFlags) => {
      const workspace = await x.ctrl.workspace();
      await run(
        x,
        f,
        async (_c, force) =>
          (
            await x.ctrl
              .client(x.api.ProjectService)
              .deleteProject({ workspace, project, confirm: project, forceRegions: force })
          ).deletion,
      );
    },
  );
}

export function registerWorkspaceDelete(ws: Command): void {
  userCommand(
    withDeleteOptions(
      ws.command("delete <workspace>").description("delete a workspace with all its projects in every region"),
    ),
    async (x, workspace: string, f: DeleteFlags) => {
      await run(
        x,
        f,
        async (_c, force) =>
          (
            await x.ctrl
              .client(x.api.WorkspaceService)
              .deleteWorkspace({ workspace, confirm: workspace, forceRegions: force })
          ).deletion,
      );
    },
  );
}
