// `krane api-token create | list | revoke`: user API tokens against ctrl's ApiTokenService. A new
// token is printed once (ctrl keeps only its digest). `--workspace` binds it to one workspace;
// without it, the new token has the caller's scope (an installation token's, or its workspace's).
// KRANE_WORKSPACE is not read here: a token's scope is never chosen by an environment variable
// left set for other commands.
import { Option, type Command } from "commander";
import { userCommand, when } from "./command.js";

export function registerApiTokenCommands(program: Command): void {
  const tokens = program.command("api-token").description("user API tokens (for people, CI and this CLI)");
  userCommand(
    tokens
      .command("create <name>")
      .description("create a user API token and print it (shown once)")
      .addOption(
        new Option(
          "-w, --workspace <slug>",
          "bind the token to this workspace (default: the caller's scope: installation, or its own workspace)",
        ),
      )
      .addOption(
        new Option(
          "--service-account <name>",
          "the workspace's service account that owns the token (default: you; an installation token: a service account of the token's name, admin)",
        ),
      ),
    async (x, name: string, opts: { workspace?: string; serviceAccount?: string }) => {
      const res = await x.ctrl.client(x.api.ApiTokenService).createApiToken({
        name,
        workspace: opts.workspace ?? "",
        serviceAccount: opts.serviceAccount ?? "",
      });
      if (x.json) x.printJson(x.api.CreateApiTokenResponseSchema, res);
      else process.stdout.write(`${res.token}\n`);
    },
  );
  userCommand(
    tokens.command("list").description("list the user API tokens of your scope with theirs (* marks the one in use)"),
    async (x) => {
      const api = x.ctrl.client(x.api.ApiTokenService);
      const res = await x.ctrl.allPages("apiTokens", (page) => api.listApiTokens(page));
      if (x.json) x.printJson(x.api.ListApiTokensResponseSchema, res);
      else
        x.printTable(
          ["ID", "NAME", "SCOPE", "OWNER", "ROLE", "CREATED", "LAST USED", ""],
          res.apiTokens.map((t) => [
            t.id,
            t.name,
            t.workspace === "" ? "installation" : `workspace ${t.workspace}`,
            t.member !== "" ? t.member : t.serviceAccount !== "" ? `service account ${t.serviceAccount}` : "-",
            t.role === "" ? "-" : t.role,
            when(t.createdAtUnixMs),
            when(t.lastUsedAtUnixMs),
            t.current ? "*" : "",
          ]),
        );
    },
  );
  userCommand(
    tokens.command("revoke <id>").description("revoke a user API token (not the last installation token)"),
    async (x, id: string) => {
      const { apiToken } = await x.ctrl.client(x.api.ApiTokenService).revokeApiToken({ tokenId: id });
      if (!apiToken) return;
      if (x.json) x.printJson(x.api.ApiTokenSchema, apiToken);
      else process.stdout.write(`revoked ${apiToken.id} (${apiToken.name})\n`);
    },
  );
}
