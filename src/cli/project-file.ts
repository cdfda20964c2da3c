// Configuration as code: `krane schema` prints krane.yaml's JSON Schema (generated from
// proto/krane/ctrl/v1/project_file.proto by `npm run generate`, never kept by hand) for editors
// to complete and check the file with.
import type { Command } from "commander";

export function registerProjectFileCommands(program: Command): void {
  program
    .command("schema")
    .description(
      "print krane.yaml's JSON Schema (for editors: yaml-language-server's `# yaml-language-server: $schema=…`)",
    )
    .action(async () => {
      const { projectFileSchema } = await import("../gen/krane/ctrl/v1/project_file_schema.js");
      process.stdout.write(`${JSON.stringify(projectFileSchema, null, 2)}\n`);
    });
}
