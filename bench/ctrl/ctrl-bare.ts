// Child process of bench/ctrl/ctrl.ts: the database's own limit, measured like ctrl but without it —
// a bare loop on the same database and client library, with the same paced writer.
//   PostgreSQL (argv: a postgres:// URL): one INSERT and one NOTIFY per transaction through a
//     `pg` pool as large as ctrl's (10); the 10 streams are LISTEN connections in the parent,
//     which receive each change in its notification.
//   SQLite (argv: a file path): one INSERT per transaction through better-sqlite3 with ctrl's
//     pragmas, then an in-process wake-up; the 10 streams are readers in this process that each
//     read the new rows by their own cursor when woken (a woken reader reads once per tick,
//     whatever number of wake-ups came meanwhile).
// IPC as bench/ctrl/ctrl-server.ts: {write, rate, seconds, warmupSeconds, mark} → {done, commits,
// stats?} (SQLite also answers the streams' delivery stats), {stop} → exit.
import { EventEmitter } from "node:events";
import { performance } from "node:perf_hooks";
import SQLite from "better-sqlite3";
import pg from "pg";
import { BARE_CHANNEL, deliveryStats, paced, type DeliveryStats, type WriteCommand } from "./ctrl-delivery.js";

type Command = WriteCommand | { type: "stop" };

const target = process.argv[2] ?? "";
const now = (): number => performance.timeOrigin + performance.now();
const STREAMS = 10;

interface Loop {
  /** Commits one change; SQLite answers its commit time (the write is synchronous). */
  write(value: number): Promise<number | void>;
  /** Receive times per stream of the values in [mark, mark + total], for SQLite's in-process streams. */
  collect?(mark: number, total: number): () => number[][];
  close(): Promise<void>;
}

async function postgresLoop(url: string): Promise<Loop> {
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  await pool.query(
    "CREATE TABLE IF NOT EXISTS bare_changes (id bigserial PRIMARY KEY, value bigint NOT NULL, payload bytea NOT NULL)",
  );
  // Open every connection first, as ctrl's pool does.
  const clients = await Promise.all(Array.from({ length: 10 }, () => pool.connect()));
  for (const c of clients) c.release();
  const payload = Buffer.alloc(300, 7); // about the size of an ApplyDeployment payload
  return {
    async write(value) {
      const c = await pool.connect();
      try {
        await c.query("BEGIN");
        const { rows } = await c.query<{ id: string }>(
          "INSERT INTO bare_changes (value, payload) VALUES ($1, $2) RETURNING id",
          [value, payload],
        );
        await c.query("SELECT pg_notify($1, $2)", [BARE_CHANNEL, `${rows[0]?.id ?? ""}:${value}`]);
        await c.query("COMMIT");
      } catch (err) {
        await c.query("ROLLBACK").catch(() => undefined);
        throw err;
      } finally {
        c.release();
      }
    },
    close: () => pool.end(),
  };
}

function sqliteLoop(path: string): Loop {
  const db = new SQLite(path);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("busy_timeout = 5000");
  db.exec(
    "CREATE TABLE IF NOT EXISTS bare_changes (id INTEGER PRIMARY KEY, value INTEGER NOT NULL, payload BLOB NOT NULL)",
  );
  const insert = db.prepare("INSERT INTO bare_changes (value, payload) VALUES (?, ?)");
  const insertOne = db.transaction((value: number, payload: Buffer) => insert.run(value, payload));
  const read = db.prepare("SELECT id, value FROM bare_changes WHERE id > ? ORDER BY id");
  const wake = new EventEmitter();
  wake.setMaxListeners(0);
  const payload = Buffer.alloc(300, 7);
  // The streams: each keeps its cursor and, once woken, reads everything new on the next tick.
  const received: Array<Map<number, number>> = [];
  for (let s = 0; s < STREAMS; s++) {
    const seen = new Map<number, number>();
    received.push(seen);
    let cursor = 0;
    let scheduled = false;
    wake.on("change", () => {
      if (scheduled) return;
      scheduled = true;
      setImmediate(() => {
        scheduled = false;
        for (const row of read.iterate(cursor) as Iterable<{ id: number; value: number }>) {
          cursor = row.id;
          if (!seen.has(row.value)) seen.set(row.value, now());
        }
      });
    });
  }
  return {
    async write(value) {
      insertOne(value, payload);
      const at = now();
      wake.emit("change");
      return at;
    },
    collect(mark, total) {
      for (const m of received) m.clear();
      return () =>
        received.map((m) => Array.from({ length: total + 1 }, (_, i) => (i === 0 ? 0 : (m.get(mark + i) ?? 0))));
    },
    async close() {
      db.close();
    },
  };
}

const loop = target.startsWith("postgres") ? await postgresLoop(target) : sqliteLoop(target);

process.on("message", (msg: Command) => {
  void (async () => {
    if (msg.type === "write") {
      if (msg.warmupSeconds > 0) await paced((v) => loop.write(v), msg.rate, msg.warmupSeconds, 0);
      const collected = loop.collect?.(msg.mark, msg.rate * msg.seconds);
      const run = await paced((v) => loop.write(v), msg.rate, msg.seconds, msg.mark);
      let stats: DeliveryStats | undefined;
      if (collected) {
        // Give the last wake-ups their tick before reading what the streams received.
        await new Promise((r) => setTimeout(r, 200));
        stats = deliveryStats(run.commits, collected());
      }
      process.send?.({ type: "done", commits: run.commits, lastCommitMs: run.lastCommitMs, stats });
    } else {
      await loop.close();
      process.disconnect?.();
      process.exit(0);
    }
  })();
});
process.send?.({ type: "ready" });
