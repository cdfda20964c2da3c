// `krane log-retention get | set`: how long ctrl keeps a workspace's log lines (LogService's
// Get/SetLogRetention): whole days from 1 to 90, or back to the default (7 days).
import type { Command } from "commander";
import type { LogRetention } from "../gen/krane/ctrl/v1/logs_pb.js";
import { intArg, userAction, withConnection, type UserContext } from "./command.js";

async function service(x: UserContext) {
  const m = await import("../gen/krane/ctrl/v1/logs_pb.js");
  return { m, client: x.ctrl.client(m.LogService) };
}

function retentionRow(r: LogRetention | undefined): string[] {
  return r ? [`${r.days} days`, r.own ? "workspace" : "default"] : ["", ""];
}

export function registerLogRetentionCommands(program: Command): void {
  const group = program
    .command("log-retention")
    .description("how long ctrl keeps a workspace's log lines (krane logs --since, --grep)");
  withConnection(group.command("get [workspace]").description("the workspace's log retention, and whose it is"), {
    workspace: true,
  }).action(
    userAction(async (x, workspace: string | undefined) => {
      const { m, client } = await service(x);
      const res = await client.getLogRetention({ workspace: workspace ?? (await x.ctrl.workspace()) });
      if (x.json) x.printJson(m.GetLogRetentionResponseSchema, res);
      else x.printTable(["RETENTION", "SET BY"], [retentionRow(res.retention)]);
    }),
  );
  withConnection(
    group
      .command("set <workspace>")
      .description("keep the workspace's lines this many days (1 to 90), or --default (7 days); needs the admin role")
      .option("--days <n>", "whole days, 1 to 90", intArg("--days"))
      .option("--default", "back to the default (7 days)"),
    { workspace: true },
  ).action(
    userAction(async (x, workspace: string, f: { days?: number; default?: boolean }) => {
      if ((f.days === undefined) === (f.default !== true)) throw new Error("give either --days <n> or --default");
      const { m, client } = await service(x);
      const res = await client.setLogRetention({ workspace, days: f.days });
      if (x.json) x.printJson(m.SetLogRetentionResponseSchema, res);
      else x.printTable(["RETENTION", "SET BY"], [retentionRow(res.retention)]);
    }),
  );
}
