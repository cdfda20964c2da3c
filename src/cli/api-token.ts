// `krane api-token create | list | revoke`: user API tokens against ctrl's ApiTokenService. A new
// token is printed once (ctrl keeps only its digest); connection flags, output format and error
// handling are the user commands' own (./user-client.ts).
import type { Command } from "commander";
import { ApiTokenSchema, ApiTokenService, CreateApiTokenResponseSchema, ListApiTokensResponseSchema } from "../gen/krane/ctrl/v1/api_pb.js";
import { Ctrl, printJson, printTable, run, when, withConnection, type ConnectionFlags } from "./user-client.js";

export function registerApiTokenCommands(program: Command): void {
  const tokens = program.command("api-token").description("user API tokens (for people, CI and this CLI)");
  withConnection(tokens.command("create <name>").description("create a user API token and print it (shown once)")).action((name: string, f: ConnectionFlags) =>
    run(async () => {
      const c = new Ctrl(f);
      const res = await c.client(ApiTokenService).createApiToken({ name });
      if (c.json) printJson(CreateApiTokenResponseSchema, res);
      else process.stdout.write(`${res.token}\n`);
    }),
  );
  withConnection(tokens.command("list").description("list user API tokens (* marks the one in use)")).action((f: ConnectionFlags) =>
    run(async () => {
      const c = new Ctrl(f);
      const res = await c.client(ApiTokenService).listApiTokens({});
      if (c.json) printJson(ListApiTokensResponseSchema, res);
      else
        printTable(
          ["ID", "NAME", "CREATED", "LAST USED", ""],
          res.apiTokens.map((t) => [t.id, t.name, when(t.createdAtUnixMs), when(t.lastUsedAtUnixMs), t.current ? "*" : ""]),
        );
    }),
  );
  withConnection(tokens.command("revoke <id>").description("revoke a user API token (not the last one)")).action((id: string, f: ConnectionFlags) =>
    run(async () => {
      const c = new Ctrl(f);
      const { apiToken } = await c.client(ApiTokenService).revokeApiToken({ tokenId: id });
      if (!apiToken) return;
      if (c.json) printJson(ApiTokenSchema, apiToken);
      else process.stdout.write(`revoked ${apiToken.id} (${apiToken.name})\n`);
    }),
  );
}
