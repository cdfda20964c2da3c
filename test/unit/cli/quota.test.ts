// `krane quota get`'s table: each quota's use and limit in its unit, whose limit it is, and a
// workspace over a limit set below its use marked as such.
import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { quotaRow } from "../../../src/cli/quota.js";
import { QuotaSchema } from "../../../src/gen/krane/ctrl/v1/quota_pb.js";

test("a row shows use against the limit, and OVER past it", () => {
  const row = (init: Parameters<typeof create<typeof QuotaSchema>>[1]) => quotaRow(create(QuotaSchema, init));
  assert.deepEqual(row({ name: "cpu", used: 1500n, limit: 2000n, own: true }), [
    "cpu",
    "1500m",
    "2000m",
    "workspace",
    "",
  ]);
  assert.deepEqual(row({ name: "memory", used: 4096n, limit: 2048n }), [
    "memory",
    "4096 MiB",
    "2048 MiB",
    "default",
    "OVER",
  ]);
  assert.deepEqual(row({ name: "instances", used: 3n }), ["instances", "3", "unlimited", "default", ""]);
  assert.deepEqual(row({ name: "build_minutes", limit: 600n, own: true }), [
    "build_minutes",
    "-",
    "600",
    "workspace",
    "",
  ]);
});
