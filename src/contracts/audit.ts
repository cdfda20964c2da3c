// The audit log's record, its hash chain and the chain's verification: what ctrl writes and what
// `krane audit verify` (or anyone holding an export) checks, so both sides hash exactly the same
// bytes. Pure.
//
// Each workspace has its own chain, and the installation one more (workspace "", for calls that
// belong to no workspace: regions, cluster tokens, installation API tokens, and refused calls of
// callers without a valid token). Events of a chain are numbered 1, 2, 3 … (`seq`, dense); each event's hash is
// SHA-256 over its own fields and the previous event's hash, so editing an event breaks its own
// hash, deleting one leaves a gap in the numbers, and moving one breaks its link to the event
// before it. The chain's head (last number and hash) is kept apart, so the newest events cannot be
// cut off unseen either. Retention removes the oldest events of a chain; the hash of the last one
// removed stays with the head as the anchor the first remaining event links to.
//
// What a chain cannot stop is someone who can rewrite the whole database and recompute every hash
// after their edit: a copy of the heads (the webhook sink, an export) kept elsewhere can.
import { createHash } from "node:crypto";

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/**
 * One field of what an accepted change changed. `set`: before and after; `added` / `removed`: the
 * one side there is. A sensitive field (a secret, a token) is only ever `changed`, `added` or
 * `removed`, with no value on either side.
 */
export interface AuditChange {
  field: string;
  op: "set" | "added" | "removed" | "changed";
  before?: JsonValue;
  after?: JsonValue;
}

export type ActorKind = "user" | "agent" | "anonymous" | "webhook" | "system";

export interface AuditRecord {
  id: string;
  /** "" for the installation's chain. */
  workspaceId: string;
  seq: number;
  /** Unix milliseconds. */
  at: number;
  actorKind: ActorKind;
  /** The token id (user), cluster id (agent), hook id (webhook); "" when anonymous. Never a token. */
  actorId: string;
  actorName: string;
  /** "Service/Method" of the call, or what did the change ("PreviewWebhook/github", "system/…"). */
  method: string;
  /** Ids of what the call was about, most specific last. */
  targets: string[];
  requestId: string;
  clientIp: string;
  userAgent: string;
  idempotencyKey: string;
  /** "ok", or the error code the call was refused with ("unauthenticated", "invalid_argument", …). */
  code: string;
  /** Why a call was refused (its error message); "" when accepted. */
  message: string;
  changes: AuditChange[];
  prevHash: string;
  hash: string;
  /**
   * A user token's scope when it acted: "installation" or the workspace id it is bound to. Absent
   * for other actors and for events recorded before tokens had scopes (their bytes unchanged).
   */
  actorScope?: string;
  /**
   * Who owns the workspace token that acted ("service account ci", "member ana@example.com").
   * Absent for other actors and for events recorded before roles (their bytes unchanged).
   */
  actorOwner?: string;
}

/** The hash an installation's or workspace's first event links to. */
export const GENESIS_HASH = "0".repeat(64);

/**
 * The bytes hashed: every field but the hash, in a fixed order, as JSON. The actor's scope and
 * then its owner come last and only when there is one, so events recorded before scopes (or
 * roles) existed hash as they did.
 */
export function canonicalAuditBytes(r: Omit<AuditRecord, "hash">): string {
  const fields: unknown[] = [
    "krane.audit.v1",
    r.id,
    r.workspaceId,
    r.seq,
    r.at,
    r.actorKind,
    r.actorId,
    r.actorName,
    r.method,
    r.targets,
    r.requestId,
    r.clientIp,
    r.userAgent,
    r.idempotencyKey,
    r.code,
    r.message,
    r.changes,
    r.prevHash,
  ];
  if (r.actorScope !== undefined) fields.push({ actorScope: r.actorScope });
  if (r.actorOwner !== undefined) fields.push({ actorOwner: r.actorOwner });
  return JSON.stringify(fields);
}

export function auditHash(r: Omit<AuditRecord, "hash">): string {
  return createHash("sha256").update(canonicalAuditBytes(r)).digest("hex");
}

