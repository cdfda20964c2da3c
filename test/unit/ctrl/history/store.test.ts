// The metrics history in a real (in-memory SQLite) ctrl database: minutes add up when the same
// series comes twice, a 17th series in an environment's full minute is dropped, the rollup turns
// minutes into hours with every sum kept (and replaces, not adds, when run again), the rollup
// part's sweep finds the hours to compute, and pruning removes minutes past 7 days and hours past
// 30 while keeping what is within.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Store } from "../../../../src/ctrl/db/store.js";
import { HistoryRollup } from "../../../../src/ctrl/history/rollup.js";
import {
  addMinutes,
  hoursToRoll,
  minutePoints,
  pruneHistory,
  readPoints,
  rollupHour,
} from "../../../../src/ctrl/history/store.js";
import {
  HOUR_MS,
  MAX_SERIES_PER_ENVIRONMENT,
  MINUTE_MS,
  emptySums,
  mergeSums,
  type Point,
} from "../../../../src/ctrl/history/sums.js";

const H0 = 1_800_000_000_000 - (1_800_000_000_000 % HOUR_MS);

function point(over: Partial<Point> & { requests?: number; slot?: number }): Point {
  const sums = emptySums();
  sums.requests = over.requests ?? 10;
  sums.errors = 1;
  sums.latency[over.slot ?? 4] = sums.requests;
  sums.restarts = 1;
  return {
    environmentId: over.environmentId ?? "env_a",
    deploymentId: over.deploymentId ?? "dep_1",
    region: over.region ?? "eu",
    instance: over.instance ?? "",
    atMs: over.atMs ?? H0,
    sums: over.sums ?? sums,
  };
}

describe("metrics history store", () => {
  let store: Store;
  let now = H0;
  before(async () => {
    store = await Store.open({ url: ":memory:" }, { clock: () => now });
  });
  after(async () => {
    await store.close();
  });

  it("adds to a minute; drops a series past the environment's bound", async () => {
    await addMinutes(store.db, [point({}), point({ region: "us" })]);
    await addMinutes(store.db, [point({ requests: 5, slot: 6 })]);
    const pts = await readPoints(store.db, { environmentId: "env_a", stepMs: MINUTE_MS, fromMs: H0 });
    const eu = pts.find((p) => p.region === "eu");
    assert.equal(eu?.sums.requests, 15);
    assert.equal(eu?.sums.errors, 2);
    assert.equal(eu?.sums.latency[4], 10);
    assert.equal(eu?.sums.latency[6], 5);
    const many = Array.from({ length: MAX_SERIES_PER_ENVIRONMENT + 3 }, (_, i) =>
      point({ environmentId: "env_b", deploymentId: `dep_${i}` }),
    );
    assert.equal(await addMinutes(store.db, many), 3);
    const b = await readPoints(store.db, { environmentId: "env_b", stepMs: MINUTE_MS, fromMs: H0 });
    assert.equal(b.length, MAX_SERIES_PER_ENVIRONMENT);
    // A series already there is still added to in a full minute.
    assert.equal(await addMinutes(store.db, [point({ environmentId: "env_b", deploymentId: "dep_0" })]), 0);
    assert.equal((await minutePoints(store.db, H0)).length, 2 + MAX_SERIES_PER_ENVIRONMENT);
  });

  it("rolls minutes up into an hour, replacing on a second run", async () => {
    const minutes = Array.from({ length: 60 }, (_, m) =>
      point({ environmentId: "env_c", atMs: H0 + HOUR_MS + m * MINUTE_MS, requests: m + 1, slot: m % 15 }),
    );
    await addMinutes(store.db, minutes);
    // One minute of the next hour stays out.
    await addMinutes(store.db, [point({ environmentId: "env_c", atMs: H0 + 2 * HOUR_MS })]);
    // Hours are rolled up in order (as the part does).
    assert.equal(await rollupHour(store.db, H0), 2 + MAX_SERIES_PER_ENVIRONMENT);
    assert.equal(await rollupHour(store.db, H0 + HOUR_MS), 1);
    assert.equal(await rollupHour(store.db, H0 + HOUR_MS), 1);
    const hours = await readPoints(store.db, { environmentId: "env_c", stepMs: HOUR_MS, fromMs: 0 });
    assert.equal(hours.length, 1);
    assert.deepEqual(hours[0]?.sums, mergeSums(minutes.map((m) => m.sums)));
    assert.equal(hours[0]?.sums.requests, (60 * 61) / 2);
  });

  it("the rollup part computes the finished hours, and prunes by age", async () => {
    now = H0 + 5 * HOUR_MS + 10 * MINUTE_MS;
    // After the newest hour stored, those with minutes (none in the 4th hour: it is skipped).
    assert.deepEqual(await hoursToRoll(store.db, now, HOUR_MS, 48), [
      H0 + 2 * HOUR_MS,
      H0 + 3 * HOUR_MS,
      H0 + 4 * HOUR_MS,
    ]);
    const part = new HistoryRollup({ store, lateMs: HOUR_MS, sweepIntervalMs: 0 });
    part.start();
    await part.sweep();
    const a = await readPoints(store.db, { environmentId: "env_a", stepMs: HOUR_MS, fromMs: 0 });
    assert.equal(a.length, 2);
    assert.equal(a.find((p) => p.region === "eu")?.sums.requests, 15);
    assert.equal((await readPoints(store.db, { environmentId: "env_c", stepMs: HOUR_MS, fromMs: 0 })).length, 2);
    // Settled hours are not computed again; the ones a late report may still change are.
    assert.deepEqual(await hoursToRoll(store.db, now, HOUR_MS, 48), []);
    await addMinutes(store.db, [point({ environmentId: "env_c", atMs: H0 + 4 * HOUR_MS + 59 * MINUTE_MS })]);
    assert.deepEqual(await hoursToRoll(store.db, now, HOUR_MS, 48), [H0 + 4 * HOUR_MS]);
    await part.sweep();
    assert.equal((await readPoints(store.db, { environmentId: "env_c", stepMs: HOUR_MS, fromMs: 0 })).length, 3);

    // 7 days later the minutes of the first hours are gone, their hours are kept.
    now = H0 + 7 * 24 * HOUR_MS + HOUR_MS + 30 * MINUTE_MS;
    await pruneHistory(store.db, now);
    const minutes = await readPoints(store.db, { environmentId: "env_c", stepMs: MINUTE_MS, fromMs: 0 });
    assert.ok(minutes.every((m) => m.atMs >= now - 7 * 24 * HOUR_MS));
    assert.ok(minutes.length > 0 && minutes.length < 61, String(minutes.length));
    assert.equal((await readPoints(store.db, { environmentId: "env_c", stepMs: HOUR_MS, fromMs: 0 })).length, 3);
    // 30 days later the hours go too.
    now = H0 + 30 * 24 * HOUR_MS + 5 * HOUR_MS + 1;
    await pruneHistory(store.db, now);
    assert.deepEqual(await readPoints(store.db, { environmentId: "env_c", stepMs: HOUR_MS, fromMs: 0 }), []);
    assert.deepEqual(await readPoints(store.db, { environmentId: "env_a", stepMs: HOUR_MS, fromMs: 0 }), []);
    await part.stop();
  });
});
