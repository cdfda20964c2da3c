// `krane registry add | list | remove`: a workspace's private registry credentials through
// ctrl's RegistryService. The password (or access token) is read from stdin only, never from the
// command line (every user of the machine can read a process's arguments), and never printed.
import type { Command } from "commander";
import { readStdinValue, when, workspaceCommand, type ConnectionFlags } from "./command.js";

export function registerRegistryCommands(program: Command): void {
  const registry = program
    .command("registry")
    .description("private registries: the credentials a workspace's images are resolved and pulled with");
  workspaceCommand(
    registry
      .command("add <host>")
      .description("store (or replace) the workspace's credential for a registry host, e.g. ghcr.io")
      .requiredOption("--username <name>", "the registry user name")
      .requiredOption("--password-stdin", "read the password or access token from stdin"),
    async (x, host: string, f: ConnectionFlags & { username: string; passwordStdin: boolean }) => {
      const password = await readStdinValue();
      const res = await x.ctrl
        .client(x.api.RegistryService)
        .addRegistry({ workspace: await x.ctrl.workspace(), host, username: f.username, password });
      if (x.json) x.printJson(x.api.AddRegistryResponseSchema, res);
      else process.stdout.write(`${res.replaced ? "replaced" : "added"} ${res.registry?.host ?? host}\n`);
    },
  );
  workspaceCommand(
    registry.command("list").description("list the workspace's registries (never a password)"),
    async (x) => {
      const res = await x.ctrl.client(x.api.RegistryService).listRegistries({ workspace: await x.ctrl.workspace() });
      if (x.json) x.printJson(x.api.ListRegistriesResponseSchema, res);
      else
        x.printTable(
          ["HOST", "USERNAME", "UPDATED"],
          res.registries.map((r) => [r.host, r.username, when(r.updatedAtUnixMs)]),
        );
    },
  );
  workspaceCommand(
    registry.command("remove <host>").description("forget the workspace's credential for a host"),
    async (x, host: string) => {
      await x.ctrl.client(x.api.RegistryService).removeRegistry({ workspace: await x.ctrl.workspace(), host });
      if (!x.json) process.stdout.write(`removed ${host}\n`);
    },
  );
}
