// The live views' core: a Follower reads once per burst of hints (coalesced), readers take only
// the newest value, a failed read is retried while readers keep what they have, a FinalError ends
// every reader; the overview feed hands each stream only what changed since its last version, the
// whole when it is new, and names removed environments.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { EnvironmentSummarySchema, type EnvironmentSummary } from "../../../../src/gen/krane/ctrl/v1/live_pb.js";
import { FinalError, Follower } from "../../../../src/ctrl/live/follower.js";
import { OverviewFeed, type LiveSource } from "../../../../src/ctrl/live/hub.js";
import { decodeChanges, encodeChanges } from "../../../../src/ctrl/db/notify.js";

const never = new AbortController().signal;

/** A signal aborted after `ms` (a timer that keeps the test process alive, unlike AbortSignal.timeout's). */
function after(ms: number): AbortSignal {
  const c = new AbortController();
  setTimeout(() => c.abort(), ms);
  return c.signal;
}

describe("Follower", () => {
  it("reads at once, coalesces a burst of hints into one more read, and gives readers the newest value", async () => {
    let reads = 0;
    // The first read is held until the burst has come, so the burst arrives while a read is in
    // flight whatever the machine's load (a burst after a quiet spell is read at once, and what
    // comes during that read makes one more).
    let release = (): void => undefined;
    const held = new Promise<void>((r) => (release = r));
    const f = new Follower(
      async () => {
        if (++reads === 1) await held;
        return reads;
      },
      { coalesceMs: 30, slowMs: 1_000 },
    );
    for (let i = 0; i < 50; i++) f.poke(true);
    release();
    const first = await f.next(0, never);
    assert.equal(first?.value, 1);
    const second = await f.next(first?.version ?? 0, never);
    assert.equal(second?.value, 2);
    // The burst was one read: nothing more comes without a new hint.
    const quiet = after(200);
    assert.equal(await f.next(2, quiet), undefined);
    assert.equal(reads, 2);
    f.close();
  });

  it("retries a failed read while readers keep the value they have; a FinalError ends them", async () => {
    let n = 0;
    const f = new Follower(
      async () => {
        n++;
        if (n === 2) throw new Error("database away");
        if (n === 4) throw new FinalError(new Error("environment gone"));
        return n;
      },
      { coalesceMs: 0, slowMs: 0 },
    );
    assert.equal((await f.next(0, never))?.value, 1);
    f.poke();
    // Read 2 failed, read 3 (the retry) answered.
    assert.equal((await f.next(1, never))?.value, 3);
    f.poke();
    await assert.rejects(f.next(2, never), /environment gone/);
    f.close();
  });

  it("reads slow hints (heartbeats) at most once per slowMs", async () => {
    let reads = 0;
    const f = new Follower(async () => ++reads, { coalesceMs: 0, slowMs: 60_000 });
    await f.next(0, never);
    f.poke(false);
    assert.equal(await f.next(1, after(200)), undefined);
    // An urgent hint is read at once, taking the slow one with it.
    f.poke(true);
    assert.equal((await f.next(1, never))?.value, 2);
    f.close();
  });
});

function summary(id: string, workspaceId = "ws_a"): EnvironmentSummary {
  return create(EnvironmentSummarySchema, { environmentId: id, workspaceId, environment: id });
}

describe("OverviewFeed", () => {
  it("sends the whole first, then only what changed, and removals", async () => {
    const rows = new Map([
      ["env_1", summary("env_1")],
      ["env_2", summary("env_2")],
      ["env_3", summary("env_3", "ws_other")],
    ]);
    const asked: (readonly string[] | undefined)[] = [];
    const source: LiveSource = {
      environment: () => Promise.reject(new Error("unused")),
      summaries: async (ids) => {
        asked.push(ids);
        return [...rows.values()].filter((s) => ids === undefined || ids.includes(s.environmentId));
      },
      clusters: async () => [],
    };
    const feed = new OverviewFeed(source, { coalesceMs: 0, slowMs: 0 });
    const mine = (s: EnvironmentSummary) => s.workspaceId === "ws_a";
    const first = await feed.next(0, mine, never);
    assert.ok(first?.reset);
    assert.deepEqual(first.upserts.map((s) => s.environmentId).sort(), ["env_1", "env_2"]);
    rows.set("env_2", create(EnvironmentSummarySchema, { ...summary("env_2"), state: "progressing" }));
    rows.delete("env_1");
    feed.environmentsChanged(["env_1", "env_2"]);
    const d = await feed.next(first.version, mine, never);
    assert.equal(d?.reset, false);
    assert.deepEqual(
      d.upserts.map((s) => [s.environmentId, s.state]),
      [["env_2", "progressing"]],
    );
    assert.deepEqual(d.removed, ["env_1"]);
    // Only the named environments were read again.
    assert.deepEqual(asked.at(-1), ["env_1", "env_2"]);
    // Another workspace's environment changes: this stream gets nothing of it.
    feed.environmentsChanged(["env_3"]);
    const other = await feed.next(d.version, mine, never);
    assert.deepEqual(other?.upserts, []);
    feed.close();
  });
});

describe("change topics on the wire", () => {
  it("round-trip, and too many become 'anything changed'", () => {
    assert.deepEqual(decodeChanges(encodeChanges(["e:env_1", "c:eu"])), ["e:env_1", "c:eu"]);
    assert.equal(decodeChanges(encodeChanges(Array.from({ length: 1_000 }, (_, i) => `e:env_${i}abcdef`))), null);
    assert.deepEqual(decodeChanges("e:env_1 junk x:y"), ["e:env_1"]);
  });
});
