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
//
// Group commit (PostgreSQL): at most `writeSlots` write transactions run at once. Writes that
// arrive while every slot is busy queue here, and the next free slot runs up to MAX_GROUP of
// them one after another in one transaction, each with its own WriteTx, its caller's async
// context and hooks, then commits once. Commits of one region's stream are serialised on its
// counter row until the commit is on disk, so under load this is what lets more changes through
// than commits: one lock turn and one WAL flush for the group. A write that arrives to a free
// slot runs alone, as before. If anything in a group fails (a caller's function, or a COMMIT
// the server refused), the group is rolled back and each of its writes runs again alone, with
// the usual retries, so each caller gets its own answer and one caller's error never fails
// another's change. That is safe for the same reason a retry is: a write's function only touches
// the database. A COMMIT cut off before the server answered may have committed, so its error
// goes to every caller of the group, as it would to a lone write's caller. A write that waits
// for a slot longer than WRITE_WAIT_MS is refused (resource_exhausted, like a full pool).
import { AsyncResource } from "node:async_hooks";
import type { Kysely, Transaction } from "kysely";
import type { BackoffPolicy } from "../../retry/backoff.js";
import { retry } from "../../retry/retry.js";
import type { DatabaseConfig, Dialect } from "./dialect.js";
import { encodeChanges, type ChangeNotifier, type ChangeTopic, type Poke } from "./notify.js";
import { openDatabase } from "./open.js";
import { WriteTx } from "./outbox.js";
import type { Database } from "./schema.js";
import { currentWriteHooks, type WriteHook } from "./write-hook.js";

/** Backoff between attempts of a transaction that lost to a concurrent one. */
export const TX_RETRY: BackoffPolicy = { baseMs: 5, capMs: 100 };
export const TX_ATTEMPTS = 5;

/**
 * At most this many writes share a transaction: each makes a few rows, and far beyond this one
 * group's locks and WAL would hold the next group up longer than it saves.
 */
export const MAX_GROUP = 32;

export interface StoreOptions {
  clock?: () => number;
  /** Write transactions at once with group commit (default 5: half of the default pool). */
  writeSlots?: number;
}

type WriteFn<T> = (tx: WriteTx) => Promise<T>;

interface Queued {
  readonly fn: WriteFn<unknown>;
  readonly hooks: readonly WriteHook[];
  resolve(value: unknown): void;
  reject(err: unknown): void;
  /** Gives up waiting for a slot (WRITE_WAIT_MS). */
  timer?: NodeJS.Timeout;
  /** A slot took it. */
  taken?: boolean;
}

/**
 * How long a write waits for a slot before it is refused with NO_WRITE_SLOT (answered
 * resource_exhausted, server/dependency-errors.ts), as a query waits for a connection of the pool.
 */
export const WRITE_WAIT_MS = 5_000;
export const NO_WRITE_SLOT = "no free write slot";

interface Done<T> {
  result: T;
  pokes: Poke[];
  tx: WriteTx;
}

export class Store {
  readonly clock: () => number;
  private writesInFlight = 0;
  private idleWaiters: (() => void)[] = [];
  /** Settles when the last queued writer is done (single-writer dialects). */
  private writeTail: Promise<void> = Promise.resolve();
  /** Group commit: slots (0: none, every write runs alone), those in use, writes waiting for one. */
  private readonly writeSlots: number;
  private slotsBusy = 0;
  private readonly waiting: Queued[] = [];

  constructor(
    readonly db: Kysely<Database>,
    readonly dialect: Dialect,
    readonly notifier: ChangeNotifier,
    private readonly closeDb: () => Promise<void>,
    options: StoreOptions = {},
  ) {
    this.clock = options.clock ?? Date.now;
    this.writeSlots = dialect.groupCommit ? Math.max(1, options.writeSlots ?? 5) : 0;
  }

  static async open(config: DatabaseConfig, options: StoreOptions = {}): Promise<Store> {
    const opened = await openDatabase(config);
    return new Store(opened.db, opened.dialect, opened.notifier, opened.close, {
      ...options,
      writeSlots: options.writeSlots ?? Math.max(1, Math.floor((config.poolSize ?? 10) / 2)),
    });
  }

