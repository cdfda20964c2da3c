// `krane workspace create | list | get`: workspaces (tenants) through ctrl's WorkspaceService.
import type { Command } from "commander";
import { registerWorkspaceDelete } from "./deletion.js";
import { userCommand, when, type ConnectionFlags } from "./command.js";

export function registerWorkspaceCommands(program: Command): void {
  const ws = program.command("workspace").description("workspaces (tenants)");
  registerWorkspaceDelete(ws);
  userCommand(
    ws.command("create <slug>").description("create a workspace").option("--name <name>", "display name"),
    async (x, slug: string, f: ConnectionFlags & { name?: string }) => {
      const { workspace } = await x.ctrl.client(x.api.WorkspaceService).createWorkspace({ slug, name: f.name ?? "" });
      if (!workspace) return;
      if (x.json) x.printJson(x.api.WorkspaceSchema, workspace);
      else x.printTable(["SLUG", "NAMESPACE", "ID"], [[workspace.slug, workspace.k8sNamespace, workspace.id]]);
    },
  );
  userCommand(ws.command("list").description("list workspaces"), async (x) => {
    const ws = x.ctrl.client(x.api.WorkspaceService);
    const res = await x.ctrl.allPages("workspaces", (page) => ws.listWorkspaces(page));
    if (x.json) x.printJson(x.api.ListWorkspacesResponseSchema, res);
    else
      x.printTable(
        ["SLUG", "NAME", "NAMESPACE", "ID"],
        res.workspaces.map((w) => [w.slug, w.name, w.k8sNamespace, w.id]),
      );
  });
  userCommand(ws.command("get <workspace>").description("show a workspace"), async (x, ref: string) => {
    const { workspace } = await x.ctrl.client(x.api.WorkspaceService).getWorkspace({ workspace: ref });
    if (!workspace) return;
    if (x.json) x.printJson(x.api.WorkspaceSchema, workspace);
    else
      x.printTable(
        ["SLUG", "NAME", "NAMESPACE", "ID", "CREATED"],
        [[workspace.slug, workspace.name, workspace.k8sNamespace, workspace.id, when(workspace.createdAtUnixMs)]],
      );
  });
}
