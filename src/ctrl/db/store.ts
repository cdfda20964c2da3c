// Store: the database, its dialect, its change notifier, and the transactional write path.
//
// Every mutation goes through `write`, which runs the caller's function in one transaction,
// flushes the outbox rows it recorded (versions allocated inside that transaction), commits, and
// only then pokes the streams of this process where the dialect says so (SQLite; PostgreSQL's
// commit NOTIFYs them). A transaction the dialect reports as retryable (PostgreSQL deadlocks and
// serialization failures) runs again after a short full-jitter backoff (TX_RETRY, through
// src/retry), at most TX_ATTEMPTS times in all: the function must be safe to run again (it only
// touches the database). The write hooks of the caller's async context (./write-hook.ts) run
// first and last in each transaction and hear of its commit.
//
// With a single-connection database (SQLite) writers wait for their turn here, in arrival
// order, each woken only by the one before it: the driver's own connection lock wakes every
// waiter at each release, which under a burst of writes cost more CPU than the writes.
import type { Kysely } from "kysely";
import type { BackoffPolicy } from "../../retry/backoff.js";
import { retry } from "../../retry/retry.js";
import type { DatabaseConfig, Dialect } from "./dialect.js";
import { encodeChanges, type ChangeNotifier, type ChangeTopic } from "./notify.js";
import { openDatabase } from "./open.js";
import { WriteTx } from "./outbox.js";
import type { Database } from "./schema.js";
import { currentWriteHooks } from "./write-hook.js";

/** Backoff between attempts of a transaction that lost to a concurrent one. */
export const TX_RETRY: BackoffPolicy = { baseMs: 5, capMs: 100 };
export const TX_ATTEMPTS = 5;

export interface StoreOptions {
  clock?: () => number;
}

export class Store {
  readonly clock: () => number;
  private writesInFlight = 0;
  private idleWaiters: (() => void)[] = [];
  /** Settles when the last queued writer is done (single-writer dialects). */
  private writeTail: Promise<void> = Promise.resolve();

  constructor(
    readonly db: Kysely<Database>,
    readonly dialect: Dialect,
    readonly notifier: ChangeNotifier,
    private readonly closeDb: () => Promise<void>,
    options: StoreOptions = {},
  ) {
    this.clock = options.clock ?? Date.now;
  }

  static async open(config: DatabaseConfig, options: StoreOptions = {}): Promise<Store> {
    const opened = await openDatabase(config);
    return new Store(opened.db, opened.dialect, opened.notifier, opened.close, options);
  }

  async write<T>(fn: (tx: WriteTx) => Promise<T>): Promise<T> {
    this.writesInFlight++;
    const hooks = currentWriteHooks();
    let turnDone: (() => void) | undefined;
    try {
      if (this.dialect.singleWriter) {
        const previous = this.writeTail;
        this.writeTail = new Promise<void>((resolve) => (turnDone = resolve));
        await previous;
      }
      const { result, pokes, tx } = await retry(
        () =>
          this.db.transaction().execute(async (trx) => {
            const tx = new WriteTx(trx, this.dialect, this.clock());
            for (const hook of hooks) await hook.begin(tx);
            const result = await fn(tx);
            for (const hook of hooks) await hook.beforeCommit?.(tx);
            const pokes = await tx.flush();
            if (tx.changes.size > 0) await this.dialect.notifyChanges(trx, encodeChanges([...tx.changes]));
            return { result, pokes, tx };
          }),
        { policy: TX_RETRY, maxAttempts: TX_ATTEMPTS, retryable: (err) => this.dialect.isRetryable(err) },
      );
      for (const hook of hooks) hook.committed(tx);
      if (this.dialect.pokeLocally(this.notifier.healthy())) {
        if (pokes.length > 0) this.notifier.publishLocal(pokes);
        this.notifier.publishChangesLocal([...tx.changes]);
      }
      return result;
    } finally {
      turnDone?.();
      this.writesInFlight--;
      if (this.writesInFlight === 0) for (const w of this.idleWaiters.splice(0)) w();
    }
  }

  /**
   * Tells the live views of changes committed outside `write` (writes that need no outbox and
   * no transaction of their own: heartbeats, measurements).
   */
  async publishChanges(topics: readonly ChangeTopic[]): Promise<void> {
    if (topics.length === 0) return;
    await this.dialect.notifyChanges(this.db, encodeChanges(topics));
    if (this.dialect.pokeLocally(this.notifier.healthy())) this.notifier.publishChangesLocal(topics);
  }

  /** True for unique-constraint violations (already exists). */
  isUniqueViolation(err: unknown): boolean {
    return this.dialect.isUniqueViolation(err);
  }

  /** Resolves when no write transaction is running (for graceful shutdown). */
  async writesIdle(): Promise<void> {
    if (this.writesInFlight === 0) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  async ping(): Promise<void> {
    await this.db.selectFrom("regions").select("name").limit(1).execute();
  }

  async close(): Promise<void> {
    await this.writesIdle();
    await this.closeDb();
  }
}
