// Exactly-once, in-order delivery of outbox changes, as a property over random concurrent
// writers, on real SQLite and real PostgreSQL (with LISTEN/NOTIFY).
//
// Per run: several writers commit transactions touching random regions concurrently (with
// random pauses inside their transactions, so PostgreSQL really overlaps them). A live watcher
// follows each region from the start; readers join mid-way from cursors taken from the live
// stream, and after the writers finish, from random cursors. Every reader must receive exactly
// the changes after its cursor: each committed change once, in version order, versions dense.
// The streams run with a keepalive of a few milliseconds, so bookmarks fall between the changes:
// each must name exactly the last version its watcher was given (0 before a snapshot's end).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import fc from "fast-check";
import { Store } from "../../../src/ctrl/db/store.js";
import { FeedHub } from "../../../src/ctrl/stream/feed.js";
import { storeFeedSource, watchBatches } from "../../../src/ctrl/stream/watch.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { tempDir } from "./support.js";

interface WriteOp {
  regions: number[];
  objects: number;
  del: boolean;
  pauseMs: number;
}

const writeOp: fc.Arbitrary<WriteOp> = fc.record({
  regions: fc.uniqueArray(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 3 }),
  objects: fc.integer({ min: 1, max: 3 }),
  del: fc.boolean(),
  pauseMs: fc.integer({ min: 0, max: 3 }),
});

interface Scenario {
  writers: WriteOp[][];
  cursorPicks: number[];
  midwayReaders: number;
}

const scenario: fc.Arbitrary<Scenario> = fc.record({
  writers: fc.array(fc.array(writeOp, { minLength: 1, maxLength: 8 }), { minLength: 2, maxLength: 5 }),
  cursorPicks: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 1, maxLength: 4 }),
  midwayReaders: fc.integer({ min: 0, max: 3 }),
});

interface Seen {
  version: number;
  label: string;
}

/** Bookmarks that did not name the last version their watcher was given; bookmarks seen. */
const bookmarkProblems: string[] = [];
let bookmarksSeen = 0;

/** A watcher collecting changes until stopped. */
class Reader {
  readonly out: Seen[] = [];
  last = 0;
  /** Set when the watcher started with a snapshot (cursor 0): changes then follow this head. */
  snapshotHead: number | null = null;
  private readonly ac = new AbortController();
  readonly done: Promise<void>;
  /** Resolves once the watcher is following the stream (after its snapshot, if it took one). */
  readonly following: Promise<void>;
  private nowFollowing: () => void = () => undefined;

  constructor(store: Store, hub: FeedHub, region: string, cursor: number) {
    this.last = cursor;
    this.following = new Promise((resolve) => (this.nowFollowing = resolve));
    if (cursor > 0) this.nowFollowing();
    this.done = (async () => {
      for await (const batch of watchBatches(store, hub, {
        kind: "deployment",
        region,
        cursor,
        signal: this.ac.signal,
        keepaliveMs: 3,
      })) {
        for (const ev of batch) {
          if (ev.type === "bookmark") {
            bookmarksSeen++;
            // 0: no position yet (a snapshot follows or is being read); else the last version given.
            const ok = ev.version === this.last || (ev.version === 0 && this.snapshotHead === null);
            if (!ok) bookmarkProblems.push(`${region}: bookmark at ${ev.version}, last given ${this.last}`);
          } else if (ev.type === "change") {
            this.out.push({ version: ev.change.version, label: Buffer.from(ev.change.payload).toString("utf8") });
            this.last = ev.change.version;
          } else if (ev.type === "snapshot_end") {
            this.last = ev.head;
            this.snapshotHead = ev.head;
            this.nowFollowing();
          }
        }
      }
    })();
  }

  /** Waits until the reader has seen `version`, then stops it. */
  async until(version: number): Promise<Seen[]> {
    const deadline = Date.now() + 20_000;
    while (this.last < version) {
      if (Date.now() > deadline) throw new Error(`reader stuck at ${this.last}, expected ${version}`);
      await sleep(2);
    }
    this.ac.abort();
    await this.done;
    return this.out;
  }
}

let runCounter = 0;

