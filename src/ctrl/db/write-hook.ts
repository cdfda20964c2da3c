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
