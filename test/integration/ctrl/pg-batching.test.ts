// ctrl's PostgreSQL write path in one round trip per change (src/ctrl/db/pg-batching.ts), on a
// real server: the queries a write sends are counted on the driver's clients, and what they did
// is read back. Held statements keep their order, a later statement sees them, a failing one
// fails the transaction with nothing applied, and parameters written as literals mean what the
// same parameters mean.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { LocalNotifier } from "../../../src/ctrl/db/notify.js";
import { readDesired, readOutbox, streamPosition } from "../../../src/ctrl/db/outbox.js";
import { BatchingPool, literal } from "../../../src/ctrl/db/pg-batching.js";
import { pgTypes, postgresDialect } from "../../../src/ctrl/db/postgres.js";
import type { Database } from "../../../src/ctrl/db/schema.js";
import { MAX_GROUP, NO_WRITE_SLOT, Store, WRITE_WAIT_MS } from "../../../src/ctrl/db/store.js";
import { noteWriteSubject, withWriteHook, type WriteHook } from "../../../src/ctrl/db/write-hook.js";
import type { WriteTx } from "../../../src/ctrl/db/outbox.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";

/** A Store on `url` whose driver clients count the queries they send to the server. */
async function countingStore(
  url: string,
  writeSlots?: number,
): Promise<{ store: Store; sent: () => number; close: () => Promise<void> }> {
  // Migrations first, through the ordinary path.
  const migrated = await Store.open({ url });
  await migrated.close();
  const raw = new pg.Pool({ connectionString: url, max: 4, types: pgTypes() });
  let sent = 0;
  raw.on("connect", (client) => {
    const c = client as unknown as { query: (...args: unknown[]) => unknown };
    const query = c.query.bind(client);
    c.query = (...args: unknown[]) => {
      sent++;
      return query(...args);
    };
  });
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: new BatchingPool(raw) }) });
  const store = new Store(db, postgresDialect, new LocalNotifier(), () => db.destroy(), { writeSlots });
  return { store, sent: () => sent, close: () => store.close() };
}

const bytes = (...b: number[]): Uint8Array => Uint8Array.from(b);

function lit(v: unknown): string {
  const l = literal(v);
  if (l === undefined) throw new Error(`no literal for ${String(v)}`);
  return l;
}

