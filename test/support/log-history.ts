// The log history store's checks, run on SQLite (test/unit/ctrl/logs/history.test.ts) and on
// PostgreSQL (test/integration/ctrl/log-history.test.ts): a line stored twice is kept once; the
// cursors are each instance's last line; a search pages in time order, stops at the seam, filters
// by revision, region, instance and --grep; pruning removes lines past their workspace's retention
// (the default, or the workspace's own) and the oldest past an environment's bound. And the
// archive's leases (one replica per environment).
import assert from "node:assert/strict";
import type { Store } from "../../src/ctrl/db/store.js";
import {
  DAY_MS,
  logRetention,
  pruneLogs,
  searchHistory,
  setLogRetention,
  storedCursors,
  storeLines,
  type HistoryLine,
  type StoredLine,
} from "../../src/ctrl/logs/history.js";
import { InstanceCursors } from "../../src/ctrl/logs/seam.js";
import { forgetExpiredLeases, leaseEnvironments, leaseHolders, releaseLeases } from "../../src/ctrl/logs/lease.js";
import { grepOf, type Grep } from "../../src/ctrl/logs/grep.js";
import { grepPattern } from "../../src/ctrl/validate/logs.js";

const NOW = 1_800_000_000_000;
const ns = (ms: number, extra = 0): bigint => BigInt(ms) * 1_000_000n + BigInt(extra);

function line(over: Partial<StoredLine> & { ns: bigint }): StoredLine {
  return {
    environmentId: "env_a",
    workspaceId: "ws_a",
    region: "eu",
    instance: "web-1",
    deploymentId: "dep_1",
    revision: 1,
    stream: "",
    line: `line at ${over.ns}`,
    ...over,
  };
}

async function all(
  store: Store,
  q: { upTo: InstanceCursors; matcher?: Grep; instance?: string; deploymentIds?: string[]; sinceNs?: bigint },
): Promise<HistoryLine[]> {
  const out: HistoryLine[] = [];
  for await (const page of searchHistory(store.db, {
    environmentId: "env_a",
    sinceNs: q.sinceNs ?? 0n,
    deploymentIds: q.deploymentIds ?? [],
    regions: ["eu", "us"],
    instance: q.instance,
    matcher: q.matcher,
    upTo: q.upTo,
  }))
    out.push(...page);
  return out;
}