  async write<T>(fn: WriteFn<T>): Promise<T> {
    this.writesInFlight++;
    const hooks = currentWriteHooks();
    let turnDone: (() => void) | undefined;
    try {
      if (this.writeSlots > 0) {
        // Run in the caller's async context wherever a group runs it (noteWriteSubject reads it).
        // Not AsyncResource.bind: each bound function gets a deprecated getter made with
        // util.deprecate, which cost a write about 8 µs.
        const scope = new AsyncResource("krane.write");
        const bound: WriteFn<T> = (tx) => scope.runInAsyncScope(fn, undefined, tx);
        return await new Promise<T>((resolve, reject) => {
          const w: Queued = { fn: bound, hooks, resolve: resolve as (v: unknown) => void, reject };
          this.waiting.push(w);
          this.fillSlots();
          if (!w.taken)
            w.timer = setTimeout(() => {
              const at = this.waiting.indexOf(w);
              if (at < 0) return;
              this.waiting.splice(at, 1);
              reject(new Error(`${NO_WRITE_SLOT} within ${WRITE_WAIT_MS} ms`));
            }, WRITE_WAIT_MS);
        });
      }
      if (this.dialect.singleWriter) {
        const previous = this.writeTail;
        this.writeTail = new Promise<void>((resolve) => (turnDone = resolve));
        await previous;
      }
      return await this.writeAlone(fn, hooks);
    } finally {
      turnDone?.();
      this.writesInFlight--;
      if (this.writesInFlight === 0) for (const w of this.idleWaiters.splice(0)) w();
    }
  }

  /** Starts a group in every free slot while writes wait. */
  private fillSlots(): void {
    while (this.slotsBusy < this.writeSlots && this.waiting.length > 0) {
      const group = this.waiting.splice(0, MAX_GROUP);
      for (const w of group) {
        w.taken = true;
        clearTimeout(w.timer);
      }
      this.slotsBusy++;
      void this.writeGroup(group).finally(() => {
        this.slotsBusy--;
        this.fillSlots();
      });
    }
  }

  /** One write in its own transaction, retried when the database says so. */
  private async writeAlone<T>(fn: WriteFn<T>, hooks: readonly WriteHook[]): Promise<T> {
    const done = await retry(() => this.db.transaction().execute((trx) => this.run(trx, fn, hooks)), {
      policy: TX_RETRY,
      maxAttempts: TX_ATTEMPTS,
      retryable: (err) => this.dialect.isRetryable(err),
    });
    this.committed(done, hooks);
    return done.result;
  }

  private async writeGroup(group: Queued[]): Promise<void> {
    const only = group[0];
    if (group.length === 1 && only) {
      await this.writeAlone(only.fn, only.hooks).then(only.resolve, only.reject);
      return;
    }
    let done: Done<unknown>[];
    let committing = false;
    try {
      done = await this.db.transaction().execute(async (trx) => {
        const out: Done<unknown>[] = [];
        for (const w of group) out.push(await this.run(trx, w.fn, w.hooks));
        committing = true;
        return out;
      });
    } catch (err) {
      // A COMMIT that failed without the server refusing it (the connection went) may have
      // committed: running the writes again could apply them twice, so each caller hears of it,
      // as a lone write's caller would.
      if (committing && !this.dialect.refusedCommit(err)) {
        for (const w of group) w.reject(err);
        return;
      }
      // Rolled back; which write failed is not known: each runs alone and gets its own answer
      // (one after another, so a group never takes more than its one connection).
      for (const w of group) await this.writeAlone(w.fn, w.hooks).then(w.resolve, w.reject);
      return;
    }
    group.forEach((w, i) => {
      const d = done[i] as Done<unknown>;
      this.committed(d, w.hooks);
      w.resolve(d.result);
    });
  }

  /** One write's part of a transaction: its hooks around its function, then its outbox and change hints. */
  private async run<T>(trx: Transaction<Database>, fn: WriteFn<T>, hooks: readonly WriteHook[]): Promise<Done<T>> {
    const tx = new WriteTx(trx, this.dialect, this.clock());
    for (const hook of hooks) await hook.begin(tx);
    const result = await fn(tx);
    for (const hook of hooks) await hook.beforeCommit?.(tx);
    const pokes = await tx.flush();
    if (tx.changes.size > 0) await this.dialect.notifyChanges(trx, encodeChanges([...tx.changes]));
    return { result, pokes, tx };
  }

  private committed<T>({ pokes, tx }: Done<T>, hooks: readonly WriteHook[]): void {
    for (const hook of hooks) hook.committed(tx);
    if (this.dialect.pokeLocally(this.notifier.healthy())) {
      if (pokes.length > 0) this.notifier.publishLocal(pokes);
      this.notifier.publishChangesLocal([...tx.changes]);
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