describe("PostgreSQL writes in one round trip", () => {
  let server: TestPostgres;
  before(async () => {
    server = await startPostgres();
  });
  after(async () => {
    await server.stop();
  });

  it("a change of desired state is one query; concurrent changes keep dense versions", async () => {
    const { store, sent, close } = await countingStore(await server.newDatabase());
    try {
      const before = sent();
      const payload = bytes(0, 1, 0x27, 0x5c, 0xff, 0);
      await store.write((tx) => tx.putDesired("eu", "deployment", "d-1", payload, 2, "env-1"));
      assert.equal(sent() - before, 1, "BEGIN, the change and COMMIT went as one query");
      assert.deepEqual(
        [...(await readDesired(store.db, "eu", "deployment", ["d-1"])).values()].map((p) => [...p]),
        [[...payload]],
      );
      const [first] = await readOutbox(store.db, "eu", "deployment", 0, 10);
      assert.equal(first?.version, 1);
      assert.deepEqual([...(first?.payload ?? [])], [...payload]);

      const many = sent();
      await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          store.write((tx) => tx.putDesired("eu", "deployment", `d-${i % 5}`, bytes(i), i, "env-1")),
        ),
      );
      // At most one query each: those that queued behind the pool's 4 share a commit (group commit).
      assert.ok(sent() - many <= 20, `${sent() - many} queries for 20 changes`);
      const rows = await readOutbox(store.db, "eu", "deployment", 1, 100);
      assert.deepEqual(
        rows.map((r) => r.version),
        Array.from({ length: 20 }, (_, i) => i + 2),
        "versions stay dense under concurrent writers",
      );
      assert.equal((await streamPosition(store.db, "eu", "deployment")).head, 21);
    } finally {
      await close();
    }
  });

  it("a held change is seen by the transaction's next statement, in order", async () => {
    const { store, sent, close } = await countingStore(await server.newDatabase());
    try {
      const before = sent();
      const seen = await store.write(async (tx) => {
        await tx.putDesired("eu", "deployment", "d-1", bytes(1), 1, "env-1");
        await tx.putDesired("eu", "deployment", "d-1", bytes(2), 2, "env-1");
        return tx.trx
          .selectFrom("desired_objects")
          .select(["replicas"])
          .where("object_id", "=", "d-1")
          .executeTakeFirst();
      });
      assert.equal(seen?.replicas, 2, "the read ran after both writes, in the same transaction");
      assert.equal(sent() - before, 2, "BEGIN, two changes and the read; then COMMIT");
      assert.deepEqual(
        (await readOutbox(store.db, "eu", "deployment", 0, 10)).map((r) => [r.version, [...r.payload]]),
        [
          [1, [1]],
          [2, [2]],
        ],
      );
    } finally {
      await close();
    }
  });

  it("a held change that fails fails its transaction: nothing applied, the connection reused", async () => {
    const { store, sent, close } = await countingStore(await server.newDatabase());
    try {
      // PostgreSQL refuses NUL in text: the second change fails on the server (sent on its own,
      // as a parameter: a query's text cannot carry NUL).
      await assert.rejects(
        store.write(async (tx) => {
          await tx.putDesired("eu", "deployment", "ok", bytes(1), 1, "env-1");
          await tx.putDesired("eu", "deployment", "bad\u0000id", bytes(2), 1, "env-1");
        }),
        /0x00|invalid byte sequence/,
      );
      assert.equal((await readDesired(store.db, "eu", "deployment", ["ok"])).size, 0);
      assert.deepEqual(await readOutbox(store.db, "eu", "deployment", 0, 10), []);
      // Every connection of the pool still works (none was left inside the failed transaction).
      await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          store.write((tx) => tx.putDesired("eu", "deployment", `d-${i}`, bytes(i), 1, "env-1")),
        ),
      );
      assert.equal((await streamPosition(store.db, "eu", "deployment")).head, 8);

      // A transaction that only held changes and then gave up sent nothing at all.
      const before = sent();
      await assert.rejects(
        store.write(async (tx) => {
          await tx.putDesired("eu", "deployment", "never", bytes(9), 1, "env-1");
          throw new Error("changed my mind");
        }),
        /changed my mind/,
      );
      assert.equal(sent() - before, 0);
      assert.equal((await readDesired(store.db, "eu", "deployment", ["never"])).size, 0);
    } finally {
      await close();
    }
  });

  it("a parameter written as a literal means what the parameter means", async () => {
    const client = new pg.Client({ connectionString: await server.newDatabase(), types: pgTypes() });
    await client.connect();
    try {
      const noNul = (s: string): boolean => !s.includes("\u0000");
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.string({ unit: "binary" }).filter(noNul), { minLength: 1, maxLength: 20 }),
          fc.array(fc.uint8Array({ maxLength: 64 }), { minLength: 1, maxLength: 20 }),
          async (texts, blobs) => {
            const cols = [
              ...texts.map((t, i) => `${lit(t)}::text AS t${i}, $${i + 1}::text AS p${i}`),
              ...blobs.map((b, i) => `${lit(b)}::bytea AS bt${i}, $${texts.length + i + 1}::bytea AS bp${i}`),
            ];
            const r = await client.query<Record<string, unknown>>(`SELECT ${cols.join(", ")}`, [
              ...texts,
              ...blobs.map((b) => Buffer.from(b)),
            ]);
            const row = r.rows[0] ?? {};
            texts.forEach((t, i) => {
              assert.equal(row[`t${i}`], t);
              assert.equal(row[`t${i}`], row[`p${i}`]);
            });
            blobs.forEach((b, i) => {
              assert.deepEqual(row[`bt${i}`], row[`bp${i}`]);
              assert.deepEqual([...(row[`bt${i}`] as Buffer)], [...b]);
            });
          },
        ),
        { numRuns: 60 },
      );
      // The other kinds of value pg converts: numbers, booleans, null, dates, JSON, arrays.
      const when = new Date("2026-03-04T05:06:07.089Z");
      const values: [unknown, string][] = [
        [42, "integer"],
        [-1.5, "float8"],
        [9007199254740991, "int8"],
        [true, "boolean"],
        [null, "text"],
        [when, "timestamptz"],
        [{ a: "it's", b: [1, "\\"] }, "jsonb"],
        [["x", "y,z", 'q"'], "text[]"],
      ];
      const cols = values.map(([v, type], i) => `${lit(v)}::${type} AS l${i}, $${i + 1}::${type} AS p${i}`);
      const r = await client.query<Record<string, unknown>>(
        `SELECT ${cols.join(", ")}`,
        values.map(([v]) => v),
      );
      values.forEach((_, i) => assert.deepEqual(r.rows[0]?.[`l${i}`], r.rows[0]?.[`p${i}`], `value ${i}`));
    } finally {
      await client.end();
    }
  });
});