/** The head of one chain as ctrl keeps it. */
export interface ChainHead {
  workspaceId: string;
  /** The last event's number (0: none yet). */
  seq: number;
  /** The last event's hash (GENESIS_HASH: none yet). */
  hash: string;
  /** Events up to this number were removed by retention (0: none). */
  prunedThroughSeq: number;
  /** The hash of the last event removed by retention (GENESIS_HASH: none). */
  prunedThroughHash: string;
}

/** A problem verification found, naming the event it is about. */
export interface ChainProblem {
  /** The event's id ("" when the problem is a missing event). */
  eventId: string;
  seq: number;
  problem: string;
}

function label(r: Pick<AuditRecord, "id" | "seq">): string {
  return `${r.id} (#${r.seq})`;
}

/**
 * Checks one chain's events, given oldest first one at a time (constant memory: only the last
 * event is kept), against the head. `finish` reports what only the end can tell (events cut off
 * after the last one seen).
 */
export class ChainVerifier {
  readonly problems: ChainProblem[] = [];
  #previous: { id: string; seq: number; hash: string } | undefined;
  #count = 0;

  constructor(
    readonly head: ChainHead,
    /** Verify only this range of the chain (a filtered export): links are checked within it. */
    private readonly partial = false,
  ) {}

  get checked(): number {
    return this.#count;
  }

  add(r: AuditRecord): void {
    this.#count++;
    if (r.workspaceId !== this.head.workspaceId)
      this.problems.push({ eventId: r.id, seq: r.seq, problem: `belongs to another chain ("${r.workspaceId}")` });
    if (auditHash(r) !== r.hash)
      this.problems.push({
        eventId: r.id,
        seq: r.seq,
        problem: `event ${label(r)} does not match its hash: it was edited (or its number changed)`,
      });
    const prev = this.#previous;
    if (prev === undefined) {
      if (!this.partial) {
        const firstSeq = this.head.prunedThroughSeq + 1;
        const anchor = this.head.prunedThroughSeq === 0 ? GENESIS_HASH : this.head.prunedThroughHash;
        if (r.seq > firstSeq)
          this.problems.push({
            eventId: "",
            seq: firstSeq,
            problem: `events #${firstSeq}–#${r.seq - 1} are missing before ${label(r)}: deleted`,
          });
        else if (r.seq === firstSeq && r.prevHash !== anchor)
          this.problems.push({
            eventId: r.id,
            seq: r.seq,
            problem: `event ${label(r)} does not link to the start of the chain: events before it were replaced or reordered`,
          });
        else if (r.seq < firstSeq)
          this.problems.push({
            eventId: r.id,
            seq: r.seq,
            problem: `event ${label(r)} is numbered before the chain's start (#${firstSeq}): it was moved or re-inserted`,
          });
      }
    } else if (r.seq !== prev.seq + 1) {
      if (r.seq <= prev.seq)
        this.problems.push({
          eventId: r.id,
          seq: r.seq,
          problem: `event ${label(r)} comes after ${label(prev)}: out of order (reordered, or a number was reused)`,
        });
      else
        this.problems.push({
          eventId: "",
          seq: prev.seq + 1,
          problem: `${r.seq - prev.seq - 1 === 1 ? `event #${prev.seq + 1} is` : `events #${prev.seq + 1}–#${r.seq - 1} are`} missing between ${label(prev)} and ${label(r)}: deleted`,
        });
    } else if (r.prevHash !== prev.hash) {
      this.problems.push({
        eventId: r.id,
        seq: r.seq,
        problem: `event ${label(r)} does not link to ${label(prev)}: the events were reordered, or one was replaced`,
      });
    }
    this.#previous = { id: r.id, seq: r.seq, hash: r.hash };
  }

