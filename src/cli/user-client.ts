// The heavy half of the user commands, loaded only when one runs (see command.ts): the
// connection to ctrl (--ctrl-url / KRANE_CTRL_URL, --token / KRANE_TOKEN) over HTTP/2, the
// generated API, output as tables or JSON (--output) and the status views, the workspace in use
// (--workspace / KRANE_WORKSPACE, or the only one there is), and turning ctrl's errors into a
// one-line message and a non-zero exit. `npm run build` bundles this file with everything it
// imports into one module (scripts/build.mjs): it loads ~150 small files otherwise.
//
// Outages: while ctrl is unreachable or answers unavailable / resource_exhausted (its database
// is down), calls are tried again with backoff for --retry-for (default 10 s), with a line on
// stderr per retry; then the command exits with EXIT_UNAVAILABLE and says what is down. Every
// call carries an Idempotency-Key (one per command invocation and call, the same on each
// repeat), so a create or a new revision whose first answer was lost is answered again by ctrl
// instead of applied twice (proto/krane/ctrl/v1/api.proto says how ctrl keeps keys).
//
// Lists follow pages (`Ctrl.allPages`): a command shows every item, asking for the largest page.
import type { DescMessage, DescMethod, DescService, MessageShape } from "@bufbuild/protobuf";
import { toJson } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { randomUUID } from "node:crypto";
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import Table from "cli-table3";
import * as api from "../gen/krane/ctrl/v1/api_pb.js";
import * as rollout from "../gen/krane/ctrl/v1/rollout_pb.js";
import * as exposure from "../gen/krane/ctrl/v1/exposure_pb.js";
import * as access from "../gen/krane/ctrl/v1/access_pb.js";
import { IDEMPOTENCY_KEY_HEADER } from "../contracts/headers.js";
import { CTRL_VERSION_HEADER } from "../contracts/version.js";
import { nodeTransport } from "../client/node.js";
import * as view from "./status-view.js";
import {
  isOutageCode,
  only,
  OUTAGE_BACKOFF,
  outageText,
  parseDuration,
  repeatWhileDown,
  type OutageRetryOptions,
} from "./calls.js";
import { EXIT_UNAVAILABLE } from "./exit-codes.js";
import { commandBearer } from "./cli-config.js";

export { EXIT_UNAVAILABLE };

/**
 * How a call may be repeated after an outage, as its proto declares it (idempotency_level, see
 * proto/krane/ctrl/v1/policy.proto): reads (NO_SIDE_EFFECTS) and writes that set a state
 * (IDEMPOTENT) as they are; anything else (creates, new revisions, new tokens, sealing a secret
 * afresh) only under its Idempotency-Key, which makes ctrl answer a repeat with the first answer.
 */
export function repeatable(m: DescMethod): "as-is" | "with-key" {
  return m.idempotency === MethodOptions_IdempotencyLevel.IDEMPOTENCY_UNKNOWN ? "with-key" : "as-is";
}

/**
 * Gives every unary call its own Idempotency-Key, `<invocation>:<n>`: the same on each repeat of
 * the call (outageRetry repeats below this interceptor), different for the next call.
 */
export function idempotencyKeys(invocation: string = randomUUID()): Interceptor {
  let n = 0;
  return (next) => async (req) => {
    if (!req.stream && !req.header.has(IDEMPOTENCY_KEY_HEADER))
      req.header.set(IDEMPOTENCY_KEY_HEADER, `${invocation}:${++n}`);
    return next(req);
  };
}

export { OUTAGE_BACKOFF, parseDuration, type OutageRetryOptions };

export function isOutage(err: unknown): err is ConnectError {
  return err instanceof ConnectError && isOutageCode(codeName(err.code), err.rawMessage);
}

/** What is down, in one line (calls.ts). */
export function outageMessage(err: ConnectError, ctrlUrl: string): string {
  return outageText(err.rawMessage, ctrlUrl);
}

/**
 * Repeats a retry-safe unary call while ctrl is unavailable, for at most windowMs; when it gives
 * up, or for a call that is not retried, the error says what is down (and that the call was not
 * repeated).
 */
export function outageRetry(opts: OutageRetryOptions): Interceptor {
  return (next) => async (req) => {
    const how = repeatable(req.method);
    const safe = !req.stream && (how === "as-is" || req.header.has(IDEMPOTENCY_KEY_HEADER));
    return repeatWhileDown<Awaited<ReturnType<typeof next>>, ConnectError>(
      opts,
      {
        method: req.method.name,
        safe,
        signal: req.signal,
        outage: (err) => (isOutage(err) ? { code: codeName(err.code), message: err.rawMessage } : undefined),
        fail: (message, err) => new ConnectError(message, err.code),
      },
      () => next(req),
    );
  };
}

export interface ConnectionFlags {
  ctrlUrl?: string;
  token?: string;
  output?: string;
  workspace?: string;
  /** How long calls are retried while ctrl is unavailable ("10s"). */
  retryFor?: string;
}