describe("group commit on PostgreSQL", () => {
  let server: TestPostgres;
  before(async () => {
    server = await startPostgres();
  });
  after(async () => {
    await server.stop();
  });

  /** How many transactions wrote the desired objects (rows of one transaction share its xmin). */
  async function transactions(store: Store): Promise<number> {
    const r = await sql<{ n: number }>`SELECT count(DISTINCT xmin::text)::integer AS n FROM desired_objects`.execute(
      store.db,
    );
    return r.rows[0]?.n ?? 0;
  }

  it("writes that queue while one commits share a transaction, in the order they came, with dense versions", async () => {
    const { store, sent, close } = await countingStore(await server.newDatabase(), 1);
    try {
      const n = 40;
      const before = sent();
      const versions = await Promise.all(
        Array.from({ length: n }, (_, i) =>
          store.write(async (tx) => {
            await tx.putDesired("eu", "deployment", `d-${i}`, bytes(i), 1, "env-1");
            return i;
          }),
        ),
      );
      assert.deepEqual(
        versions,
        Array.from({ length: n }, (_, i) => i),
      );
      // The first runs alone; the 39 that queued go as groups of at most MAX_GROUP.
      const groups = 1 + Math.ceil((n - 1) / MAX_GROUP);
      assert.equal(sent() - before, groups, "one query per group");
      assert.equal(await transactions(store), groups);
      const rows = await readOutbox(store.db, "eu", "deployment", 0, 100);
      assert.deepEqual(
        rows.map((r) => [r.version, r.objectId]),
        Array.from({ length: n }, (_, i) => [i + 1, `d-${i}`]),
        "each change once, numbered in the order the writes came",
      );
    } finally {
      await close();
    }
  });

  it("a write that fails in a group fails alone; each other write commits once", async () => {
    const { store, close } = await countingStore(await server.newDatabase(), 1);
    try {
      const outcomes = await Promise.allSettled(
        Array.from({ length: 10 }, (_, i) =>
          store.write(async (tx) => {
            await tx.putDesired("eu", "deployment", `d-${i}`, bytes(i), 1, "env-1");
            if (i === 5) throw new Error("write 5 is refused");
            return i;
          }),
        ),
      );
      assert.deepEqual(
        outcomes.map((o) => (o.status === "fulfilled" ? o.value : (o.reason as Error).message)),
        [0, 1, 2, 3, 4, "write 5 is refused", 6, 7, 8, 9],
      );
      const rows = await readOutbox(store.db, "eu", "deployment", 0, 100);
      assert.deepEqual(rows.map((r) => r.objectId).sort(), [
        "d-0",
        "d-1",
        "d-2",
        "d-3",
        "d-4",
        "d-6",
        "d-7",
        "d-8",
        "d-9",
      ]);
      assert.deepEqual(
        rows.map((r) => r.version),
        [1, 2, 3, 4, 5, 6, 7, 8, 9],
      );
      assert.equal((await readDesired(store.db, "eu", "deployment", ["d-5"])).size, 0);
    } finally {
      await close();
    }
  });

  it("each write of a group runs in its caller's context: its own hooks, begun and committed once", async () => {
    const { store, close } = await countingStore(await server.newDatabase(), 1);
    try {
      const seen: { begun: number; committed: WriteTx[]; subjects: string[] }[] = [];
      await Promise.all(
        Array.from({ length: 12 }, (_, i) => {
          const mine = { begun: 0, committed: [] as WriteTx[], subjects: [] as string[] };
          seen.push(mine);
          const hook: WriteHook = {
            begin: async () => void mine.begun++,
            committed: (tx) => void mine.committed.push(tx),
            subject: async (_tx, id) => void mine.subjects.push(id),
          };
          return withWriteHook(hook, () =>
            store.write(async (tx) => {
              await tx.putDesired("eu", "deployment", `d-${i}`, bytes(i), 1, "env-1");
              await noteWriteSubject(tx, `subject-${i}`);
            }),
          );
        }),
      );
      seen.forEach((mine, i) => {
        assert.equal(mine.begun, 1, `write ${i} began once`);
        assert.equal(mine.committed.length, 1, `write ${i} committed once`);
        assert.deepEqual(mine.subjects, [`subject-${i}`], `write ${i} told only its own hook`);
      });
      assert.ok((await transactions(store)) < 12, "some of them shared a transaction");
    } finally {
      await close();
    }
  });

  it("a write that waits longer than WRITE_WAIT_MS for a slot is refused; the one holding the slot still commits", async () => {
    const url = await server.newDatabase();
    const { store, close } = await countingStore(url, 1);
    const locker = new pg.Client({ connectionString: url });
    await locker.connect();
    try {
      await locker.query("BEGIN");
      await locker.query("LOCK TABLE desired_objects IN ACCESS EXCLUSIVE MODE");
      // The first takes the only slot and waits on the lock (its change goes with its COMMIT).
      const first = store.write((tx) => tx.putDesired("eu", "deployment", "first", bytes(1), 1, "env-1"));
      const started = Date.now();
      await assert.rejects(
        store.write((tx) => tx.putDesired("eu", "deployment", "second", bytes(2), 1, "env-1")),
        new RegExp(NO_WRITE_SLOT),
      );
      assert.ok(Date.now() - started >= WRITE_WAIT_MS - 100, "it waited for a slot first");
      await locker.query("COMMIT");
      await first;
      assert.deepEqual(
        (await readOutbox(store.db, "eu", "deployment", 0, 10)).map((r) => r.objectId),
        ["first"],
      );
    } finally {
      await locker.end();
      await close();
    }
  });
});
