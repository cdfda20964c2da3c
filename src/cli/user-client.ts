// Shared plumbing of the user commands: the connection to ctrl (--ctrl-url / KRANE_CTRL_URL,
// --token / KRANE_TOKEN), output as tables or JSON (--output), the workspace in use
// (--workspace / KRANE_WORKSPACE, or the only one there is), and turning ctrl's errors into a
// one-line message and a non-zero exit.
//
// Outages: while ctrl is unreachable or answers unavailable / resource_exhausted (its database
// is down), reads and idempotent calls are tried again with backoff for --retry-for (default
// 10 s), with a line on stderr per retry; then the command exits with EXIT_UNAVAILABLE and says
// what is down. Calls that are not idempotent (creates, new revisions, new tokens) are not
// retried: a repeat whose first answer was lost could apply twice.
import type { DescMessage, DescMethod, DescService, MessageShape } from "@bufbuild/protobuf";
import { toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import Table from "cli-table3";
import { Option, type Command } from "commander";
import { WorkspaceService } from "../gen/krane/ctrl/v1/api_pb.js";
import { Backoff, sleep, type BackoffPolicy } from "../retry/backoff.js";

/** The exit code of a command that gave up because ctrl or its database was unavailable (sysexits EX_UNAVAILABLE). */
export const EXIT_UNAVAILABLE = 69;

/** Public API methods that may be repeated after an outage: reads, and writes that set a state. */
export const RETRY_SAFE: ReadonlySet<string> = new Set([
  "WorkspaceService.GetWorkspace",
  "WorkspaceService.ListWorkspaces",
  "ProjectService.GetProject",
  "ProjectService.ListProjects",
  "EnvironmentService.GetEnvironment",
  "EnvironmentService.ListEnvironments",
  "EnvironmentService.UpdateEnvironment",
  "DeploymentService.GetDeployment",
  "DeploymentService.ListDeployments",
  "DeploymentService.DeleteDeployment",
  "RegionService.ListRegions",
  "RegionService.ListClusters",
  "RegionService.RevokeClusterToken",
  "ApiTokenService.ListApiTokens",
  "ApiTokenService.RevokeApiToken",
  "StatusService.GetEnvironmentStatus",
  "RolloutService.Scale",
  "RolloutService.Pause",
  "RolloutService.Resume",
  "RolloutService.History",
  "RolloutService.GetRolloutStatus",
]);

/** Public API methods a repeat could apply twice (until they take idempotency keys). */
export const NOT_RETRIED: ReadonlySet<string> = new Set([
  "WorkspaceService.CreateWorkspace",
  "ProjectService.CreateProject",
  "EnvironmentService.CreateEnvironment",
  "DeploymentService.CreateDeployment",
  "RegionService.CreateRegion",
  "RegionService.CreateClusterToken",
  "ApiTokenService.CreateApiToken",
  "RolloutService.Undo",
  "RolloutService.Restart",
]);

export function methodKey(m: DescMethod): string {
  return `${m.parent.name}.${m.name}`;
}

/** Backoff between attempts while ctrl is unavailable. */
export const OUTAGE_BACKOFF: BackoffPolicy = { baseMs: 250, capMs: 2000, minMs: 100 };

export function isOutage(err: unknown): err is ConnectError {
  return err instanceof ConnectError && (err.code === Code.Unavailable || err.code === Code.ResourceExhausted);
}

/** What is down, in one line: ctrl's own answer names its database; anything else means ctrl was not reached. */
export function outageMessage(err: ConnectError, ctrlUrl: string): string {
  return /^ctrl's database/.test(err.rawMessage) ? err.rawMessage : `ctrl is not reachable at ${ctrlUrl} (${err.rawMessage}): is it running?`;
}

/** Parses "10s", "500ms", "2m" or plain seconds. */
export function parseDuration(v: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(v.trim());
  if (!m) throw new Error(`expected a duration such as 10s, 500ms or 2m, got "${v}"`);
  const n = Number(m[1]);
  return Math.round(m[2] === "ms" ? n : m[2] === "m" ? n * 60_000 : n * 1000);
}

export interface OutageRetryOptions {
  readonly windowMs: number;
  readonly ctrlUrl: string;
  readonly progress: (line: string) => void;
  readonly policy?: BackoffPolicy;
  readonly now?: () => number;
}

/**
 * Repeats a retry-safe unary call while ctrl is unavailable, for at most windowMs; when it gives
 * up, or for a call that is not retried, the error says what is down (and that the call was not
 * repeated).
 */
export function outageRetry(opts: OutageRetryOptions): Interceptor {
  const now = opts.now ?? Date.now;
  return (next) => async (req) => {
    const safe = !req.stream && RETRY_SAFE.has(methodKey(req.method));
    const started = now();
    const backoff = new Backoff(opts.policy ?? OUTAGE_BACKOFF);
    for (;;) {
      try {
        return await next(req);
      } catch (err) {
        if (!isOutage(err)) throw err;
        const what = outageMessage(err, opts.ctrlUrl);
        if (!safe) throw new ConnectError(`${what}; ${req.method.name} is not repeated automatically (it is not idempotent)`, err.code);
        const left = opts.windowMs - (now() - started);
        if (left <= 0 || req.signal.aborted) {
          const tried = opts.windowMs > 0 ? ` (retried for ${(opts.windowMs / 1000).toFixed(opts.windowMs % 1000 === 0 ? 0 : 1)} s)` : "";
          throw new ConnectError(`${what}${tried}`, err.code);
        }
        const delay = Math.min(backoff.next(), left);
        opts.progress(`krane: ${what}; retrying ${req.method.name} in ${(delay / 1000).toFixed(1)} s (${(left / 1000).toFixed(1)} s left)`);
        await sleep(delay, req.signal);
      }
    }
  };
}

export interface ConnectionFlags {
  ctrlUrl?: string;
  token?: string;
  output?: string;
  workspace?: string;
  /** How long reads and idempotent calls are retried while ctrl is unavailable ("10s"). */
  retryFor?: string;
}

/** Adds the connection and output options to a user command. */
export function withConnection(cmd: Command, opts: { workspace?: boolean } = {}): Command {
  cmd
    .addOption(new Option("--ctrl-url <url>", "ctrl's API URL").env("KRANE_CTRL_URL").default("http://127.0.0.1:7070"))
    .addOption(new Option("--token <token>", "user API token").env("KRANE_TOKEN"))
    .addOption(new Option("-o, --output <format>", "table or json").choices(["table", "json"]).default("table"))
    .addOption(
      new Option("--retry-for <duration>", `retry reads and idempotent calls this long while ctrl or its database is unavailable (0 disables), then exit ${EXIT_UNAVAILABLE}`)
        .env("KRANE_RETRY_FOR")
        .default("10s"),
    );
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
    const baseUrl = flags.ctrlUrl ?? "http://127.0.0.1:7070";
    const retry = outageRetry({ windowMs: parseDuration(flags.retryFor ?? "10s"), ctrlUrl: baseUrl, progress: (line) => process.stderr.write(`${line}\n`) });
    this.transport = createConnectTransport({ baseUrl, httpVersion: "2", interceptors: [retry, bearer], defaultTimeoutMs: 30_000 });
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

/** Runs a command body, turning ctrl errors into "code: message" with exit code 1 (EXIT_UNAVAILABLE in an outage). */
export async function run(body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (err) {
    if (err instanceof ConnectError) {
      if (isOutage(err)) process.exitCode = EXIT_UNAVAILABLE;
      throw new Error(`${codeName(err.code)}: ${err.rawMessage}`);
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
