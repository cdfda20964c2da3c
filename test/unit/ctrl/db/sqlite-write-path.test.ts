// Unit tests of SQLite's fast write path: the prepared-statement cache Kysely's driver
// is given, the Store's own writer queue and hand-written outbox statements, and WAL checkpoints
// on a worker thread, on real SQLite databases (in memory, or a temporary file).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import SQLite from "better-sqlite3";
import { readOutbox, readDesired, streamPosition } from "../../../../src/ctrl/db/outbox.js";
import { Checkpointer } from "../../../../src/ctrl/db/sqlite-checkpoint.js";
import { CachedStatements, type PreparingDatabase } from "../../../../src/ctrl/db/sqlite-statements.js";
import { Store } from "../../../../src/ctrl/db/store.js";

/** A real database that counts how often it prepares. */
function counting(): { db: PreparingDatabase; raw: SQLite.Database; prepared: () => number } {
  const raw = new SQLite(":memory:");
  let n = 0;
  return {
    raw,
    prepared: () => n,
    db: {
      prepare(sql: string) {
        n++;
        return raw.prepare(sql);
      },
      close: () => raw.close(),
    },
  };
}

describe("CachedStatements", () => {
  it("prepares each SQL text once and answers the same results as a fresh statement", () => {
    const { db, raw, prepared } = counting();
    raw.exec("create table t (a integer)");
    const cache = new CachedStatements(db);
    for (let i = 0; i < 5; i++) cache.prepare("insert into t (a) values (?)").run([i]);
    assert.equal(prepared(), 1);
    assert.deepEqual(
      cache.prepare("select a from t order by a").all([]),
      [0, 1, 2, 3, 4].map((a) => ({ a })),
    );
    assert.equal(prepared(), 2);
    cache.close();
  });

  it("gives a statement being iterated a fresh twin instead of sharing it", () => {
    const { db, raw, prepared } = counting();
    raw.exec("create table t (a integer); insert into t values (1), (2), (3)");
    const cache = new CachedStatements(db);
    const pairs: [number, number][] = [];
    for (const outer of cache.prepare("select a from t order by a").iterate([]) as Iterable<{ a: number }>) {
      for (const inner of cache.prepare("select a from t order by a").iterate([]) as Iterable<{ a: number }>)
        pairs.push([outer.a, inner.a]);
    }
    assert.equal(pairs.length, 9);
    // The outer statement stays cached; each inner run got one of its own.
    assert.equal(prepared(), 4);
    cache.close();
  });

  it("keeps at most `size` statements, dropping the least recently used", () => {
    const { db, raw, prepared } = counting();
    raw.exec("create table t (a integer)");
    const cache = new CachedStatements(db, 2);
    cache.prepare("select 1");
    cache.prepare("select 2");
    cache.prepare("select 1"); // now "select 2" is the least recently used
    cache.prepare("select 3");
    assert.equal(cache.cached, 2);
    assert.equal(prepared(), 3);
    cache.prepare("select 1");
    assert.equal(prepared(), 3, "select 1 was kept");
    cache.prepare("select 2");
    assert.equal(prepared(), 4, "select 2 was dropped");
    cache.close();
  });

  it("follows schema changes made after a statement was cached", () => {
    const { db, raw } = counting();
    raw.exec("create table t (a integer); insert into t values (1)");
    const cache = new CachedStatements(db);
    assert.deepEqual(cache.prepare("select * from t").all([]), [{ a: 1 }]);
    raw.exec("alter table t add column b integer default 7");
    assert.deepEqual(cache.prepare("select * from t").all([]), [{ a: 1, b: 7 }]);
    cache.close();
  });
});

