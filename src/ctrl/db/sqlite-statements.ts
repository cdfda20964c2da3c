// Prepared statements kept across queries for SQLite (ctrl delivery vs the bare loop).
//
// Kysely's SQLite driver calls `prepare(sql)` for every query it runs; preparing is SQLite
// parsing and planning the statement again, which was about a tenth of ctrl's CPU on the write
// path. ctrl runs a small set of distinct SQL texts over and over, so the database handed to
// Kysely keeps the statements it prepared, by SQL text, in a bounded least-recently-used map.
//
// Safe because better-sqlite3 statements are reusable: `all` and `run` finish before they
// return, and a statement whose schema changed (a migration) is re-prepared by SQLite itself.
// The one exception is a statement still being iterated (`busy`): the same SQL then gets a fresh,
// uncached statement, so two iterations never share one.
import type { SqliteDatabase, SqliteStatement } from "kysely";

/** What this module needs of a better-sqlite3 database. */
export interface PreparingDatabase {
  prepare(sql: string): SqliteStatement & { readonly busy: boolean };
  close(): void;
}

/** Distinct SQL texts kept; ctrl has a few hundred queries at most, most of them rare. */
export const STATEMENT_CACHE_SIZE = 512;

export class CachedStatements implements SqliteDatabase {
  private readonly cache = new Map<string, SqliteStatement & { readonly busy: boolean }>();

  constructor(
    private readonly db: PreparingDatabase,
    private readonly size = STATEMENT_CACHE_SIZE,
  ) {}

  prepare(sql: string): SqliteStatement {
    const hit = this.cache.get(sql);
    if (hit !== undefined) {
      if (hit.busy) return this.db.prepare(sql);
      // Re-insert: a Map iterates in insertion order, so the first key is the least recently used.
      this.cache.delete(sql);
      this.cache.set(sql, hit);
      return hit;
    }
    const stmt = this.db.prepare(sql);
    this.cache.set(sql, stmt);
    if (this.cache.size > this.size) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) this.cache.delete(oldest);
    }
    return stmt;
  }

  /** Statements kept now (for tests). */
  get cached(): number {
    return this.cache.size;
  }

  close(): void {
    this.cache.clear();
    this.db.close();
  }
}
