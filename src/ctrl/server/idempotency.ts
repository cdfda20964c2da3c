// Idempotency keys for the public API: a call with an `Idempotency-Key` header that changes
// something is applied once; a repeat (a client retrying after a lost answer) gets the first
// answer again. Keys are scoped by caller (the user token) and method, remembered for a bounded
// time (24 h by default, pruned with the outbox), and a different request under a remembered key
// is invalid_argument. Reads are untouched: nothing is recorded unless the call writes.
//
// How it cannot lie after a crash: the key is claimed inside the call's own first write
// transaction (a write hook, ../db/write-hook.ts), so the claim commits exactly when the change
// does. A repeat finds the claim when its own first write tries to claim the same key (ON
// CONFLICT DO NOTHING: PostgreSQL makes it wait for a concurrent first attempt to finish) — or,
// for a call that fails before writing on a repeat (a delete of something already deleted), when
// the interceptor looks the key up after the failure. The answer is recorded right after the
// handler returns, encrypted under a key derived from the caller's bearer token (which ctrl never
// stores), so an answer holding a secret (a new token) is worthless to a database reader.
//
// A claim without an answer means the change was applied but the answer is not known: the first
// attempt is still running (in this process: the repeat waits for it; in another: the repeat
// polls for a moment), or it ended without one (a crash between commit and answer, or a failure
// after the commit). No answer was sent then either (the answer is recorded before it is sent),
// so the repeat's answer is the first one the client gets: where the method has a way to answer
// from the state the change left (`Reanswers`: the object it created or changed, read back; a new
// revision's id is kept with the claim, in the change's transaction), the repeat is answered so,
// and that answer is recorded for later repeats. Methods whose answer cannot be rebuilt (a new
// token's secret is never stored) answer already_exists saying so. Never a second application.
import { createHash, createHmac, randomUUID } from "node:crypto";
import { openGcm, sealGcm } from "../../base/seal.js";
import { fromBinary, toBinary, type DescMessage, type DescService } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextKey,
  type HandlerContext,
  type Interceptor,
  type ServiceImpl,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import { IDEMPOTENCY_KEY_HEADER, IDEMPOTENCY_REPLAYED_HEADER } from "../../contracts/headers.js";
import { callerSecretKey, principalKey } from "../auth/principal.js";
import type { WriteTx } from "../db/outbox.js";
import type { Store } from "../db/store.js";
import { withWriteHook, type WriteHook } from "../db/write-hook.js";
import {
  claimKey,
  findKey,
  recordAnswer,
  setKeySubject,
  type KeyId,
  type KeyRecord,
} from "../domain/idempotency-keys.js";
import type { BackoffPolicy } from "../../retry/backoff.js";
import { retry } from "../../retry/retry.js";

export { pruneIdempotencyKeys, type KeyId } from "../domain/idempotency-keys.js";

/** How long a key is remembered by default. */
export const DEFAULT_IDEMPOTENCY_RETENTION_MS = 24 * 60 * 60 * 1000;
/**
 * How often a repeat looks again for the answer of a first attempt still running in another ctrl
 * process (src/retry's backoff: soon at first, then every few hundred milliseconds). Looking is
 * cheaper than a notification here: the wait is bounded (IdempotencyOptions.waitMs) and rare (a
 * client retrying while its first call still runs elsewhere), and a notification would need a
 * LISTEN channel of its own on PostgreSQL and nothing on SQLite (one process: it waits in memory).
 */
export const ANSWER_POLL: BackoffPolicy = { baseMs: 50, capMs: 200, minMs: 25 };

/** A claim with no answer yet, whose first attempt may still be running elsewhere. */
class StillRunning extends Error {
  constructor() {
    super("the first attempt is still running");
  }
}

const KEY = /^[A-Za-z0-9._:-]{1,255}$/;

/** The header's value, checked: 1 to 255 characters of letters, digits and `-_.:`. */
export function parseIdempotencyKey(value: string): string {
  if (!KEY.test(value)) {
    throw new ConnectError(
      "Idempotency-Key header: must be 1 to 255 characters of letters, digits and -_.: (a UUID suits)",
      Code.InvalidArgument,
    );
  }
  return value;
}

/** SHA-256 of the encoded request: what "the same request" means. */
export function requestDigest(schema: DescMessage, message: Parameters<typeof toBinary>[1]): string {
  return createHash("sha256").update(toBinary(schema, message)).digest("hex");
}

function answerKey(secret: string, id: KeyId): Buffer {
  return createHmac("sha256", secret)
    .update(`krane idempotency v1\u0000${id.scope}\u0000${id.method}\u0000${id.key}`)
    .digest();
}

/** The answer as stored: AES-256-GCM under a key only the caller's bearer token gives. */
export function sealAnswer(secret: string, id: KeyId, plain: Uint8Array): Uint8Array {
  return sealGcm(answerKey(secret, id), plain);
}

/** The stored answer's bytes, or undefined when this secret cannot open it. */
export function openAnswer(secret: string, id: KeyId, sealed: Uint8Array): Uint8Array | undefined {
  return openGcm(answerKey(secret, id), sealed);
}