describe("Store on SQLite", () => {
  it("commits concurrent writers in call order with dense versions, and keeps a stored environment when given none", async () => {
    const store = await Store.open({ url: ":memory:" });
    try {
      await store.db.insertInto("regions").values({ name: "r1", created_at: 0 }).execute();
      const n = 50;
      await Promise.all(
        Array.from({ length: n }, (_, i) =>
          store.write(async (tx) => {
            // Yield mid-transaction: a writer queued behind must still wait for this one.
            await new Promise((r) => setImmediate(r));
            await tx.putDesired("r1", "deployment", `dep_${i % 5}`, Buffer.from([i]), i, i < 5 ? `env_${i}` : null);
          }),
        ),
      );
      const rows = await readOutbox(store.db, "r1", "deployment", 0, 1000);
      assert.deepEqual(
        rows.map((r) => r.version),
        Array.from({ length: n }, (_, i) => i + 1),
      );
      assert.deepEqual(
        rows.map((r) => [...r.payload][0]),
        Array.from({ length: n }, (_, i) => i),
        "the outbox holds the changes in the order they were written",
      );
      assert.equal((await streamPosition(store.db, "r1", "deployment")).head, n);
      const desired = await readDesired(store.db, "r1", "deployment", ["dep_0", "dep_4"]);
      assert.deepEqual([...(desired.get("dep_0") ?? [])], [45]);
      const stored = await store.db
        .selectFrom("desired_objects")
        .select(["object_id", "replicas", "environment_id"])
        .orderBy("object_id")
        .execute();
      assert.deepEqual(
        stored.map((r) => [r.object_id, r.replicas, r.environment_id]),
        [0, 1, 2, 3, 4].map((k) => [`dep_${k}`, 45 + k, `env_${k}`]),
      );
    } finally {
      await store.close();
    }
  });

  it("a failed writer rolls back alone and lets the next one in", async () => {
    const store = await Store.open({ url: ":memory:" });
    try {
      await store.db.insertInto("regions").values({ name: "r1", created_at: 0 }).execute();
      const results = await Promise.allSettled([
        store.write((tx) => tx.putDesired("r1", "deployment", "dep_a", Buffer.from([1]), 1)),
        store.write(async (tx) => {
          await tx.putDesired("r1", "deployment", "dep_b", Buffer.from([2]), 2);
          throw new Error("boom");
        }),
        store.write((tx) => tx.putDesired("r1", "deployment", "dep_c", Buffer.from([3]), 3)),
      ]);
      assert.deepEqual(
        results.map((r) => r.status),
        ["fulfilled", "rejected", "fulfilled"],
      );
      const rows = await readOutbox(store.db, "r1", "deployment", 0, 10);
      assert.deepEqual(
        rows.map((r) => [r.version, r.objectId]),
        [
          [1, "dep_a"],
          [2, "dep_c"],
        ],
      );
    } finally {
      await store.close();
    }
  });
});

describe("Checkpointer", () => {
  it("checkpoints the WAL from its own thread while ctrl's connection does none itself, and closes cleanly", async () => {
    const dir = mkdtempSync(join(tmpdir(), "krane-checkpoint-"));
    try {
      const file = join(dir, "ctrl.db");
      const db = new SQLite(file);
      db.pragma("journal_mode = WAL");
      const checkpointer = await Checkpointer.start(db, file, 20);
      assert.equal(db.pragma("wal_autocheckpoint", { simple: true }), 0);
      db.exec("create table t (a integer, b blob)");
      const insert = db.prepare("insert into t values (?, ?)");
      for (let i = 0; i < 2000; i++) insert.run(i, Buffer.alloc(1000, i % 256));
      // ctrl's connection checkpoints nothing itself (autocheckpoint 0, and this test never asks),
      // so the pages reach the database file only through the worker.
      assert.ok(statSync(`${file}-wal`).size > 2_000_000, "the WAL holds the writes");
      const deadline = Date.now() + 10_000;
      while (statSync(file).size < 2_000_000 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      assert.ok(
        statSync(file).size >= 2_000_000,
        `the worker copied the WAL into the database file (${statSync(file).size} bytes)`,
      );
      await checkpointer.stop();
      db.close();
      const again = new SQLite(file, { readonly: true });
      assert.equal((again.prepare("select count(*) as n from t").get() as { n: number }).n, 2000);
      again.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("needs no worker for an in-memory database", async () => {
    const db = new SQLite(":memory:");
    const checkpointer = await Checkpointer.start(db, ":memory:");
    await checkpointer.stop();
    db.close();
  });
});
