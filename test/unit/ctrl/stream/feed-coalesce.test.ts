// Unit tests of the feed's coalesced outbox reads, with an in-memory outbox: a poke
// after a quiet spell is read at once, pokes inside the coalescing window wait for one later
// read, and nothing is ever lost or reordered by the coalescing.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ChangeNotifier, Poke } from "../../../../src/ctrl/db/notify.js";
import type { OutboxChange } from "../../../../src/ctrl/db/outbox.js";
import { FeedHub, type FeedSource } from "../../../../src/ctrl/stream/feed.js";

/** An outbox in memory that counts its reads. */
class MemoryOutbox implements FeedSource {
  rows: OutboxChange[] = [];
  reads = 0;
  append(): number {
    const version = this.rows.length + 1;
    this.rows.push({
      region: "r",
      kind: "deployment",
      version,
      objectId: `dep_${version}`,
      op: "apply",
      payload: new Uint8Array([version % 256]),
    });
    return version;
  }
  async position(): Promise<{ head: number; compactedThrough: number }> {
    return { head: this.rows.length, compactedThrough: 0 };
  }
  async readOutbox(_region: string, _kind: string, after: number, limit: number): Promise<OutboxChange[]> {
    this.reads++;
    return this.rows.filter((r) => r.version > after).slice(0, limit);
  }
}

class Notifier implements ChangeNotifier {
  private listeners: ((p: Poke | null) => void)[] = [];
  publishLocal(pokes: readonly Poke[]): void {
    for (const p of pokes) for (const l of this.listeners) l(p);
  }
  subscribe(listener: (poke: Poke | null) => void): () => void {
    this.listeners.push(listener);
    return () => (this.listeners = this.listeners.filter((l) => l !== listener));
  }
  publishChangesLocal(): void {}
  subscribeChanges(): () => void {
    return () => undefined;
  }
  healthy(): boolean {
    return true;
  }
  async close(): Promise<void> {}
}

const ticks = async (n: number): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

describe("StreamFeed coalescing", () => {
  it("reads a poke after a quiet spell at once, and holds later pokes for one read after the window", async () => {
    const outbox = new MemoryOutbox();
    const notifier = new Notifier();
    // A window far longer than the test: anything read inside it was read at once.
    const hub = new FeedHub(outbox, notifier, { safetyIntervalMs: 0, coalesceMs: 1e9 });
    const { feed, release } = await hub.acquire("deployment", "r");
    try {
      const first = feed.nextChange();
      notifier.publishLocal([{ kind: "deployment", region: "r", version: outbox.append() }]);
      await first;
      assert.equal(outbox.reads, 1);
      assert.deepEqual(feed.read(0, 10), outbox.rows);
      for (let i = 0; i < 5; i++)
        notifier.publishLocal([{ kind: "deployment", region: "r", version: outbox.append() }]);
      await ticks(20);
      assert.equal(outbox.reads, 1, "pokes inside the window wait");
      assert.equal(feed.head, 1);
    } finally {
      // Closing ends the wait (no timer left behind: the test would not end otherwise).
      release();
      hub.close();
    }
  });

  it("delivers every change in order under a stream of pokes", async () => {
    const outbox = new MemoryOutbox();
    const notifier = new Notifier();
    const hub = new FeedHub(outbox, notifier, { safetyIntervalMs: 0, coalesceMs: 2 });
    const { feed, release } = await hub.acquire("deployment", "r");
    try {
      const seen: number[] = [];
      const n = 300;
      const reader = (async () => {
        while (seen.length < n) {
          const next = feed.nextChange();
          const batch = feed.read(seen.length, 1000);
          if (batch === "miss") throw new Error("the tail lost rows");
          for (const c of batch) seen.push(c.version);
          if (batch.length === 0) await next;
        }
      })();
      for (let i = 0; i < n; i++) {
        notifier.publishLocal([{ kind: "deployment", region: "r", version: outbox.append() }]);
        if (i % 7 === 0) await ticks(1);
      }
      await reader;
      assert.deepEqual(
        seen,
        Array.from({ length: n }, (_, i) => i + 1),
      );
      assert.ok(outbox.reads < n, `${outbox.reads} reads for ${n} changes`);
    } finally {
      release();
      hub.close();
    }
  });
});
