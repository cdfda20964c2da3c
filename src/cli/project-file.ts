// Configuration as code (krane.yaml; docs/using.md): `krane schema` prints the file's JSON Schema
// (generated from proto/krane/ctrl/v1/project_file.proto by `npm run generate`, never kept by
// hand); `krane plan -f` shows per environment what applying the file would change (exit 2 when
// something would); `krane apply -f` applies exactly that, each environment in one transaction,
// refused when it moved since the plan; `krane export <project>` writes the file of what exists.
// What they run is ./project-file-run.ts, loaded when they run.
import type { Command } from "commander";
import { workspaceCommand } from "./command.js";
import type { FileFlags } from "./project-file-run.js";

export function registerProjectFileCommands(program: Command): void {
  program
    .command("schema")
    .description("print krane.yaml's JSON Schema (for editors: `# yaml-language-server: $schema=<file>`)")
    .action(async () => {
      const { projectFileSchema } = await import("../gen/krane/ctrl/v1/project_file_schema.js");
      process.stdout.write(`${JSON.stringify(projectFileSchema, null, 2)}\n`);
    });
  workspaceCommand(
    program
      .command("plan")
      .description("show what applying krane.yaml would change in each environment (exit 2 when something would)")
      .requiredOption("-f, --file <path>", "the krane.yaml")
      .option(
        "--prune",
        "also plan removing what the file no longer names (regions, endpoints, domains, config keys, secrets, jobs)",
      ),
    async (x, f: FileFlags) => {
      const { planCommand } = await import("./project-file-run.js");
      await planCommand(x, f);
    },
  );
  workspaceCommand(
    program
      .command("apply")
      .description(
        "apply krane.yaml: exactly what `krane plan` shows, each environment at once, refused if it changed meanwhile",
      )
      .requiredOption("-f, --file <path>", "the krane.yaml")
      .option(
        "--prune",
        "remove what the file no longer names (regions, endpoints, domains, config keys, secrets, jobs)",
      ),
    async (x, f: FileFlags) => {
      const { applyCommand } = await import("./project-file-run.js");
      await applyCommand(x, f);
    },
  );
  workspaceCommand(
    program
      .command("export <project>")
      .description("write the krane.yaml of a project as it is (its plan shows no change)")
      .option("-f, --file <path>", "write it to this file instead of printing it"),
    async (x, project: string, f: { file?: string }) => {
      const { exportCommand } = await import("./project-file-run.js");
      await exportCommand(x, project, f);
    },
  );
}
