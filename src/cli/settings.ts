// `krane config set|unset|list` and `krane secret set|unset|list`: an environment's configuration
// (plain values, environment variables from a ConfigMap) and secrets (encrypted at rest in ctrl,
// a Kubernetes Secret in the cluster; write-only: lists show keys and times, never values). Each
// change that alters anything makes a new revision, rolled out with the environment's policy.
//
// Secret values: `KEY=@file` reads a file, `KEY=-` reads standard input (one key), and `KEY=value`
// works but shows the value in the process list and shell history. `--external KEY=path`
// references a path in the cluster's external secret store (Secrets Store CSI).
import type { Command } from "commander";
import type { ConfigChange } from "../gen/krane/ctrl/v1/config_pb.js";
import {
  collect,
  environmentRef,
  parseKeyValue,
  readStdinValue,
  when,
  workspaceCommand,
  type ConnectionFlags,
  type UserContext,
} from "./command.js";

function printChange(x: UserContext, change: ConfigChange | undefined, what: string): void {
  if (x.json) {
    process.stdout.write(
      `${JSON.stringify({ changed: change?.changed ?? false, deploymentId: change?.deployment?.id ?? "", revision: String(change?.deployment?.revision ?? 0n) })}\n`,
    );
    return;
  }
  if (!change?.changed) process.stdout.write(`${what}: nothing changed\n`);
  else if (change.deployment)
    process.stdout.write(
      `${what}: revision ${change.deployment.revision} (${change.deployment.id}) rolls out (krane rollout status)\n`,
    );
  else process.stdout.write(`${what}: stored; the first deployment gets it\n`);
}

export function registerSettingsCommands(program: Command): void {
  const config = program
    .command("config")
    .description("an environment's configuration (plain values; each change is a new revision)");
  workspaceCommand(
    config.command("set <project/env> <KEY=VALUE...>").description("set configuration values"),
    async (x, target: string, pairs: string[]) => {
      const { ConfigService } = await import("../gen/krane/ctrl/v1/config_pb.js");
      const values = pairs.map((p) => parseKeyValue("KEY=VALUE", p));
      const { change } = await x.ctrl.client(ConfigService).setConfig({ ...(await environmentRef(x, target)), values });
      printChange(x, change, "config");
    },
  );
  workspaceCommand(
    config.command("unset <project/env> <KEY...>").description("remove configuration values"),
    async (x, target: string, keys: string[]) => {
      const { ConfigService } = await import("../gen/krane/ctrl/v1/config_pb.js");
      const { change } = await x.ctrl.client(ConfigService).unsetConfig({ ...(await environmentRef(x, target)), keys });
      printChange(x, change, "config");
    },
  );
  workspaceCommand(
    config.command("list <project/env>").description("list configuration values"),
    async (x, target: string) => {
      const { ConfigService, ListConfigResponseSchema } = await import("../gen/krane/ctrl/v1/config_pb.js");
      const res = await x.ctrl.client(ConfigService).listConfig(await environmentRef(x, target));
      if (x.json) x.printJson(ListConfigResponseSchema, res);
      else
        x.printTable(
          ["KEY", "VALUE", "UPDATED"],
          res.entries.map((e) => [e.key, e.value, when(e.updatedAtUnixMs)]),
        );
    },
  );

  const secret = program
    .command("secret")
    .description("an environment's secrets (encrypted at rest, write-only; each change is a new revision)");
  workspaceCommand(
    secret
      .command("set <project/env> [KEY=VALUE...]")
      .description(
        "set secrets: KEY=@file reads a file, KEY=- standard input; KEY=value shows the value in the process list",
      )
      .option(
        "--external <KEY=path>",
        "read KEY from this path of the cluster's external secret store (repeatable)",
        collect,
        [],
      ),
    async (x, target: string, pairs: string[], f: ConnectionFlags & { external: string[] }) => {
      const { readFile } = await import("node:fs/promises");
      const { ConfigService } = await import("../gen/krane/ctrl/v1/config_pb.js");
      if (pairs.length === 0 && f.external.length === 0)
        throw new Error("nothing to set: give KEY=VALUE, KEY=@file, KEY=- or --external KEY=path");
      if (pairs.filter((p) => p.endsWith("=-")).length > 1) throw new Error("only one key can read standard input");
      const secrets = [];
      for (const p of pairs) {
        const { key, value } = parseKeyValue("KEY=VALUE", p);
        let v = value;
        if (value === "-") v = await readStdinValue();
        else if (value.startsWith("@")) v = (await readFile(value.slice(1), "utf8")).replace(/\r?\n$/, "");
        secrets.push({ key, source: { case: "value" as const, value: v } });
      }
      for (const e of f.external) {
        const { key, value } = parseKeyValue("--external", e);
        secrets.push({ key, source: { case: "externalPath" as const, value } });
      }
      const { change } = await x.ctrl
        .client(ConfigService)
        .setSecrets({ ...(await environmentRef(x, target)), secrets });
      printChange(x, change, "secrets");
    },
  );
  workspaceCommand(
    secret.command("unset <project/env> <KEY...>").description("remove secrets"),
    async (x, target: string, keys: string[]) => {
      const { ConfigService } = await import("../gen/krane/ctrl/v1/config_pb.js");
      const { change } = await x.ctrl
        .client(ConfigService)
        .unsetSecrets({ ...(await environmentRef(x, target)), keys });
      printChange(x, change, "secrets");
    },
  );
  workspaceCommand(
    secret.command("list <project/env>").description("list secret keys (never values)"),
    async (x, target: string) => {
      const { ConfigService, ListSecretsResponseSchema } = await import("../gen/krane/ctrl/v1/config_pb.js");
      const res = await x.ctrl.client(ConfigService).listSecrets(await environmentRef(x, target));
      if (x.json) x.printJson(ListSecretsResponseSchema, res);
      else
        x.printTable(
          ["KEY", "SOURCE", "EXTERNAL PATH", "UPDATED"],
          res.entries.map((e) => [e.key, e.source, e.externalPath || "-", when(e.updatedAtUnixMs)]),
        );
    },
  );
}