  /** Call once every event was given. */
  finish(): ChainProblem[] {
    if (!this.partial) {
      const last = this.#previous;
      const lastSeq = last?.seq ?? this.head.prunedThroughSeq;
      if (lastSeq < this.head.seq)
        this.problems.push({
          eventId: "",
          seq: lastSeq + 1,
          problem: `events #${lastSeq + 1}–#${this.head.seq} are missing at the end of the chain (the head is #${this.head.seq}): deleted`,
        });
      else if (last !== undefined && last.seq === this.head.seq && last.hash !== this.head.hash)
        this.problems.push({
          eventId: last.id,
          seq: last.seq,
          problem: `event ${label(last)} is not the event the chain's head names: the newest event was replaced`,
        });
      else if (last !== undefined && last.seq > this.head.seq)
        this.problems.push({
          eventId: last.id,
          seq: last.seq,
          problem: `event ${label(last)} lies beyond the chain's head (#${this.head.seq}): it was inserted`,
        });
    }
    return this.problems;
  }
}

/** An event as one line of the NDJSON export (snake_case, like the API's JSON). */
export function auditRecordToJson(r: AuditRecord): Record<string, JsonValue> {
  return {
    id: r.id,
    workspace_id: r.workspaceId,
    seq: r.seq,
    at: new Date(r.at).toISOString(),
    at_unix_ms: r.at,
    // The scope is part of what the hash covers: without it no event a token made verifies.
    actor: {
      kind: r.actorKind,
      id: r.actorId,
      name: r.actorName,
      ...(r.actorScope === undefined ? {} : { scope: r.actorScope }),
      ...(r.actorOwner === undefined ? {} : { owner: r.actorOwner }),
    },
    method: r.method,
    targets: r.targets,
    request_id: r.requestId,
    client_ip: r.clientIp,
    user_agent: r.userAgent,
    idempotency_key: r.idempotencyKey,
    code: r.code,
    message: r.message,
    changes: r.changes as unknown as JsonValue,
    prev_hash: r.prevHash,
    hash: r.hash,
  };
}

const ACTOR_KINDS: readonly string[] = ["user", "agent", "anonymous", "webhook", "system"];

/** One NDJSON export line back into a record (for verifying a file); throws naming what is wrong. */
export function auditRecordFromJson(v: unknown): AuditRecord {
  if (typeof v !== "object" || v === null) throw new Error("not a JSON object");
  const o = v as Record<string, unknown>;
  const str = (k: string, x: unknown = o[k]): string => {
    if (typeof x !== "string") throw new Error(`${k}: expected a string`);
    return x;
  };
  const num = (k: string): number => {
    const x = o[k];
    if (typeof x !== "number" || !Number.isSafeInteger(x)) throw new Error(`${k}: expected an integer`);
    return x;
  };
  const actor = o.actor as Record<string, unknown> | undefined;
  if (typeof actor !== "object" || actor === null) throw new Error("actor: expected an object");
  const kind = str("actor.kind", actor.kind);
  if (!ACTOR_KINDS.includes(kind)) throw new Error(`actor.kind: unknown kind "${kind}"`);
  // Absent (or empty, as the API spells none): an event without a scope (not a user's, or older).
  const scope = actor.scope === undefined ? "" : str("actor.scope", actor.scope);
  const owner = actor.owner === undefined ? "" : str("actor.owner", actor.owner);
  if (!Array.isArray(o.targets) || !o.targets.every((t) => typeof t === "string"))
    throw new Error("targets: expected a list of strings");
  if (!Array.isArray(o.changes)) throw new Error("changes: expected a list");
  return {
    id: str("id"),
    workspaceId: str("workspace_id"),
    seq: num("seq"),
    at: num("at_unix_ms"),
    actorKind: kind as ActorKind,
    actorId: str("actor.id", actor.id),
    actorName: str("actor.name", actor.name),
    method: str("method"),
    targets: o.targets as string[],
    requestId: str("request_id"),
    clientIp: str("client_ip"),
    userAgent: str("user_agent"),
    idempotencyKey: str("idempotency_key"),
    code: str("code"),
    message: str("message"),
    changes: o.changes as AuditChange[],
    prevHash: str("prev_hash"),
    hash: str("hash"),
    ...(scope === "" ? {} : { actorScope: scope }),
    ...(owner === "" ? {} : { actorOwner: owner }),
  };
}