/** The answer a repeat gets, handed to the method by replayable() instead of running it. */
const replayKey = createContextKey<object | undefined>(undefined);
/** Set when a repeat is to be answered from the state the applied change left (its subject). */
const reanswerKey = createContextKey<{ subject: string | null } | undefined>(undefined);

/**
 * How a method answers a repeat whose first answer was lost, from the state the change left:
 * usually the object it created or changed, read back. `subject` is what the call created, when
 * its domain write said (a new revision's id).
 */
export type Reanswers<S extends DescService> = Partial<{
  [K in keyof ServiceImpl<S>]: (
    req: Parameters<ServiceImpl<S>[K]>[0],
    ctx: HandlerContext,
    subject: string | null,
  ) => Promise<object>;
}>;

/**
 * A method without a Reanswers entry was asked to answer from state, or its entry cannot (thrown
 * by the entry): the repeat answers already_exists saying the change was applied.
 */
export class NoReanswerError extends Error {
  constructor() {
    super("this method cannot answer from state");
  }
}

/**
 * Wraps a service implementation so that a repeat the interceptor answers gets the recorded
 * answer from "the method" itself: the protocol then writes it exactly as it writes any answer
 * (content type, compression), with the header `Idempotency-Replayed: true`. Register every
 * public service through it (server.ts does, for all of them at once), with the service's
 * Reanswers where it has them.
 */
export function replayable<S extends DescService, T extends Partial<ServiceImpl<S>>>(impl: T, again?: Reanswers<S>): T {
  const out: Record<string, unknown> = {};
  const rebuild = (again ?? {}) as Record<
    string,
    ((req: unknown, ctx: HandlerContext, subject: string | null) => Promise<object>) | undefined
  >;
  for (const [name, method] of Object.entries(impl)) {
    if (typeof method !== "function") {
      out[name] = method;
      continue;
    }
    out[name] = (req: unknown, ctx: HandlerContext): unknown => {
      const recorded = ctx.values.get(replayKey);
      const fromState = ctx.values.get(reanswerKey);
      if (recorded === undefined && fromState === undefined)
        return (method as (r: unknown, c: HandlerContext) => unknown).call(impl, req, ctx);
      ctx.responseHeader.set(IDEMPOTENCY_REPLAYED_HEADER, "true");
      if (recorded !== undefined) return recorded;
      const fn = rebuild[name];
      if (fn === undefined || fromState === undefined) throw new NoReanswerError();
      return fn.call(again, req, ctx, fromState.subject);
    };
  }
  return out as T;
}

/** Refuses every write: an answer rebuilt from state must not change anything. */
const READ_ONLY: WriteHook = {
  begin() {
    return Promise.reject(new Error("an answer rebuilt from state tried to write"));
  },
  committed() {},
};

/** Thrown inside a write transaction whose key another attempt already claimed: the transaction rolls back. */
class KeyTakenError extends Error {
  constructor() {
    super("idempotency key already claimed");
  }
}

export interface IdempotencyOptions {
  readonly store: Store;
  /** How long a repeat polls for the answer of a first attempt running elsewhere (default 2 s). */
  readonly waitMs?: number;
  readonly now?: () => number;
  /** Told when recording an answer failed (the call still answers; a repeat then learns the answer was lost). */
  readonly onRecordFailure?: (err: unknown) => void;
}

/**
 * The interceptor: put it after authentication (it keys by the caller). Unary public API calls
 * with a user principal and the header take part; everything else passes through.
 */
