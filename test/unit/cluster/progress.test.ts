// Build progress: durations read as a person would, each step says how many are left and the
// time so far, and a long step keeps saying it is still running.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { Progress, formatDuration } from "../../../src/cluster/progress.js";

describe("formatDuration", () => {
  it("formats seconds, minutes and hours", () => {
    assert.equal(formatDuration(0), "0s");
    assert.equal(formatDuration(44_600), "45s");
    assert.equal(formatDuration(60_000), "1m00s");
    assert.equal(formatDuration(185_000), "3m05s");
    assert.equal(formatDuration(3_725_000), "1h02m");
    assert.equal(formatDuration(-5), "0s");
  });

  it("never goes backwards as time grows", () => {
    const seconds = (s: string): number => {
      const m = /^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/.exec(s);
      assert.ok(m, s);
      return Number(m[1] ?? 0) * 3600 + Number(m[2] ?? 0) * 60 + Number(m[3] ?? 0);
    };
    fc.assert(
      fc.property(fc.nat(10 * 3600 * 1000), fc.nat(3600 * 1000), (a, d) => {
        assert.ok(seconds(formatDuration(a + d)) >= seconds(formatDuration(a)));
      }),
    );
  });
});

describe("Progress", () => {
  it("numbers the steps and says how many are left and the elapsed time", async () => {
    let now = 0;
    const lines: string[] = [];
    const p = new Progress(3, { log: (l) => lines.push(l), now: () => now, heartbeatMs: 0 });
    await p.step("downloading Go modules", async () => void (now += 30_000));
    await p.step("building etcd", async () => void (now += 90_000));
    const out = await p.step("building kubectl", async () => 42);
    assert.equal(out, 42);
    assert.deepEqual(lines, [
      "[1/3] downloading Go modules (2 more after this, 0s elapsed)",
      "[2/3] building etcd (1 more after this, 30s elapsed)",
      "[3/3] building kubectl (last step, 2m00s elapsed)",
    ]);
  });

  it("says a long step is still running, and stops saying it when the step ends or fails", async () => {
    const lines: string[] = [];
    const p = new Progress(1, { log: (l) => lines.push(l), heartbeatMs: 20 });
    const still = (): string[] => lines.filter((l) => l.includes("… still building kube-apiserver"));
    // The step fails once it has heard two heartbeats (however slow the machine), so the test
    // waits on what it checks rather than on a time budget.
    await assert.rejects(
      p.step(
        "building kube-apiserver",
        () =>
          new Promise((_, reject) => {
            const poll = setInterval(() => {
              if (still().length < 2) return;
              clearInterval(poll);
              reject(new Error("boom"));
            }, 5);
          }),
      ),
      /boom/,
    );
    assert.ok(still().length >= 2, lines.join("\n"));
    const count = lines.length;
    await new Promise((r) => setTimeout(r, 60));
    assert.equal(lines.length, count, "no heartbeat after the step ended");
  });
});
