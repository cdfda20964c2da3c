// `krane log-retention get | set`: how long ctrl keeps a workspace's log lines (LogService's
// Get/SetLogRetention): whole days from 1 to 90, or "default" (7 days).
import type { Command } from "commander";
import type { LogRetention } from "../gen/krane/ctrl/v1/logs_pb.js";
import { userAction, withConnection, type UserContext } from "./command.js";

async function service(x: UserContext) {
  const m = await import("../gen/krane/ctrl/v1/logs_pb.js");
  return { m, client: x.ctrl.client(m.LogService) };
}

/** `set`'s <days>: whole days (ctrl checks the bounds), or "default" (undefined). */
export function retentionDays(text: string): number | undefined {
  if (text === "default") return undefined;
  if (!/^\d{1,6}$/.test(text)) throw new Error(`<days>: expected whole days (1 to 90) or "default", got "${text}"`);
  return Number(text);
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
      .command("set <workspace> <days>")
      .description('keep the workspace\'s lines this many days (1 to 90), or "default" (7 days); needs the admin role'),
    { workspace: true },
  ).action(
    userAction(async (x, workspace: string, text: string) => {
      const { m, client } = await service(x);
      const res = await client.setLogRetention({ workspace, days: retentionDays(text) });
      if (x.json) x.printJson(m.SetLogRetentionResponseSchema, res);
      else x.printTable(["RETENTION", "SET BY"], [retentionRow(res.retention)]);
    }),
  );
}
