// `krane key create | list | revoke <project/env>`: an environment's API keys against ctrl's
// ApiKeyService, checked at its sentinels by an "apikey" policy (`krane policy add --kind apikey`).
// The key is printed once, by create; ctrl keeps only its SHA-256.
import type { Command } from "commander";
import type { ApiKey } from "../gen/krane/ctrl/v1/keys_pb.js";
import { collect, environmentRef, when, workspaceCommand, type ConnectionFlags, type UserContext } from "./command.js";
import { parseWindow } from "./policy.js";

async function service(x: UserContext) {
  const m = await import("../gen/krane/ctrl/v1/keys_pb.js");
  return { m, client: x.ctrl.client(m.ApiKeyService) };
}

interface CreateFlags extends ConnectionFlags {
  name: string;
  expires?: string;
  limit?: string;
  window?: string;
  meta?: string[];
}

const SECONDS = { s: 1, m: 60, h: 3600, d: 86_400 } as const;

/** `--expires`: a duration from `now` ("30d", "12h") or a date ("2027-01-31T00:00:00Z"); epoch ms. */
export function expiryOf(v: string, now: number): bigint {
  const m = /^(\d+)(s|m|h|d)$/.exec(v.trim());
  if (m) return BigInt(now + Number(m[1]) * SECONDS[m[2] as keyof typeof SECONDS] * 1000);
  const t = Date.parse(v);
  if (!/^\d{4}-\d{2}-\d{2}/.test(v.trim()) || Number.isNaN(t))
    throw new Error(`--expires: expected a duration such as 30d or 12h, or a date such as 2027-01-31, got "${v}"`);
  return BigInt(t);
}

/** `--meta k=v` (repeatable) as a map; a repeated key is refused. */
export function metadataOf(pairs: readonly string[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const p of pairs ?? []) {
    const i = p.indexOf("=");
    if (i <= 0) throw new Error(`--meta: expected key=value, got "${p}"`);
    const k = p.slice(0, i);
    if (k in out) throw new Error(`--meta: ${k} is given twice`);
    out[k] = p.slice(i + 1);
  }
  return out;
}

export function keyRow(k: ApiKey): string[] {
  return [
    k.id,
    k.name,
    `…${k.hint}`,
    k.rateLimit === 0n ? "-" : `${k.rateLimit}/${k.rateWindowSeconds}s`,
    when(k.expiresAtUnixMs),
    k.revokedAtUnixMs === 0n ? "active" : `revoked ${when(k.revokedAtUnixMs)}`,
    k.createdBy,
  ];
}

export function registerKeyCommands(program: Command): void {
  const key = program
    .command("key")
    .description("an environment's API keys, checked at its sentinels by an apikey policy (`krane policy add`)");
  workspaceCommand(
    key
      .command("create <project/env>")
      .description("make a key: it is printed this once, ctrl keeps only its SHA-256")
      .requiredOption("--name <name>", "what the key is for (printable, at most 100 characters)")
      .option("--expires <when>", "a duration (30d, 12h) or a date (2027-01-31); default never")
      .option("--limit <n>", "the key's own rate limit: requests per --window")
      .option("--window <w>", "the window of --limit, e.g. 60s, 1m, 1h")
      .option("--meta <key=value>", "metadata forwarded to the app with the key (repeatable)", collect),
    async (x, target: string, f: CreateFlags) => {
      const { m, client } = await service(x);
      if (f.limit !== undefined && !/^\d+$/.test(f.limit.trim()))
        throw new Error(`--limit: expected a whole number, got "${f.limit}"`);
      const res = await client.createApiKey({
        ...(await environmentRef(x, target)),
        name: f.name,
        expiresAtUnixMs: f.expires === undefined ? 0n : expiryOf(f.expires, Date.now()),
        rateLimit: f.limit === undefined ? 0n : BigInt(f.limit.trim()),
        rateWindowSeconds: parseWindow("--window", f.window),
        metadata: metadataOf(f.meta),
      });
      if (x.json) x.printJson(m.CreateApiKeyResponseSchema, res);
      else
        process.stdout.write(
          `created API key ${res.key?.id ?? ""} (${f.name}), routing version ${res.routingVersion}\n` +
            `${res.secret}\n` +
            "This is the only time the key is shown: store it now.\n",
        );
    },
  );
  workspaceCommand(
    key.command("list <project/env>").description("the environment's keys, newest first (never the keys themselves)"),
    async (x, target: string) => {
      const { m, client } = await service(x);
      const res = await client.listApiKeys(await environmentRef(x, target));
      if (x.json) x.printJson(m.ListApiKeysResponseSchema, res);
      else if (res.keys.length === 0) process.stdout.write("no API keys (krane key create)\n");
      else x.printTable(["ID", "NAME", "KEY", "LIMIT", "EXPIRES", "STATE", "CREATED BY"], res.keys.map(keyRow));
    },
  );
  workspaceCommand(
    key
      .command("revoke <project/env> <key-id>")
      .description("revoke a key: its sentinels refuse it from the next routing version"),
    async (x, target: string, id: string) => {
      const { m, client } = await service(x);
      const res = await client.revokeApiKey({ ...(await environmentRef(x, target)), keyId: id });
      if (x.json) x.printJson(m.RevokeApiKeyResponseSchema, res);
      else process.stdout.write(`revoked API key ${id}, routing version ${res.routingVersion}\n`);
    },
  );
}
