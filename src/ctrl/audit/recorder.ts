// Recording the audit log: an event for every call that changes state and for every refused call.
//
// Accepted changes: the call runs with a write hook (../db/write-hook.ts) that joins each write
// transaction of the call. At the start of the transaction it reads the view of what the call is
// about (./views.ts), at the end it reads it again, and the event — who, what, from where, the
// field-level diff — is appended to the chain in that same transaction (../domain/audit.ts). So an
// acknowledged change always has its event, and a change rolled back (a crash, a kill -9, a
// refused precondition) has none. A call that changed nothing in a transaction of its own (a
// write that found nothing to do) still gets its event, with no changes; a repeat answered from
// an Idempotency-Key's recorded answer is not a new call and gets none.
//
// Refused calls (unauthenticated, permission denied, invalid, and any failed call that would have
// changed state): an event of its own, written after the refusal with the error's code and
// message. A caller with a valid token is recorded in the chain of the workspace the request
// names (when it exists); a caller without one in the installation's chain, never in a
// workspace's: the workspace a request names is only a claim of someone not known, and letting
// anyone on the network append to a tenant's log would be a way to bury real events in noise. Such
// refusals are folded past a rate (./limiter.ts). Reads that succeed are not recorded.
//
// Agents' calls (ClusterService, LogChannelService) report what runs; they are recorded only when refused (a wrong
// or revoked agent token, another region's objects, an invalid report). Tokens themselves never
// reach an event: the actor is the token's id and name.
import { Code, ConnectError, createContextKey, type Interceptor, type StreamResponse } from "@connectrpc/connect";
import type { ActorKind, AuditChange } from "../../contracts/audit.js";
import { IDEMPOTENCY_KEY_HEADER, IDEMPOTENCY_REPLAYED_HEADER, REQUEST_ID_HEADER } from "../../contracts/headers.js";
import { isAgentMethod, isRead } from "../auth/policy.js";
import { principalKey, scopeRefusalKey, type Principal } from "../auth/principal.js";
import type { WriteTx } from "../db/outbox.js";
import type { Store } from "../db/store.js";
import { withWriteHook, type WriteHook } from "../db/write-hook.js";
import { appendAuditEvent, INSTALLATION_CHAIN, recordAuditEvent, type AuditDraft } from "../domain/audit.js";
import { randomChars } from "../domain/ids.js";
import { diffViews } from "./diff.js";
import { RefusalLimiter, type LimiterOptions } from "./limiter.js";
import { subjectReader, workspaceIdOf, type AuditSubject, type RequestFields, type SubjectReader } from "./views.js";

/** The peer address of the connection a call came on (set by the server's RPC handler). */
export const CLIENT_ADDRESS = createContextKey("", { description: "krane: the client's address" });

const PLAIN = /^[A-Za-z0-9._:-]{1,128}$/;

/** A client's own request id when it is short and plain, else a new one. */
export function requestIdFrom(header: string | null): string {
  return header !== null && PLAIN.test(header) ? header : `req_${randomChars(20)}`;
}

