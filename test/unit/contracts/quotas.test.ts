// A workspace's quotas: the spelling (`krane quota set`, `--default-quota`), the use of
// environments at their maximum, and when a change passes a limit.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import {
  aboveCeiling,
  BUILT_IN_DEFAULTS,
  effectiveLimits,
  exceeded,
  exceededMessage,
  parseQuotaList,
  parseQuotaValue,
  QUOTA_NAMES,
  settingText,
  UNLIMITED,
  usageOf,
  type EnvironmentReach,
  type Limits,
  type QuotaName,
  type Usage,
  buildAllowance,
  buildMinutesUsed,
  monthStartMs,
} from "../../../src/contracts/quotas.js";

test("values are read in the units people write", () => {
  assert.deepEqual(parseQuotaValue("cpu", "2"), { kind: "limit", value: 2000 });
  assert.deepEqual(parseQuotaValue("cpu", "0.5"), { kind: "limit", value: 500 });
  assert.deepEqual(parseQuotaValue("cpu", "250m"), { kind: "limit", value: 250 });
  assert.deepEqual(parseQuotaValue("memory", "512"), { kind: "limit", value: 512 });
  assert.deepEqual(parseQuotaValue("memory", "512Mi"), { kind: "limit", value: 512 });
  assert.deepEqual(parseQuotaValue("memory", "4Gi"), { kind: "limit", value: 4096 });
  assert.deepEqual(parseQuotaValue("memory", "1.5Gi"), { kind: "limit", value: 1536 });
  assert.deepEqual(parseQuotaValue("instances", "0"), { kind: "limit", value: 0 });
  assert.deepEqual(parseQuotaValue("build_minutes", "600"), { kind: "limit", value: 600 });
  assert.deepEqual(parseQuotaValue("previews", "unlimited"), { kind: "unlimited" });
  assert.deepEqual(parseQuotaValue("previews", "default"), { kind: "default" });
});

test("a malformed value is refused naming its quota", () => {
  for (const [name, v] of [
    ["cpu", "2 cores"],
    ["cpu", "-1"],
    ["cpu", "0.0005"],
    ["memory", "4GB"],
    ["memory", "0.3"],
    ["instances", "1.5"],
    ["environments", ""],
    ["previews", "ten"],
  ] as [QuotaName, string][])
    assert.throws(() => parseQuotaValue(name, v), new RegExp(`^Error: ${name}: `), `${name}=${v}`);
  assert.throws(() => parseQuotaValue("instances", "2000000000"), /instances: .*largest limit/);
});

test("a list names each quota once, known names only", () => {
  const l = parseQuotaList("cpu=4, memory=8Gi,build-minutes=100,previews=unlimited");
  assert.deepEqual(
    [...l],
    [
      ["cpu", { kind: "limit", value: 4000 }],
      ["memory", { kind: "limit", value: 8192 }],
      ["build_minutes", { kind: "limit", value: 100 }],
      ["previews", { kind: "unlimited" }],
    ],
  );
  assert.equal(parseQuotaList("").size, 0);
  assert.throws(() => parseQuotaList("cpu=1,cpu=2"), /cpu: given twice/);
  assert.throws(() => parseQuotaList("gpus=1"), /"gpus" is not a quota/);
  assert.throws(() => parseQuotaList("cpu"), /expected name=value/);
});

test("a setting's text reads back as the same setting (what the CLI sends ctrl)", () => {
  const setting = fc.oneof(
    fc.nat({ max: 1_000_000 }).map((value) => ({ kind: "limit" as const, value })),
    fc.constant({ kind: "unlimited" as const }),
    fc.constant({ kind: "default" as const }),
  );
  fc.assert(
    fc.property(fc.constantFrom(...QUOTA_NAMES), setting, (q, s) => {
      assert.deepEqual(parseQuotaValue(q, settingText(q, s)), s);
    }),
  );
});

const env = (regions: [number, number | null][], cpu: number, memory: number, preview = false): EnvironmentReach => ({
  preview,
  regions: regions.map(([replicas, autoscaleMax]) => ({ replicas, autoscaleMax })),
  cpuMillicores: cpu,
  memoryMib: memory,
});

