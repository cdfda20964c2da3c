// The quotas page's rows: each quota's use against its limit in the CLI's words, the share of the
// limit it uses, and its state's tone (over is bad, at the limit a warning, unlimited muted).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { QuotaSchema } from "../../../src/gen/krane/ctrl/v1/quota_pb.js";
import { percentText, quotaRows, quotaTone } from "../../../src/dashboard/views/quotas-model.js";

const quota = (init: Parameters<typeof create<typeof QuotaSchema>>[1]) => create(QuotaSchema, init);

describe("quota rows", () => {
  it("writes use and limit as krane quota get does, with the share and the state", () => {
    const [cpu, memory, instances, previews, build] = quotaRows([
      quota({ name: "cpu", unit: "millicores", limit: 4000n, used: 3000n, own: true }),
      quota({ name: "memory", unit: "MiB", limit: 1024n, used: 1024n, own: false }),
      quota({ name: "instances", unit: "instances", limit: 2n, used: 3n, own: true }),
      quota({ name: "previews", unit: "previews", used: 1n, own: false }),
      quota({ name: "build_minutes", unit: "minutes per month", limit: 600n, own: false }),
    ]);
    assert.deepEqual(cpu, {
      name: "cpu",
      used: "3000m",
      limit: "4000m",
      setBy: "workspace",
      state: "",
      percent: 75,
      stateText: "within",
    });
    assert.deepEqual(
      [memory?.used, memory?.limit, memory?.setBy, memory?.stateText],
      ["1024 MiB", "1024 MiB", "default", "full"],
    );
    // A limit set below use is kept and shown as over.
    assert.deepEqual([instances?.percent, instances?.stateText], [150, "over"]);
    assert.deepEqual([previews?.limit, previews?.percent, previews?.stateText], ["unlimited", null, "unlimited"]);
    assert.deepEqual([build?.used, build?.percent, build?.stateText], ["-", null, "not counted"]);
    assert.deepEqual(
      [cpu, memory, instances, previews, build].map((r) => (r ? quotaTone(r) : "")),
      ["ok", "warn", "bad", "muted", "muted"],
    );
    assert.deepEqual(
      [cpu, instances, previews].map((r) => (r ? percentText(r) : "")),
      ["75%", "150%", "-"],
    );
  });

  it("a limit of 0: nothing used is full, anything used is over", () => {
    const [none, some] = quotaRows([
      quota({ name: "environments", limit: 0n, used: 0n, own: true }),
      quota({ name: "environments", limit: 0n, used: 1n, own: true }),
    ]);
    assert.deepEqual([none?.stateText, none ? percentText(none) : ""], ["full", "100%"]);
    assert.deepEqual([some?.stateText, some ? percentText(some) : ""], ["over", "over"]);
  });

  it("no quota from ctrl: no rows (the table's empty state)", () => {
    assert.deepEqual(quotaRows([]), []);
  });
});
