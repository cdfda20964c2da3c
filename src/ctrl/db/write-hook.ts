// Work that must commit or roll back together with the writes of one piece of work higher up,
// without that work's code passing anything down: hooks bound to an async context (one API
// call) join every write transaction `Store.write` runs inside that context. The server's
// idempotency keys use one (../server/idempotency.ts): the key of a call is recorded in the same
// transaction as the change the call makes, so a crash can never keep one without the other.
// The audit log uses another (../audit/recorder.ts): the event of an accepted change is written
// in the change's own transaction. Hooks stack: a context inside another has the outer hooks and
// its own, run in the order they were added.
import { AsyncLocalStorage } from "node:async_hooks";
import type { WriteTx } from "./outbox.js";

export interface WriteHook {
  /** Runs first in each write transaction of the context; a throw rolls the transaction back. */
  begin(tx: WriteTx): Promise<void>;
  /** Runs last in each write transaction of the context, after the work; a throw rolls it back. */
  beforeCommit?(tx: WriteTx): Promise<void>;
  /** The transaction `tx` (one `begin` ran in) committed. */
  committed(tx: WriteTx): void;
  /** Records, inside `tx`, what the work created (noteWriteSubject). */
  subject?(tx: WriteTx, id: string): Promise<void>;
}

const current = new AsyncLocalStorage<readonly WriteHook[]>();

/** Runs `fn` with `hook` (after the hooks of the enclosing context) joining every write transaction started inside it. */
export function withWriteHook<T>(hook: WriteHook, fn: () => Promise<T>): Promise<T> {
  return current.run([...(current.getStore() ?? []), hook], fn);
}

/** The hooks of the current context, outermost first (Store.write). */
export function currentWriteHooks(): readonly WriteHook[] {
  return current.getStore() ?? [];
}

/**
 * Tells the hooks of the current context what this transaction creates (e.g. a new deployment's
 * id), inside the transaction: idempotency keys keep it so a repeat whose first answer was lost
 * can be answered from it; the audit log names it as the change's target.
 */
export async function noteWriteSubject(tx: WriteTx, id: string): Promise<void> {
  for (const hook of current.getStore() ?? []) await hook.subject?.(tx, id);
}

/**
 * Runs `fn` without the hooks of the current context: ctrl's own work that a call merely
 * triggered (finishing deletions, say) is not part of that call's change.
 */
export function detachedFromCaller<T>(fn: () => Promise<T>): Promise<T> {
  return current.run([], fn);
}