/** What a user command's body gets: the connection, the generated API, and the printers. */
export interface UserContext {
  readonly ctrl: Ctrl;
  readonly api: typeof api;
  readonly rollout: typeof rollout;
  readonly exposure: typeof exposure;
  readonly access: typeof access;
  readonly json: boolean;
  readonly toJson: typeof toJson;
  /** Human renderings of statuses (status-view.ts). */
  readonly view: typeof view;
  printJson<D extends DescMessage>(schema: D, msg: MessageShape<D>): void;
  printTable(head: string[], rows: (string | number)[][]): void;
  /** ctrl answered not_found. */
  isNotFound(err: unknown): boolean;
}

export class Ctrl {
  private readonly transport;
  /** ctrl's build, from the header of the last response (empty before the first call). */
  ctrlBuild = "";
  constructor(readonly flags: ConnectionFlags) {
    const baseUrl = flags.ctrlUrl || "http://127.0.0.1:7070";
    const { token, signedIn } = bearerOf(flags.token, baseUrl);
    const build: Interceptor = (next) => async (req) => {
      const res = await next(req);
      this.ctrlBuild = res.header.get(CTRL_VERSION_HEADER) ?? this.ctrlBuild;
      return res;
    };
    const retry = outageRetry({
      windowMs: parseDuration(flags.retryFor ?? "10s"),
      ctrlUrl: baseUrl,
      progress: (line) => process.stderr.write(`${line}\n`),
    });
    this.transport = nodeTransport({
      baseUrl,
      token,
      interceptors: [idempotencyKeys(), retry, build, ...(signedIn ? [signedIn] : [])],
    });
  }

  /** The page size lists are read with: ctrl's maximum, so few round trips. */
  readonly pageSize = 1000;

  /**
   * Every item of a paginated list, as one answer: calls `fetch` with each next_page_token (and
   * the page size) until ctrl answers the last page, and concatenates the pages' `field`.
   */
  async allPages<F extends string, R extends { nextPageToken: string } & { [K in F]: unknown[] }>(
    field: F,
    fetch: (page: { pageToken: string; pageSize: number }) => Promise<R>,
  ): Promise<R> {
    const first = await fetch({ pageToken: "", pageSize: this.pageSize });
    const seen = new Set<string>();
    let token = first.nextPageToken;
    while (token !== "") {
      if (seen.has(token)) throw new Error("ctrl answered the same page token twice: stopping instead of looping");
      seen.add(token);
      const next = await fetch({ pageToken: token, pageSize: this.pageSize });
      first[field].push(...next[field]);
      token = next.nextPageToken;
    }
    first.nextPageToken = "";
    return first;
  }

  client<S extends DescService>(service: S): Client<S> {
    return createClient(service, this.transport);
  }

  get json(): boolean {
    return this.flags.output === "json";
  }

  /**
   * The --workspace given, or the only workspace there is — for a workspace token always its own
   * (ctrl lists no other to it).
   */
  async workspace(): Promise<string> {
    if (this.flags.workspace) return this.flags.workspace;
    const { workspaces } = await this.client(api.WorkspaceService).listWorkspaces({ pageSize: 2 });
    return only(workspaces);
  }
}

/**
 * A command's bearer token (cli-config.ts): a sign-in session's is refreshed before it ends, and
 * once more when ctrl refuses it (a clock ahead of ctrl's; streams are not repeated).
 */
function bearerOf(flag: string | undefined, ctrlUrl: string): { token: () => Promise<string>; signedIn?: Interceptor } {
  const { token, refresh } = commandBearer(flag, ctrlUrl);
  if (!refresh) return { token };
  const signedIn: Interceptor = (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      if (req.stream || !(err instanceof ConnectError) || err.code !== Code.Unauthenticated) throw err;
      await refresh();
      return next(req);
    }
  };
  return { token, signedIn };
}

/** Connects, runs a command body, and turns ctrl errors into "code: message" with exit code 1. */
export async function runUserCommand(flags: ConnectionFlags, body: (ctx: UserContext) => Promise<void>): Promise<void> {
  await run(async () => {
    const ctrl = new Ctrl(flags);
    await body({
      ctrl,
      api,
      rollout,
      exposure,
      access,
      json: ctrl.json,
      toJson,
      view,
      printJson,
      printTable,
      isNotFound,
    });
  });
}

/** Runs a command body, turning ctrl errors into "code: message" with exit code 1 (EXIT_UNAVAILABLE in an outage). */
export async function run(body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (err) {
    if (err instanceof ConnectError) {
      // Not ctrl's answer but this process's own failure (no token, a session over), which
      // Connect wraps as unknown: said as it is.
      if (err.code === Code.Unknown && err.cause instanceof Error && !(err.cause instanceof ConnectError))
        throw err.cause;
      if (isOutage(err)) process.exitCode = EXIT_UNAVAILABLE;
      throw new Error(`${codeName(err.code)}: ${err.rawMessage}`);
    }
    throw err;
  }
}

function isNotFound(err: unknown): boolean {
  return err instanceof ConnectError && err.code === Code.NotFound;
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