export async function checkLogHistory(store: Store): Promise<void> {
  const db = store.db;
  // Exact nanoseconds survive (they do not fit a double), and a line sent twice is kept once.
  const first = [
    line({ ns: ns(NOW - 3_000, 123_456) }),
    line({ ns: ns(NOW - 2_000, 999_999), line: "ERROR boom" }),
    line({ ns: ns(NOW - 1_000, 1), instance: "web-2", region: "us", deploymentId: "dep_2", revision: 2 }),
  ];
  assert.equal(await storeLines(db, first), 3);
  assert.equal(
    await storeLines(db, [...first, line({ ns: ns(NOW - 500, 7), line: "later" })]),
    1,
    "only the new line counts",
  );
  const cursors = await storedCursors(db, "env_a");
  assert.equal(cursors.get("eu/web-1"), ns(NOW - 500, 7));
  assert.equal(cursors.get("us/web-2"), ns(NOW - 1_000, 1));
  let got = await all(store, { upTo: cursors });
  assert.deepEqual(
    got.map((l) => [l.region, l.instance, l.ns, l.revision]),
    [
      ["eu", "web-1", ns(NOW - 3_000, 123_456), 1],
      ["eu", "web-1", ns(NOW - 2_000, 999_999), 1],
      ["us", "web-2", ns(NOW - 1_000, 1), 2],
      ["eu", "web-1", ns(NOW - 500, 7), 1],
    ],
    "each line once, in time order, at its exact time",
  );
  // The seam: lines after an instance's cursor are the live part's; an instance with none gives none.
  got = await all(store, { upTo: new InstanceCursors([["eu/web-1", ns(NOW - 2_000, 999_999)]]) });
  assert.deepEqual(
    got.map((l) => l.ns),
    [ns(NOW - 3_000, 123_456), ns(NOW - 2_000, 999_999)],
  );
  const pattern = grepPattern("/^error/i");
  assert.ok(typeof pattern !== "string");
  const grep = grepOf(pattern);
  try {
    assert.deepEqual(
      (await all(store, { upTo: cursors, matcher: grep })).map((l) => l.line),
      ["ERROR boom"],
    );
  } finally {
    grep.close();
  }
  assert.deepEqual(
    (await all(store, { upTo: cursors, deploymentIds: ["dep_2"] })).map((l) => l.instance),
    ["web-2"],
  );
  assert.deepEqual(
    (await all(store, { upTo: cursors, instance: "web-2" })).map((l) => l.revision),
    [2],
  );
  assert.equal((await all(store, { upTo: cursors, sinceNs: ns(NOW - 1_000) })).length, 2);

  // Pages: more lines than a page, every one found once, in order.
  const many = Array.from({ length: 12_345 }, (_, i) => line({ ns: ns(NOW - 100_000, i), instance: "busy" }));
  await storeLines(db, many);
  const busy = await all(store, { upTo: await storedCursors(db, "env_a"), instance: "busy" });
  assert.equal(busy.length, many.length);
  assert.ok(busy.every((l, i) => l.ns === ns(NOW - 100_000, i)));

  // Retention: the default (7 days) for one workspace, its own (1 day) for another.
  await storeLines(db, [
    line({ ns: ns(NOW - 8 * DAY_MS), instance: "old" }),
    line({ ns: ns(NOW - 6 * DAY_MS), instance: "old" }),
    line({ ns: ns(NOW - 2 * DAY_MS), environmentId: "env_b", workspaceId: "ws_b" }),
    line({ ns: ns(NOW - 3_600_000), environmentId: "env_b", workspaceId: "ws_b" }),
  ]);
  assert.deepEqual(await logRetention(db, "ws_b"), { ms: 7 * DAY_MS, own: false });
  await setLogRetention(db, "ws_b", DAY_MS, NOW);
  await setLogRetention(db, "ws_b", DAY_MS, NOW);
  assert.deepEqual(await logRetention(db, "ws_b"), { ms: DAY_MS, own: true });
  let pruned = await pruneLogs(db, NOW, 1_000_000);
  assert.deepEqual(pruned, { expired: 2, overflow: 0 });
  assert.deepEqual(
    (await all(store, { upTo: await storedCursors(db, "env_a"), instance: "old" })).map((l) => l.ns),
    [ns(NOW - 6 * DAY_MS)],
  );
  assert.equal((await storedCursors(db, "env_b")).get("eu/web-1"), ns(NOW - 3_600_000));
  // The bound: past maxLines an environment loses its oldest lines, and only those.
  const before = (await all(store, { upTo: await storedCursors(db, "env_a") })).map((l) => l.ns);
  pruned = await pruneLogs(db, NOW, 100);
  assert.equal(pruned.expired, 0);
  const after = (await all(store, { upTo: await storedCursors(db, "env_a") })).map((l) => l.ns);
  assert.equal(after.length, 100);
  assert.deepEqual(after, before.slice(-100), "the newest 100 are kept");
  await setLogRetention(db, "ws_b", undefined, NOW);
  assert.equal((await logRetention(db, "ws_b")).own, false);
}

/**
 * The archive's leases: one holder per environment; its renewals keep it; another takes it only
 * once it expired (or was given up), and the first then holds it no more. `clock` is the store's
 * (the test moves it).
 */
export async function checkArchiveLeases(store: Store, clock: { now: number }): Promise<void> {
  const db = store.db;
  const TTL = 15_000;
  assert.deepEqual([...(await leaseEnvironments(store, "a", ["env_1", "env_2"], TTL))].sort(), ["env_1", "env_2"]);
  // b gets only what a does not hold.
  assert.deepEqual([...(await leaseEnvironments(store, "b", ["env_2", "env_3"], TTL))], ["env_3"]);
  clock.now += TTL - 1;
  // a renews (just in time); b still waits.
  assert.deepEqual([...(await leaseEnvironments(store, "a", ["env_1", "env_2"], TTL))].sort(), ["env_1", "env_2"]);
  clock.now += TTL - 1;
  assert.deepEqual([...(await leaseEnvironments(store, "b", ["env_1", "env_2", "env_3"], TTL))], ["env_3"]);
  // a stops renewing env_2: it is b's once the lease ended, and a does not get it back.
  clock.now += 1;
  assert.deepEqual([...(await leaseEnvironments(store, "a", ["env_1"], TTL))], ["env_1"]);
  clock.now += TTL;
  assert.deepEqual([...(await leaseEnvironments(store, "b", ["env_2"], TTL))], ["env_2"]);
  assert.deepEqual([...(await leaseEnvironments(store, "a", ["env_1", "env_2"], TTL))], ["env_1"]);
  assert.deepEqual([...(await leaseHolders(db, clock.now))].sort(), [
    ["env_1", "a"],
    ["env_2", "b"],
  ]);
  // A replica that stops gives its leases up: the other takes them at once.
  await releaseLeases(db, "a");
  assert.deepEqual([...(await leaseEnvironments(store, "b", ["env_1"], TTL))], ["env_1"]);
  // Ended leases are forgotten (a replica that renews them no more: their environments are gone).
  clock.now += TTL + 1;
  assert.equal(await forgetExpiredLeases(db, clock.now), 3);
  assert.equal((await leaseHolders(db, clock.now)).size, 0);
}
