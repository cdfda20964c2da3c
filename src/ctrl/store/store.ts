// Store: the database, its change notifier, and the transactional write path.
//
// Every mutation goes through `write`, which runs the caller's function in one transaction,
// flushes the outbox rows it recorded (versions allocated inside that transaction), commits, and
// only then pokes the streams of this process (SQLite; PostgreSQL's commit NOTIFYs them). Deadlocks and serialization failures reported by
// PostgreSQL are retried: the function must be safe to run again (it only touches the database).
import type { Kysely } from "kysely";
import { openDatabase, type DatabaseConfig, type DialectName } from "./database.js";
import type { ChangeNotifier } from "./notify.js";
import { WriteTx } from "./outbox.js";
import type { Database } from "./schema.js";

const RETRYABLE_PG_CODES = new Set(["40001", "40P01"]);

function pgCode(err: unknown): string | undefined {
  if (typeof err === "object" && err !== null && "code" in err) {
    const code = (err as { code: unknown }).code;
    return typeof code === "string" ? code : undefined;
  }
  return undefined;
}

/** True for unique-constraint violations on either database. */
export function isUniqueViolation(err: unknown): boolean {
  const code = pgCode(err);
  return code === "23505" || code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY";
}

export interface StoreOptions {
  clock?: () => number;
}

export class Store {
  readonly clock: () => number;
  private writesInFlight = 0;
  private idleWaiters: (() => void)[] = [];

  constructor(
    readonly db: Kysely<Database>,
    readonly dialect: DialectName,
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
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          const { result, pokes } = await this.db.transaction().execute(async (trx) => {
            const tx = new WriteTx(trx, this.dialect, this.clock());
            const result = await fn(tx);
            const pokes = await tx.flush();
            return { result, pokes };
          });
          // On PostgreSQL the commit's NOTIFY wakes this process's streams too, and with the
          // version; the local poke only stands in while the LISTEN connection is down.
          if (pokes.length > 0 && (this.dialect === "sqlite" || !this.notifier.healthy())) this.notifier.publishLocal(pokes);
          return result;
        } catch (err) {
          const code = pgCode(err);
          if (attempt < 5 && code !== undefined && RETRYABLE_PG_CODES.has(code)) continue;
          throw err;
        }
      }
    } finally {
      this.writesInFlight--;
      if (this.writesInFlight === 0) for (const w of this.idleWaiters.splice(0)) w();
    }
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
