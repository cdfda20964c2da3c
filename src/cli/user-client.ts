// The heavy half of the user commands, loaded only when one runs (see command.ts): the
// connection to ctrl (--ctrl-url / KRANE_CTRL_URL, --token / KRANE_TOKEN) over HTTP/2, the
// generated API, output as tables or JSON (--output) and the status views, the workspace in use
// (--workspace / KRANE_WORKSPACE, or the only one there is), and turning ctrl's errors into a
// one-line message and a non-zero exit. `npm run build` bundles this file with everything it
// imports into one module (scripts/build.mjs): it loads ~150 small files otherwise.
import type { DescMessage, DescService, MessageShape } from "@bufbuild/protobuf";
import { toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import Table from "cli-table3";
import * as api from "../gen/krane/ctrl/v1/api_pb.js";
import * as rollout from "../gen/krane/ctrl/v1/rollout_pb.js";
import { CTRL_VERSION_HEADER } from "../contracts/version.js";
import * as view from "./status-view.js";

export interface ConnectionFlags {
  ctrlUrl?: string;
  token?: string;
  output?: string;
  workspace?: string;
}

/** What a user command's body gets: the connection, the generated API, and the printers. */
export interface UserContext {
  readonly ctrl: Ctrl;
  readonly api: typeof api;
  readonly rollout: typeof rollout;
  readonly json: boolean;
  readonly toJson: typeof toJson;
  /** Human renderings of statuses (status-view.ts). */
  readonly view: typeof view;
  printJson<D extends DescMessage>(schema: D, msg: MessageShape<D>): void;
  printTable(head: string[], rows: (string | number)[][]): void;
}

export class Ctrl {
  private readonly transport;
  /** ctrl's build, from the header of the last response (empty before the first call). */
  ctrlBuild = "";
  constructor(readonly flags: ConnectionFlags) {
    if (!flags.token) throw new Error("no API token: pass --token or set KRANE_TOKEN");
    const token = flags.token;
    const bearer: Interceptor = (next) => async (req) => {
      req.header.set("authorization", `Bearer ${token}`);
      const res = await next(req);
      this.ctrlBuild = res.header.get(CTRL_VERSION_HEADER) ?? this.ctrlBuild;
      return res;
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
    const { workspaces } = await this.client(api.WorkspaceService).listWorkspaces({});
    const only = workspaces[0];
    if (workspaces.length === 1 && only) return only.slug;
    throw new Error(workspaces.length === 0 ? "no workspace yet: krane workspace create <slug>" : "several workspaces: pass --workspace or set KRANE_WORKSPACE");
  }
}

/** Connects, runs a command body, and turns ctrl errors into "code: message" with exit code 1. */
export async function runUserCommand(flags: ConnectionFlags, body: (ctx: UserContext) => Promise<void>): Promise<void> {
  await run(async () => {
    const ctrl = new Ctrl(flags);
    await body({ ctrl, api, rollout, json: ctrl.json, toJson, view, printJson, printTable });
  });
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
