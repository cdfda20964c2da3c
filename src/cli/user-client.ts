// Shared plumbing of the user commands: the connection to ctrl (--ctrl-url / KRANE_CTRL_URL,
// --token / KRANE_TOKEN), output as tables or JSON (--output), the workspace in use
// (--workspace / KRANE_WORKSPACE, or the only one there is), and turning ctrl's errors into a
// one-line message and a non-zero exit.
import type { DescMessage, DescService, MessageShape } from "@bufbuild/protobuf";
import { toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import Table from "cli-table3";
import { Option, type Command } from "commander";
import { WorkspaceService } from "../gen/krane/ctrl/v1/api_pb.js";

export interface ConnectionFlags {
  ctrlUrl?: string;
  token?: string;
  output?: string;
  workspace?: string;
}

/** Adds the connection and output options to a user command. */
export function withConnection(cmd: Command, opts: { workspace?: boolean } = {}): Command {
  cmd
    .addOption(new Option("--ctrl-url <url>", "ctrl's API URL").env("KRANE_CTRL_URL").default("http://127.0.0.1:7070"))
    .addOption(new Option("--token <token>", "user API token").env("KRANE_TOKEN"))
    .addOption(new Option("-o, --output <format>", "table or json").choices(["table", "json"]).default("table"));
  if (opts.workspace) cmd.addOption(new Option("-w, --workspace <slug>", "workspace (default: the only one)").env("KRANE_WORKSPACE"));
  return cmd;
}

export class Ctrl {
  private readonly transport;
  constructor(readonly flags: ConnectionFlags) {
    if (!flags.token) throw new Error("no API token: pass --token or set KRANE_TOKEN");
    const token = flags.token;
    const bearer: Interceptor = (next) => async (req) => {
      req.header.set("authorization", `Bearer ${token}`);
      return next(req);
    };
    this.transport = createConnectTransport({ baseUrl: flags.ctrlUrl ?? "http://127.0.0.1:7070", httpVersion: "2", interceptors: [bearer], defaultTimeoutMs: 30_000 });
  }

  client<S extends DescService>(service: S): Client<S> {
    return createClient(service, this.transport);
  }

  get json(): boolean {
    return this.flags.output === "json";
  }

  /** The --workspace given, or the only workspace there is. */
  async workspace(): Promise<string> {
    if (this.flags.workspace) return this.flags.workspace;
    const { workspaces } = await this.client(WorkspaceService).listWorkspaces({});
    const only = workspaces[0];
    if (workspaces.length === 1 && only) return only.slug;
    throw new Error(workspaces.length === 0 ? "no workspace yet: krane workspace create <slug>" : "several workspaces: pass --workspace or set KRANE_WORKSPACE");
  }
}

/** Runs a command body, turning ctrl errors into "code: message" with exit code 1. */
export async function run(body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (err) {
    if (err instanceof ConnectError) {
      const hint = err.code === Code.Unavailable ? " (is ctrl running at --ctrl-url?)" : "";
      throw new Error(`${codeName(err.code)}: ${err.rawMessage}${hint}`);
    }
    throw err;
  }
}

function codeName(c: Code): string {
  return Code[c].replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
}

export function printJson<D extends DescMessage>(schema: D, msg: MessageShape<D>): void {
  process.stdout.write(`${JSON.stringify(toJson(schema, msg, { alwaysEmitImplicit: true }), null, 2)}\n`);
}

export function printTable(head: string[], rows: (string | number)[][]): void {
  const table = new Table({ head, style: { head: [], border: [] } });
  for (const r of rows) table.push(r.map(String));
  process.stdout.write(`${table.toString()}\n`);
}

export function when(ms: bigint): string {
  return ms === 0n ? "-" : new Date(Number(ms)).toISOString().replace(/\.\d+Z$/, "Z");
}

/** "project/env" → both parts. */
export function splitTarget(target: string): { project: string; environment: string } {
  const m = /^([^/]+)\/([^/]+)$/.exec(target);
  if (!m || m[1] === undefined || m[2] === undefined) throw new Error(`expected <project>/<env>, got "${target}"`);
  return { project: m[1], environment: m[2] };
}

export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

export function intArg(name: string): (v: string) => number {
  return (v) => {
    if (!/^-?\d+$/.test(v)) throw new Error(`${name}: expected an integer, got "${v}"`);
    return Number(v);
  };
}
