// How the dashboard writes times, states and figures, and how long a stream waits to reconnect.
// live.ts loads api.ts, whose transport is built from the page's location: the minimal DOM has one.
import "./dom.js";
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { InstanceStatus } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { ago, figure, latency, statusName } from "../../../src/dashboard/format.js";
import { backoffMs } from "../../../src/dashboard/live.js";
import { all } from "../../../src/dashboard/paging.js";

describe("dashboard formatting", () => {
  const now = 1_800_000_000_000;
  it("writes how long ago in the largest whole unit, and 0 as never", () => {
    assert.equal(ago(0, now), "never");
    assert.equal(ago(0n, now), "never");
    assert.equal(ago(now - 59_000, now), "59s ago");
    assert.equal(ago(BigInt(now - 60_000), now), "1m ago");
    assert.equal(ago(now - 3_599_000, now), "60m ago");
    assert.equal(ago(now - 3_600_000, now), "1h ago");
    assert.equal(ago(now - 86_400_000 * 3, now), "3d ago");
    // A clock a little ahead of the browser's is "0s ago", not a negative time.
    assert.equal(ago(now + 5_000, now), "0s ago");
  });

  it("names instance states without the enum's prefix", () => {
    assert.equal(statusName(InstanceStatus.RUNNING), "running");
    assert.equal(statusName(InstanceStatus.FAILED), "failed");
    assert.equal(statusName(999 as InstanceStatus), "unknown");
  });

  it("writes a latency bound, and past the last bucket as more than 30 s", () => {
    assert.equal(latency(undefined), "");
    assert.equal(latency(250), "≤ 250 ms");
    assert.equal(latency(-1), "> 30 s");
  });

  it("writes a chart's figure with no more digits than it needs", () => {
    assert.equal(figure(1234.5), "1235");
    assert.equal(figure(12.345), "12.3");
    assert.equal(figure(0.1234), "0.12");
    // Counts (instances, restarts) read as counts.
    assert.equal(figure(2), "2");
    assert.equal(figure(0), "0");
  });

  it("waits 0.25 s after the first failed try, doubling up to 5 s", () => {
    assert.deepEqual(
      [0, 1, 2, 3, 4, 5, 10, 1_000].map(backoffMs),
      [250, 500, 1_000, 2_000, 4_000, 5_000, 5_000, 5_000],
    );
  });

  it("follows List pages until the last, or until the page limit", async () => {
    const pages: Record<string, { items: number[]; next: string }> = {
      "": { items: [1, 2], next: "b" },
      b: { items: [3], next: "c" },
      c: { items: [4], next: "" },
    };
    const asked: string[] = [];
    const page = async (token: string) => {
      asked.push(token);
      const p = pages[token];
      if (!p) throw new Error(`no page ${token}`);
      return p;
    };
    assert.deepEqual(await all(page), [1, 2, 3, 4]);
    assert.deepEqual(asked, ["", "b", "c"]);
    assert.deepEqual(await all(page, 2), [1, 2, 3]);
  });
});