/** A header as recorded: printable, bounded (a hostile client picks what it sends). */
function printable(v: string | null, max: number): string {
  if (v === null) return "";
  const s = v.replace(/[^\x20-\x7e]/g, "?");
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

export interface Actor {
  kind: ActorKind;
  id: string;
  name: string;
  /** A user token's scope: "installation" or its workspace's id. */
  scope?: string;
  /** A workspace token's owner ("service account ci", "member ana@example.com"). */
  owner?: string;
}

export function actorOf(p: Principal | undefined): Actor {
  if (p?.kind === "user") {
    const actor: Actor = {
      kind: "user",
      id: p.tokenId,
      name: p.name,
      scope: p.workspace === null ? "installation" : p.workspace.id,
    };
    if (p.serviceAccount) actor.owner = `service account ${p.serviceAccount.name}`;
    else if (p.member)
      actor.owner = `member ${p.member.email}${p.member.subject === "" ? "" : ` (${p.member.subject})`}`;
    return actor;
  }
  if (p?.kind === "agent") return { kind: "agent", id: p.clusterId, name: `agent of region ${p.region}` };
  return { kind: "anonymous", id: "", name: "" };
}

/** Who did something, how and from where: the parts of an event that are not about its change. */
export interface CallInfo {
  method: string;
  requestId: string;
  clientIp: string;
  userAgent: string;
  idempotencyKey: string;
  /** Asked when the event is written (authentication runs after the call starts). */
  actor(): Actor;
}

/** Reads what a piece of work is about in `db` (./views.ts). */
export type SubjectOf = (
  db: WriteTx["trx"] | Store["db"],
  created: string | undefined,
) => Promise<AuditSubject | undefined>;

function draft(
  info: CallInfo,
  subject: { workspaceId: string; targets: string[] },
): Omit<AuditDraft, "code" | "message" | "changes"> {
  const actor = info.actor();
  return {
    workspaceId: subject.workspaceId,
    actorKind: actor.kind,
    actorId: actor.id,
    actorName: actor.name,
    ...(actor.scope === undefined ? {} : { actorScope: actor.scope }),
    ...(actor.owner === undefined ? {} : { actorOwner: actor.owner }),
    method: info.method,
    targets: subject.targets,
    requestId: info.requestId,
    clientIp: info.clientIp,
    userAgent: info.userAgent,
    idempotencyKey: info.idempotencyKey,
  };
}

/**
 * One piece of work whose write transactions are audited: run `fn` through `run`, and each
 * transaction it commits carries one event with its diff.
 */
export class AuditedWork implements WriteHook {
  #closed = false;
  #commits = 0;
  #created: string | undefined;
  readonly #pending = new Map<WriteTx, { before: AuditSubject | undefined; created?: string }>();

  constructor(
    private readonly info: CallInfo,
    private readonly subjectOf: SubjectOf,
    /** The chain when the work's subject cannot be read (a method without a view). */
    private readonly fallbackWorkspace: (db: Store["db"]) => Promise<string | undefined>,
  ) {}

  /** Transactions committed with their event. */
  get commits(): number {
    return this.#commits;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await withWriteHook(this, fn);
    } finally {
      this.#closed = true;
    }
  }

  async begin(tx: WriteTx): Promise<void> {
    if (this.#closed) return;
    this.#pending.set(tx, { before: await this.subjectOf(tx.trx, this.#created) });
  }

  async subject(tx: WriteTx, id: string): Promise<void> {
    const p = this.#pending.get(tx);
    if (p) p.created = id;
  }

  async beforeCommit(tx: WriteTx): Promise<void> {
    const p = this.#pending.get(tx);
    if (this.#closed || !p) return;
    const created = p.created ?? this.#created;
    const after = await this.subjectOf(tx.trx, created);
    // What the call was about names the chain and targets: as it is after the change, or as it
    // was before when the change removed it (a revoked token's workspace is only known before).
    const about = after?.view ? after : (p.before ?? after);
    const changes = diffViews(p.before?.view ?? null, after?.view ?? null);
    const workspaceId = about?.workspaceId ?? (await this.fallbackWorkspace(tx.trx)) ?? INSTALLATION_CHAIN;
    const targets = [...(about?.targets ?? [])];
    if (created !== undefined && !targets.includes(created)) targets.push(created);
    await appendAuditEvent(tx, { ...draft(this.info, { workspaceId, targets }), code: "ok", message: "", changes });
  }

  committed(tx: WriteTx): void {
    const p = this.#pending.get(tx);
    if (!p) return;
    this.#pending.delete(tx);
    this.#commits++;
    if (p.created !== undefined) this.#created = p.created;
  }
}

/** Connect's code as the log spells it ("invalid_argument"). */
export function codeName(code: Code): string {
  return Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
}

/** Refusals recorded for every call, reads and agents' included. */
const ALWAYS_RECORDED = new Set([Code.Unauthenticated, Code.PermissionDenied, Code.InvalidArgument]);

export interface AuditRecorderOptions {
  readonly store: Store;
  /** Told when an event could not be written (the call's answer stands; the log is warned). */
  readonly onFailure: (err: unknown, method: string) => void;
  /** Folding of refusals without a valid token (default 20/s, burst 100 per address; 200/s, 1,000 in all). */
  readonly limits?: LimiterOptions;
  readonly now?: () => number;
}

export const DEFAULT_REFUSAL_LIMITS: LimiterOptions = {
  perSecond: 20,
  burst: 100,
  total: { perSecond: 200, burst: 1000 },
};

/** The audit side of ctrl's RPC: an interceptor, and the flush of folded refusals for the upkeep. */
export class AuditRecorder {
  readonly #limiter: RefusalLimiter;
  readonly #now: () => number;

  constructor(private readonly o: AuditRecorderOptions) {
    this.#limiter = new RefusalLimiter(o.limits ?? DEFAULT_REFUSAL_LIMITS);
    this.#now = o.now ?? Date.now;
  }

  /** Put it first: it sees every call's final error, authentication's included. */
  interceptor(): Interceptor {
    return (next) => async (req) => {
      const principal = (): Principal | undefined => req.contextValues.get(principalKey);
      const requestId = requestIdFrom(req.header.get(REQUEST_ID_HEADER));
      const key = req.header.get(IDEMPOTENCY_KEY_HEADER);
      const info: CallInfo = {
        method: `${req.service.name}/${req.method.name}`,
        requestId,
        clientIp: req.contextValues.get(CLIENT_ADDRESS),
        userAgent: printable(req.header.get("user-agent"), 512),
        idempotencyKey: key === null ? "" : /^[A-Za-z0-9._:-]{1,255}$/.test(key) ? key : "(invalid)",
        actor: () => actorOf(principal()),
      };
      const message = (): RequestFields => (req.stream ? {} : (req.message as RequestFields));
      const forAgents = isAgentMethod(req.method);
      const subject = subjectReader(req.method);
      const changes = !forAgents && !isRead(req.method) && !req.stream;
      const refused = async (err: unknown, applied: boolean): Promise<never> => {
        const ce = ConnectError.from(err);
        ce.metadata.set(REQUEST_ID_HEADER, requestId);
        const outsideScope = req.contextValues.get(scopeRefusalKey);
        if (changes || outsideScope || ALWAYS_RECORDED.has(ce.code))
          await this.#refusal(info, ce, applied, changes ? message() : undefined, principal(), subject, outsideScope);
        throw ce;
      };
      if (!changes) {
        let res;
        try {
          res = await next(req);
        } catch (err) {
          return refused(err, false);
        }
        res.header.set(REQUEST_ID_HEADER, requestId);
        // Agents' watch streams are left alone (their messages bypass Connect's pipeline, and a
        // refusal of theirs happens before the stream starts, above).
        if (!res.stream || forAgents) return res;
        return { ...res, message: this.#watch(res, refused) } as StreamResponse;
      }
      const work = new AuditedWork(
        info,
        (db, created) => (subject ? subject(db, message(), created) : Promise.resolve(undefined)),
        (db) => workspaceIdOf(db, message()),
      );
      let res;
      try {
        res = await work.run(() => next(req));
      } catch (err) {
        return refused(err, work.commits > 0);
      }
      res.header.set(REQUEST_ID_HEADER, requestId);
      // Accepted without a transaction of its own to carry the event (and not a repeat answered
      // from its key's record): the event is written now.
      if (work.commits === 0 && res.header.get(IDEMPOTENCY_REPLAYED_HEADER) !== "true") {
        await this.#record(info, async () => {
          const about = subject ? await subject(this.o.store.db, message(), undefined) : undefined;
          return {
            workspaceId: about?.workspaceId ?? (await workspaceIdOf(this.o.store.db, message())) ?? INSTALLATION_CHAIN,
            targets: about?.targets ?? [],
            code: "ok",
            message: "",
            changes: [],
          };
        });
      }
      return res;
    };
  }

  async *#watch<T>(
    res: StreamResponse,
    refused: (err: unknown, applied: boolean) => Promise<never>,
  ): AsyncGenerator<T> {
    try {
      for await (const m of res.message as AsyncIterable<T>) yield m;
    } catch (err) {
      await refused(err, false);
    }
  }

  async #refusal(
    info: CallInfo,
    err: ConnectError,
    applied: boolean,
    req: RequestFields | undefined,
    principal: Principal | undefined,
    subject: SubjectReader | undefined,
    outsideScope = false,
  ): Promise<void> {
    const anonymous = principal === undefined;
    // A workspace token's calls go to its own workspace's chain, refused ones too: what another
    // workspace's object it named is only its claim, and it may not write into another tenant's
    // log. The note is the same whether what it named exists or not (the token can read its chain).
    const bound = principal?.kind === "user" ? principal.workspace : null;
    let note = outsideScope ? " (refused: outside the token's workspace)" : "";
    if (anonymous) {
      const a = this.#limiter.admit(info.clientIp, this.#now());
      if (!a.record) return;
      if (a.folded > 0)
        note = ` (and ${a.folded} more refused calls without a valid token from this address since ${new Date(a.since).toISOString()})`;
    }
    await this.#record(info, async () => {
      const db = this.o.store.db;
      // Nothing of what it named outside its workspace is read: the event would show its ids.
      const about = !anonymous && !outsideScope && req ? await subject?.(db, req, undefined) : undefined;
      const workspaceId = anonymous
        ? INSTALLATION_CHAIN
        : bound !== null
          ? bound.id
          : (about?.workspaceId ?? (req ? await workspaceIdOf(db, req) : undefined) ?? INSTALLATION_CHAIN);
      return {
        workspaceId,
        targets: about?.targets ?? [],
        code: codeName(err.code),
        message: applied ? `applied, then failed: ${err.rawMessage}${note}` : `${err.rawMessage}${note}`,
        changes: [] as AuditChange[],
      };
    });
  }

  async #record(
    info: CallInfo,
    what: () => Promise<{
      workspaceId: string;
      targets: string[];
      code: string;
      message: string;
      changes: AuditChange[];
    }>,
  ): Promise<void> {
    try {
      const w = await what();
      await recordAuditEvent(this.o.store, { ...draft(info, w), code: w.code, message: w.message, changes: w.changes });
    } catch (err) {
      this.o.onFailure(err, info.method);
    }
  }

  /** Records the refusals folded since the last flush, one event per address (ctrl's upkeep). */
  async flushFolded(): Promise<number> {
    const drained = this.#limiter.drain();
    for (const d of drained) {
      await recordAuditEvent(this.o.store, {
        workspaceId: INSTALLATION_CHAIN,
        actorKind: "anonymous",
        actorId: "",
        actorName: "",
        method: "refusals/folded",
        targets: [],
        requestId: "",
        clientIp: d.address === "*" ? "(many addresses)" : d.address,
        userAgent: "",
        idempotencyKey: "",
        code: "unauthenticated",
        message: `${d.folded} refused calls without a valid token since ${new Date(d.since).toISOString()}, past the recording rate`,
        changes: [],
      });
    }
    return drained.length;
  }
}

/**
 * Runs work that is not an RPC (a pull-request webhook, ctrl's own expiry of a preview) with its
 * write transactions audited like a call's.
 */
export function auditedWork<T>(info: CallInfo, subjectOf: SubjectOf, fn: () => Promise<T>): Promise<T> {
  return new AuditedWork(info, subjectOf, () => Promise.resolve(undefined)).run(fn);
}

/** Records a refusal of work that is not an RPC (a webhook refused), in a transaction of its own. */
export async function recordRefused(
  store: Store,
  info: CallInfo,
  refusal: { workspaceId: string; targets: string[]; code: string; message: string },
): Promise<void> {
  await recordAuditEvent(store, { ...draft(info, refusal), code: refusal.code, message: refusal.message, changes: [] });
}