test("use counts each environment at its maximum in every region", () => {
  const u = usageOf([
    // 2 replicas in one region, autoscaling up to 5 in another (running 1 now).
    env(
      [
        [2, null],
        [1, 5],
      ],
      500,
      256,
    ),
    // Not deployed yet: its instances count, its resources are none yet.
    env([[3, null]], 0, 0),
    env([[1, null]], 250, 128, true),
  ]);
  assert.deepEqual(u, { cpu: 7 * 500 + 250, memory: 7 * 256 + 128, instances: 11, environments: 2, previews: 1 });
});

const reach = fc.record({
  preview: fc.boolean(),
  regions: fc.array(
    fc.record({ replicas: fc.nat({ max: 50 }), autoscaleMax: fc.option(fc.integer({ min: 1, max: 50 })) }),
    { maxLength: 4 },
  ),
  cpuMillicores: fc.nat({ max: 8000 }),
  memoryMib: fc.nat({ max: 16384 }),
});

test("use is additive over environments, and autoscaling counts its max, never the replicas", () => {
  fc.assert(
    fc.property(fc.array(reach, { maxLength: 6 }), fc.array(reach, { maxLength: 6 }), (a, b) => {
      const ua = usageOf(a);
      const ub = usageOf(b);
      const both = usageOf([...a, ...b]);
      for (const k of Object.keys(both) as (keyof Usage)[]) assert.equal(both[k], ua[k] + ub[k]);
      // Raising any region's replicas under autoscaling changes nothing.
      const raised = a.map((e) => ({
        ...e,
        regions: e.regions.map((r) => (r.autoscaleMax === null ? r : { ...r, replicas: r.replicas + 7 })),
      }));
      assert.deepEqual(usageOf(raised), ua);
    }),
  );
});

const usage = fc.record({
  cpu: fc.nat({ max: 100_000 }),
  memory: fc.nat({ max: 100_000 }),
  instances: fc.nat({ max: 1000 }),
  environments: fc.nat({ max: 100 }),
  previews: fc.nat({ max: 100 }),
});
const limits: fc.Arbitrary<Limits> = fc.record({
  cpu: fc.option(fc.nat({ max: 100_000 })),
  memory: fc.option(fc.nat({ max: 100_000 })),
  instances: fc.option(fc.nat({ max: 1000 })),
  environments: fc.option(fc.nat({ max: 100 })),
  previews: fc.option(fc.nat({ max: 100 })),
  build_minutes: fc.option(fc.nat({ max: 100 })),
});

test("a change is refused exactly when it grows a quantity past its limit", () => {
  fc.assert(
    fc.property(usage, usage, limits, (before, after, l) => {
      const e = exceeded(before, after, l);
      const passes = (Object.keys(after) as (keyof Usage)[]).filter(
        (k) => l[k] !== null && after[k] > l[k] && after[k] > before[k],
      );
      if (passes.length === 0) return assert.equal(e, null);
      assert.ok(e);
      // The first in the order quotas are shown, with the amounts.
      assert.equal(e.quota, passes[0]);
      assert.equal(e.used, before[e.quota as keyof Usage]);
      assert.equal(e.used + e.asked, after[e.quota as keyof Usage]);
      assert.equal(e.limit, l[e.quota]);
    }),
  );
});

test("a workspace over a lowered limit may shrink or stay, never grow", () => {
  const l: Limits = { ...UNLIMITED, cpu: 1000 };
  const over: Usage = { cpu: 3000, memory: 0, instances: 3, environments: 1, previews: 0 };
  assert.equal(exceeded(over, { ...over, cpu: 2000 }, l), null);
  assert.equal(exceeded(over, over, l), null);
  assert.deepEqual(exceeded(over, { ...over, cpu: 3500 }, l), { quota: "cpu", used: 3000, asked: 500, limit: 1000 });
  // Exactly at the limit fits.
  assert.equal(exceeded({ ...over, cpu: 0 }, { ...over, cpu: 1000 }, l), null);
});

test("the refusal names the quota, the use, what is asked and the limit", () => {
  assert.equal(
    exceededMessage("acme", { quota: "memory", used: 768, asked: 512, limit: 1024 }),
    'workspace "acme" would pass its memory quota: it uses 768 MiB, this change asks 512 MiB more, the limit is 1024 MiB (krane quota get acme)',
  );
});

