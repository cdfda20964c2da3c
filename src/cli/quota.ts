// `krane quota get | set`: a workspace's quotas through ctrl's QuotaService — each limit beside
// what the workspace uses (its environments at their maximum), and setting them
// ("cpu=4,memory=8Gi,previews=5"; "unlimited"; "default" for the installation's).
import type { Command } from "commander";
import { parseQuotaList, quotaUse, settingText } from "../contracts/quotas.js";
import type { Quota } from "../gen/krane/ctrl/v1/quota_pb.js";
import { userAction, withConnection, type ConnectionFlags, type UserContext } from "./command.js";

async function service(x: UserContext) {
  const m = await import("../gen/krane/ctrl/v1/quota_pb.js");
  return { m, client: x.ctrl.client(m.QuotaService) };
}

/** One row of the table: the quota, its use, its limit, whose limit, and "OVER" past it. */
export function quotaRow(q: Quota): string[] {
  const u = quotaUse(q);
  return [u.name, u.used, u.limit, u.setBy, u.state === "over" ? "OVER" : ""];
}

export function registerQuotaCommands(program: Command): void {
  const quota = program
    .command("quota")
    .description("a workspace's quotas: CPU, memory, instances, environments, previews, build minutes");
  const workspaceOf = async (x: UserContext, given: string | undefined) => given ?? (await x.ctrl.workspace());
  withConnection(
    quota
      .command("get [workspace]")
      .description("each quota's limit beside what the workspace uses (its environments at their maximum)"),
    { workspace: true },
  ).action(
    userAction(async (x, workspace: string | undefined) => {
      const { m, client } = await service(x);
      const res = await client.getQuota({ workspace: await workspaceOf(x, workspace) });
      if (x.json) x.printJson(m.GetQuotaResponseSchema, res);
      else x.printTable(["QUOTA", "USED", "LIMIT", "SET BY", ""], res.quotas.map(quotaRow));
    }),
  );
  withConnection(
    quota
      .command("set <workspace> <quotas>")
      .description(
        'set quotas, e.g. "cpu=4,memory=8Gi,instances=20,environments=5,previews=3,build_minutes=600" ("unlimited"; "default": the installation\'s); needs the owner\'s role, and an installation token above the installation\'s defaults',
      ),
    { workspace: true },
  ).action(
    userAction(async (x, workspace: string, text: string, _f: ConnectionFlags) => {
      const parsed = parseQuotaList(text); // refused here, before any call, naming the quota
      if (parsed.size === 0) throw new Error("name at least one quota, e.g. cpu=4");
      const values = Object.fromEntries([...parsed].map(([q, v]) => [q, settingText(q, v)]));
      const { m, client } = await service(x);
      const res = await client.setQuota({ workspace, values });
      if (x.json) x.printJson(m.SetQuotaResponseSchema, res);
      else x.printTable(["QUOTA", "USED", "LIMIT", "SET BY", ""], res.quotas.map(quotaRow));
    }),
  );
}