export function idempotencyInterceptor(opts: IdempotencyOptions): Interceptor {
  const { store } = opts;
  const now = opts.now ?? store.clock;
  /** This process, as recorded in the claims it makes. */
  const owner = randomUUID();
  /** First attempts running in this process, by key: settled once the attempt recorded its answer. */
  const running = new Map<string, Promise<void>>();

  type Next = (req: UnaryRequest) => Promise<UnaryResponse>;
  /** Answers through the method, which hands back the recorded answer (replayable()). */
  const replay = (
    next: Next,
    req: UnaryRequest,
    id: KeyId,
    secret: string,
    sealed: Uint8Array,
  ): Promise<UnaryResponse> => {
    const plain = openAnswer(secret, id, sealed);
    if (!plain)
      throw new ConnectError(
        "Idempotency-Key: the recorded answer cannot be read with this token",
        Code.FailedPrecondition,
      );
    req.contextValues.set(replayKey, fromBinary(req.method.output, plain));
    return next(req);
  };

  /**
   * The repeat of an applied call whose answer was lost, answered from the state the change left
   * (replayable() runs the method's Reanswers entry); the answer is recorded for later repeats.
   * Undefined when the method has no such entry.
   */
  const answerFromState = async (
    next: Next,
    req: UnaryRequest,
    id: KeyId,
    secret: string,
    subject: string | null,
  ): Promise<UnaryResponse | undefined> => {
    req.contextValues.set(reanswerKey, { subject });
    let res: UnaryResponse;
    try {
      res = await withWriteHook(READ_ONLY, () => next(req));
    } catch (err) {
      if (err instanceof NoReanswerError) return undefined;
      throw err;
    } finally {
      req.contextValues.delete(reanswerKey);
    }
    if (!res.stream) {
      const sealed = sealAnswer(secret, id, toBinary(req.method.output, res.message));
      await recordAnswer(store.db, id, sealed, now()).catch((err: unknown) => opts.onRecordFailure?.(err));
    }
    return res;
  };

  /** What a repeat answers once the key is known to be claimed (undefined: no claim after all). */
  const answerRepeat = async (
    next: Next,
    req: UnaryRequest,
    id: KeyId,
    digest: string,
    secret: string,
  ): Promise<UnaryResponse | undefined> => {
    const deadline = Date.now() + (opts.waitMs ?? 2000);
    // Claimed with no answer yet: still running in another process (look again, until the
    // deadline), or ended without one.
    const rec = await retry(
      async (): Promise<KeyRecord | undefined> => {
        const r = await findKey(store.db, id);
        const pending = r !== undefined && r.digest === digest && r.answer === null && r.answeredAt === null;
        if (pending && r.owner !== owner && Date.now() < deadline) throw new StillRunning();
        return r;
      },
      { policy: ANSWER_POLL, retryable: (err) => err instanceof StillRunning },
    );
    if (!rec) return undefined;
    if (rec.digest !== digest) {
      throw new ConnectError(
        `Idempotency-Key "${id.key}" was used for a different ${req.method.name} request: use a new key for a new request`,
        Code.InvalidArgument,
      );
    }
    if (rec.answer !== null) return replay(next, req, id, secret, rec.answer);
    const rebuilt = await answerFromState(next, req, id, secret, rec.subject);
    if (rebuilt) return rebuilt;
    throw new ConnectError(
      `the ${req.method.name} request with Idempotency-Key "${id.key}" was applied at ${new Date(rec.createdAt).toISOString()}, but its answer was lost (the call ended without one); it is not applied again: read the current state instead`,
      Code.AlreadyExists,
    );
  };

  return (next) => async (req) => {
    if (req.stream) return next(req);
    const header = req.header.get(IDEMPOTENCY_KEY_HEADER);
    const principal = req.contextValues.get(principalKey);
    if (header === null || principal?.kind !== "user") return next(req);
    const id: KeyId = {
      scope: `user:${principal.tokenId}`,
      method: `${req.service.name}/${req.method.name}`,
      key: parseIdempotencyKey(header),
    };
    const digest = requestDigest(req.method.input, req.message);
    // The bearer token, or the dashboard session's id (an answer sealed under "" would open for anyone).
    const secret = req.contextValues.get(callerSecretKey) || (req.header.get("authorization") ?? "");
    const local = `${id.scope}\u0000${id.method}\u0000${id.key}`;

    // A first attempt still running here: wait for it (answer recorded), then answer as a repeat.
    for (let earlier = running.get(local); earlier; earlier = running.get(local)) await earlier;

    let claimed: WriteTx | "committed" | undefined;
    let closed = false;
    const hook: WriteHook = {
      async begin(tx) {
        if (claimed === "committed" || closed) return;
        if (!(await claimKey(tx, id, { digest, createdAt: now(), owner }))) throw new KeyTakenError();
        claimed = tx;
      },
      committed(tx) {
        if (claimed === tx) claimed = "committed";
      },
      async subject(tx, subject) {
        if (claimed === undefined || closed) return;
        await setKeySubject(tx, id, subject);
      },
    };
    let done = (): void => undefined;
    const finished = new Promise<void>((r) => (done = r));
    running.set(local, finished);
    try {
      const res = await withWriteHook(hook, () => next(req));
      closed = true;
      if (claimed === "committed" && !res.stream) {
        const sealed = sealAnswer(secret, id, toBinary(req.method.output, res.message));
        await recordAnswer(store.db, id, sealed, now()).catch((err: unknown) => opts.onRecordFailure?.(err));
      }
      return res;
    } catch (err) {
      closed = true;
      if (claimed === "committed") {
        // Applied, but no answer to keep: a repeat is told so.
        await recordAnswer(store.db, id, null, now()).catch((e: unknown) => opts.onRecordFailure?.(e));
        throw err;
      }
      // A repeat whose own attempt found the key taken, or failed before writing (say, a delete
      // of what the first attempt deleted): the first answer, if there was a first attempt.
      let repeat: UnaryResponse | undefined;
      try {
        repeat = await answerRepeat(next as Next, req, id, digest, secret);
      } catch (lookup) {
        if (lookup instanceof ConnectError) throw lookup;
        throw err instanceof KeyTakenError ? lookup : err;
      }
      if (repeat) return repeat;
      if (err instanceof KeyTakenError)
        throw new ConnectError(
          "a concurrent request with this Idempotency-Key did not finish; try again",
          Code.Aborted,
        );
      throw err;
    } finally {
      if (running.get(local) === finished) running.delete(local);
      done();
    }
  };
}
