// Shipped migrations are never edited: what each one sends to SQLite and to PostgreSQL is held
// here, statement by statement, against migration-sql.json (recorded from the migrations as they
// shipped). The migrations run against a Kysely whose driver only records the SQL it is given
// and answers no rows, so the data steps' reads are recorded too but their loops do not run.
//
// A new migration is not in the file yet: record it (existing entries are never rewritten) with
//   KRANE_RECORD_MIGRATION_SQL=1 node scripts/run-tests.mjs test/unit/ctrl/db/migration-sql.test.ts
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { describe, it } from "node:test";
import {
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  type CompiledQuery,
  type DatabaseConnection,
  type Dialect as KyselyDialect,
  type Driver,
  type QueryResult,
} from "kysely";
import type { Dialect } from "../../../../src/ctrl/db/dialect.js";
import { MIGRATIONS } from "../../../../src/ctrl/db/migrations/index.js";
import { postgresDialect } from "../../../../src/ctrl/db/postgres.js";
import { sqliteDialect } from "../../../../src/ctrl/db/sqlite.js";

const FIXTURE = new URL("./migration-sql.json", import.meta.url);

type Recorded = Record<string, { sqlite: string[]; postgres: string[] }>;

class RecordingDriver implements Driver {
  constructor(private readonly out: string[]) {}
  init(): Promise<void> {
    return Promise.resolve();
  }
  acquireConnection(): Promise<DatabaseConnection> {
    const out = this.out;
    return Promise.resolve({
      executeQuery<R>(q: CompiledQuery): Promise<QueryResult<R>> {
        out.push(q.parameters.length === 0 ? q.sql : `${q.sql} -- ${JSON.stringify(q.parameters)}`);
        return Promise.resolve({ rows: [] });
      },
      // eslint-disable-next-line require-yield -- no migration streams; a stream yields nothing
      async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
        return;
      },
    });
  }
  beginTransaction(): Promise<void> {
    return Promise.resolve();
  }
  commitTransaction(): Promise<void> {
    return Promise.resolve();
  }
  rollbackTransaction(): Promise<void> {
    return Promise.resolve();
  }
  releaseConnection(): Promise<void> {
    return Promise.resolve();
  }
  destroy(): Promise<void> {
    return Promise.resolve();
  }
}

function recordingDb(postgres: boolean, out: string[]): Kysely<unknown> {
  const dialect: KyselyDialect = {
    createAdapter: () => (postgres ? new PostgresAdapter() : new SqliteAdapter()),
    createDriver: () => new RecordingDriver(out),
    createQueryCompiler: () => (postgres ? new PostgresQueryCompiler() : new SqliteQueryCompiler()),
    createIntrospector: (db) => (postgres ? new PostgresIntrospector(db) : new SqliteIntrospector(db)),
  };
  return new Kysely<unknown>({ dialect });
}

async function statements(name: string, dialect: Dialect): Promise<string[]> {
  const out: string[] = [];
  const db = recordingDb(dialect === postgresDialect, out);
  const m = MIGRATIONS[name];
  assert.ok(m, name);
  await m.up(db, dialect);
  await db.destroy();
  return out;
}

async function recordAll(): Promise<Recorded> {
  const all: Recorded = {};
  for (const name of Object.keys(MIGRATIONS)) {
    all[name] = { sqlite: await statements(name, sqliteDialect), postgres: await statements(name, postgresDialect) };
  }
  return all;
}

function readFixture(): Recorded {
  return existsSync(FIXTURE) ? (JSON.parse(readFileSync(FIXTURE, "utf8")) as Recorded) : {};
}

describe("shipped migrations", () => {
  if (process.env.KRANE_RECORD_MIGRATION_SQL === "1") {
    it("records the SQL of migrations not recorded yet", async () => {
      const fixture = readFixture();
      for (const [name, sql] of Object.entries(await recordAll())) fixture[name] ??= sql;
      writeFileSync(FIXTURE, `${JSON.stringify(fixture, null, 2)}\n`);
    });
    return;
  }

  it("send SQLite and PostgreSQL the statements they sent when they shipped, byte for byte", async () => {
    const fixture = readFixture();
    const now = await recordAll();
    assert.ok(Object.keys(fixture).length > 30, "the recording is there");
    for (const [name, shipped] of Object.entries(fixture)) {
      assert.ok(now[name], `${name} is still registered`);
      assert.deepEqual(now[name].sqlite, shipped.sqlite, `${name} on SQLite`);
      assert.deepEqual(now[name].postgres, shipped.postgres, `${name} on PostgreSQL`);
    }
  });

  it("differ between the databases only where the dialect says so", async () => {
    // Holds the recorder to something that could fail: the two recordings are not the same text.
    const now = await recordAll();
    assert.ok(now["0001_initial"]?.sqlite.some((s) => s.includes('"payload" blob not null')));
    assert.ok(now["0001_initial"]?.postgres.some((s) => s.includes('"payload" bytea not null')));
    assert.equal(now["0003_commit_sequencer"]?.sqlite.length, 0);
    assert.ok((now["0003_commit_sequencer"]?.postgres.length ?? 0) > 0);
  });
});
