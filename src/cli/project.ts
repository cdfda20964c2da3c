// `krane project create | list | get`: the projects of a workspace through ctrl's ProjectService.
import type { Command } from "commander";
import { registerProjectDelete } from "./deletion.js";
import { when, workspaceCommand, type ConnectionFlags } from "./command.js";

export function registerProjectCommands(program: Command): void {
  const prj = program.command("project").description("projects of a workspace");
  registerProjectDelete(prj);
  workspaceCommand(
    prj.command("create <slug>").description("create a project").option("--name <name>", "display name"),
    async (x, slug: string, f: ConnectionFlags & { name?: string }) => {
      const { project } = await x.ctrl
        .client(x.api.ProjectService)
        .createProject({ workspace: await x.ctrl.workspace(), slug, name: f.name ?? "" });
      if (!project) return;
      if (x.json) x.printJson(x.api.ProjectSchema, project);
      else x.printTable(["SLUG", "ID"], [[project.slug, project.id]]);
    },
  );
  workspaceCommand(prj.command("list").description("list projects"), async (x) => {
    const workspace = await x.ctrl.workspace();
    const projects = x.ctrl.client(x.api.ProjectService);
    const res = await x.ctrl.allPages("projects", (page) => projects.listProjects({ workspace, ...page }));
    if (x.json) x.printJson(x.api.ListProjectsResponseSchema, res);
    else
      x.printTable(
        ["SLUG", "NAME", "ID"],
        res.projects.map((p) => [p.slug, p.name, p.id]),
      );
  });
  workspaceCommand(prj.command("get <project>").description("show a project"), async (x, ref: string) => {
    const { project } = await x.ctrl
      .client(x.api.ProjectService)
      .getProject({ workspace: await x.ctrl.workspace(), project: ref });
    if (!project) return;
    if (x.json) x.printJson(x.api.ProjectSchema, project);
    else
      x.printTable(
        ["SLUG", "NAME", "ID", "CREATED"],
        [[project.slug, project.name, project.id, when(project.createdAtUnixMs)]],
      );
  });
}
