// The Manager starts parts in the order added, stops them in reverse, names the part (or step) a
// stop waits on, and cleans up when a start fails halfway.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Manager, onStop, part, type Runnable } from "../../../src/base/lifecycle.js";

function recorder(log: string[], name: string): Runnable {
  return part(
    name,
    () => void log.push(`start ${name}`),
    () => void log.push(`stop ${name}`),
  );
}

describe("Manager", () => {
  it("starts in the order added and stops in reverse, once", async () => {
    const log: string[] = [];
    const m = new Manager();
    for (const n of ["database", "api", "upkeep"]) m.add(recorder(log, n));
    await m.start();
    assert.equal(m.step(), "running");
    await Promise.all([m.stop(), m.stop()]);
    assert.deepEqual(log, ["start database", "start api", "start upkeep", "stop upkeep", "stop api", "stop database"]);
    assert.equal(m.step(), "stopped");
  });

  it("names the part, and the step within it, that a stop waits on", async () => {
    let release = (): void => undefined;
    const m = new Manager();
    m.add(onStop("database", () => undefined));
    m.add(
      onStop("api listener", async (step) => {
        step("open streams");
        await new Promise<void>((r) => (release = r));
      }),
    );
    await m.start();
    const stopping = m.stop();
    await new Promise((r) => setImmediate(r));
    assert.equal(m.step(), "open streams");
    release();
    await stopping;
    assert.equal(m.step(), "stopped");
  });

  it("a start that fails stops that part and the ones before it, and throws", async () => {
    const log: string[] = [];
    const m = new Manager();
    m.add(recorder(log, "database"));
    m.add(
      part(
        "log bus",
        () => Promise.reject(new Error("LISTEN refused")),
        () => void log.push("stop log bus"),
      ),
    );
    m.add(recorder(log, "api"));
    await assert.rejects(m.start(), /LISTEN refused/);
    assert.deepEqual(log, ["start database", "stop log bus", "stop database"]);
  });

  it("every part stops even when one fails to; the first failure is thrown", async () => {
    const log: string[] = [];
    const m = new Manager();
    m.add(recorder(log, "database"));
    m.add(
      onStop("hub", () => {
        throw new Error("hub stuck");
      }),
    );
    m.add(recorder(log, "api"));
    await m.start();
    await assert.rejects(m.stop(), /hub stuck/);
    assert.deepEqual(
      log.filter((l) => l.startsWith("stop")),
      ["stop api", "stop database"],
    );
  });

  it("refuses a part added after start", async () => {
    const m = new Manager();
    await m.start();
    assert.throws(() => m.add(onStop("late", () => undefined)), /late: added after the manager started/);
    await m.stop();
  });
});