async function runScenario(store: Store, hub: FeedHub, s: Scenario): Promise<void> {
  const run = ++runCounter;
  const regions = [0, 1, 2].map((i) => `r${run}-${i}-${Math.random().toString(36).slice(2, 6)}`);
  // Live watchers start at version 0 of fresh regions and take their (empty) snapshot before
  // the writes start, so every committed change must reach them as a change, versions 1..n. (A
  // watcher that joined later would get the early changes inside its snapshot instead: the
  // midway readers below cover that.)
  const live = regions.map((r) => new Reader(store, hub, r, 0));
  await Promise.all(live.map((r) => r.following));
  assert.deepEqual(
    live.map((r) => r.snapshotHead),
    [0, 0, 0],
  );

  const committed: { region: number; label: string; writer: number; seq: number }[] = [];
  let seq = 0;
  const writers = s.writers.map(async (ops, w) => {
    for (const [k, op] of ops.entries()) {
      const labels: { region: number; label: string }[] = [];
      await store.write(async (tx) => {
        // PostgreSQL may abort a transaction (deadlock between two writers creating the counter
        // rows of new regions) and the store runs it again: only the last attempt counts.
        labels.length = 0;
        for (const r of op.regions) {
          for (let o = 0; o < op.objects; o++) {
            const label = `w${w}-op${k}-r${r}-o${o}`;
            const bytes = Buffer.from(label);
            const objectId = `obj-${w}-${o}`;
            if (op.del) {
              // Deletes only stream when the object existed; make sure it does.
              await tx.putDesired(regions[r] ?? "", "deployment", objectId, Buffer.from(`${label}-put`));
              labels.push({ region: r, label: `${label}-put` });
              await tx.removeDesired(regions[r] ?? "", "deployment", objectId, bytes);
            } else {
              await tx.putDesired(regions[r] ?? "", "deployment", objectId, bytes);
            }
            labels.push({ region: r, label });
          }
          if (op.pauseMs > 0) await sleep(op.pauseMs);
        }
      });
      for (const l of labels) committed.push({ ...l, writer: w, seq: seq++ });
    }
  });

  // Readers that join while writes are in flight, from whatever the live stream has reached.
  const midway: Promise<{ region: number; cursor: number; reader: Reader }>[] = [];
  for (let m = 0; m < s.midwayReaders; m++) {
    midway.push(
      (async () => {
        await sleep(2 + m * 3);
        const region = m % regions.length;
        const cursor = Number(
          (
            await store.db
              .selectFrom("stream_versions")
              .select("version")
              .where("region", "=", regions[region] ?? "")
              .where("kind", "=", "deployment")
              .executeTakeFirst()
          )?.version ?? 0,
        );
        return { region, cursor, reader: new Reader(store, hub, regions[region] ?? "", cursor) };
      })(),
    );
  }

  await Promise.all(writers);
  const counts = regions.map((_, i) => committed.filter((c) => c.region === i).length);
  const liveResults = await Promise.all(live.map((r, i) => r.until(counts[i] ?? 0)));

  for (const [i, got] of liveResults.entries()) {
    const expected = committed.filter((c) => c.region === i);
    // Dense versions 1..n, each committed change exactly once.
    assert.deepEqual(
      got.map((g) => g.version),
      expected.map((_, k) => k + 1),
      `region ${i}: versions`,
    );
    assert.deepEqual([...got.map((g) => g.label)].sort(), expected.map((e) => e.label).sort(), `region ${i}: labels`);
    // Each writer's changes arrive in the order that writer committed them.
    for (let w = 0; w < s.writers.length; w++) {
      const mine = got.filter((g) => g.label.startsWith(`w${w}-`)).map((g) => g.label);
      const order = expected.filter((e) => e.writer === w).map((e) => e.label);
      assert.deepEqual(mine, order, `region ${i}, writer ${w}: order`);
    }
  }

  for (const m of await Promise.all(midway)) {
    const full = liveResults[m.region] ?? [];
    const got = await m.reader.until(counts[m.region] ?? 0);
    // A reader that joined before its region's first commit (cursor 0) starts with a snapshot.
    const from = m.reader.snapshotHead ?? m.cursor;
    assert.equal(m.reader.snapshotHead !== null, m.cursor === 0);
    assert.deepEqual(
      got,
      full.filter((g) => g.version > from),
      `midway reader of region ${m.region} from ${from}`,
    );
  }

  // Readers resuming from arbitrary cursors after the fact.
  for (const [k, pick] of s.cursorPicks.entries()) {
    const region = k % regions.length;
    const full = liveResults[region] ?? [];
    const cursor = Math.min(full.length, Math.max(1, Math.floor(pick * (full.length + 1))));
    if (full.length === 0) continue;
    const got = await new Reader(store, hub, regions[region] ?? "", cursor).until(counts[region] ?? 0);
    assert.deepEqual(
      got,
      full.filter((g) => g.version > cursor),
      `resume of region ${region} from ${cursor}`,
    );
  }
  assert.deepEqual(bookmarkProblems.splice(0), [], "bookmarks name the last version given");
}

function suite(
  name: string,
  open: () => Promise<{ url: string; cleanup: () => Promise<void> }>,
  numRuns: number,
): void {
  describe(`exactly-once, in-order delivery (${name})`, () => {
    let store: Store;
    let hub: FeedHub;
    let cleanup: () => Promise<void>;
    before(async () => {
      const o = await open();
      cleanup = o.cleanup;
      store = await Store.open({ url: o.url });
      hub = new FeedHub(storeFeedSource(store), store.notifier, { safetyIntervalMs: 0 });
    });
    after(async () => {
      hub?.close();
      await store?.close();
      await cleanup?.();
    });
    it("every reader gets exactly the committed changes after its cursor, in version order", async () => {
      const before = bookmarksSeen;
      await fc.assert(
        fc.asyncProperty(scenario, (s) => runScenario(store, hub, s)),
        { numRuns },
      );
      assert.ok(bookmarksSeen - before > numRuns, `bookmarks fell between the changes (${bookmarksSeen - before})`);
    });
  });
}

suite(
  "SQLite",
  async () => {
    const dir = tempDir();
    return { url: join(dir.path, "ctrl.db"), cleanup: async () => dir.remove() };
  },
  40,
);

let pgServer: TestPostgres | undefined;
suite(
  "PostgreSQL",
  async () => {
    pgServer = await startPostgres();
    return { url: await pgServer.newDatabase(), cleanup: async () => pgServer?.stop() };
  },
  25,
);
