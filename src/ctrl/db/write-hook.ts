// Work that must commit or roll back together with the writes of one piece of work higher up,
// without that work's code passing anything down: a hook bound to an async context (one API
// call) joins every write transaction `Store.write` runs inside that context. The server's
// idempotency keys use it (../server/idempotency.ts): the key of a call is recorded in the same
// transaction as the change the call makes, so a crash can never keep one without the other.
import { AsyncLocalStorage } from "node:async_hooks";
import type { WriteTx } from "./outbox.js";

export interface WriteHook {
  /** Runs first in each write transaction of the context; a throw rolls the transaction back. */
  begin(tx: WriteTx): Promise<void>;
  /** The transaction `tx` (one `begin` ran in) committed. */
  committed(tx: WriteTx): void;
  /** Records, inside `tx`, what the work created (noteWriteSubject). */
  subject?(tx: WriteTx, id: string): Promise<void>;
}

const current = new AsyncLocalStorage<WriteHook>();

/** Runs `fn` with `hook` joining every write transaction started inside it. */
export function withWriteHook<T>(hook: WriteHook, fn: () => Promise<T>): Promise<T> {
  return current.run(hook, fn);
}

/** The hook of the current context, if any (Store.write). */
export function currentWriteHook(): WriteHook | undefined {
  return current.getStore();
}

/**
 * Tells the hook of the current context, if any, what this transaction creates (e.g. a new
 * deployment's id), inside the transaction: idempotency keys keep it so a repeat whose first
 * answer was lost can be answered from it.
 */
export async function noteWriteSubject(tx: WriteTx, id: string): Promise<void> {
  await current.getStore()?.subject?.(tx, id);
}