test("a workspace's own setting wins over the installation's default; unset falls back", () => {
  const defaults: Limits = { ...BUILT_IN_DEFAULTS, cpu: 8000 };
  const l = effectiveLimits(
    { cpu: undefined, memory: 4096, instances: null, environments: undefined, previews: 3, build_minutes: undefined },
    defaults,
  );
  assert.deepEqual(l, {
    cpu: 8000,
    memory: 4096,
    instances: null,
    environments: null,
    previews: 3,
    build_minutes: null,
  });
  assert.equal(BUILT_IN_DEFAULTS.previews, 10);
});

test("a workspace cannot set itself above the installation's default", () => {
  const defaults: Limits = { ...UNLIMITED, cpu: 8000 };
  assert.equal(aboveCeiling(parseQuotaList("cpu=8,memory=unlimited,instances=1000"), defaults), null);
  assert.equal(aboveCeiling(parseQuotaList("cpu=default"), defaults), null);
  assert.deepEqual(aboveCeiling(parseQuotaList("cpu=9"), defaults), { quota: "cpu", asked: 9000, ceiling: 8000 });
  assert.deepEqual(aboveCeiling(parseQuotaList("cpu=unlimited"), defaults), {
    quota: "cpu",
    asked: null,
    ceiling: 8000,
  });
});

test("build minutes: each build's time in this month, rounded up per build; additive; never more than the month holds", () => {
  const now = Date.UTC(2026, 10, 20, 12, 0, 0);
  assert.equal(monthStartMs(now), Date.UTC(2026, 10, 1));
  assert.equal(monthStartMs(Date.UTC(2026, 11, 31, 23, 59, 59)), Date.UTC(2026, 11, 1));
  assert.equal(
    buildMinutesUsed([{ startedAtMs: now - 61_000, finishedAtMs: now - 60_000 }], now),
    1,
    "1 s is a minute",
  );
  assert.equal(buildMinutesUsed([{ startedAtMs: now - 120_000, finishedAtMs: now - 60_000 }], now), 1);
  assert.equal(buildMinutesUsed([{ startedAtMs: now - 120_001, finishedAtMs: now }], now), 3);
  assert.equal(buildMinutesUsed([{ startedAtMs: now - 90_000, finishedAtMs: null }], now), 2, "running: so far");
  const month = monthStartMs(now);
  assert.equal(buildMinutesUsed([{ startedAtMs: month - 600_000, finishedAtMs: month - 1 }], now), 0, "last month's");
  assert.equal(buildMinutesUsed([{ startedAtMs: month - 600_000, finishedAtMs: month + 30_000 }], now), 1);
  const build = fc
    .tuple(fc.integer({ min: month - 3_600_000, max: now }), fc.integer({ min: 0, max: 3_600_000 }), fc.boolean())
    .map(([start, len, done]) => ({ startedAtMs: start, finishedAtMs: done ? Math.min(start + len, now) : null }));
  fc.assert(
    fc.property(fc.array(build, { maxLength: 20 }), fc.array(build, { maxLength: 20 }), (a, b) => {
      const all = buildMinutesUsed([...a, ...b], now);
      assert.equal(all, buildMinutesUsed(a, now) + buildMinutesUsed(b, now));
      // At most one minute of rounding per build beyond the exact time in the month.
      const exact = [...a, ...b].reduce(
        (s, x) => s + Math.max(0, (x.finishedAtMs ?? now) - Math.max(x.startedAtMs, month)) / 60_000,
        0,
      );
      assert.ok(all >= exact && all < exact + a.length + b.length + 1e-9);
    }),
  );
});

test("a build's allowance: the time limit, capped at the minutes left with the quota as reason, refused at none", () => {
  const limit = 15 * 60_000;
  assert.deepEqual(buildAllowance("acme", null, 10_000, limit), { ok: true, timeoutMs: limit });
  assert.deepEqual(buildAllowance("acme", 100, 10, limit), { ok: true, timeoutMs: limit });
  const capped = buildAllowance("acme", 100, 95, limit);
  assert.ok(capped.ok);
  assert.equal(capped.timeoutMs, 5 * 60_000);
  assert.match(capped.cappedBy ?? "", /build_minutes quota is 100 minutes/);
  for (const used of [100, 130]) {
    const refused = buildAllowance("acme", 100, used, limit);
    assert.equal(refused.ok, false);
    assert.ok(!refused.ok);
    assert.match(refused.message, new RegExp(`used its build_minutes quota: ${used} of 100`));
  }
});
