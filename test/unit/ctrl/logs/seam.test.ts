// The seam between kept and live lines, and the archive's "kept already": a cursor per instance.
// Properties over any instances' lines, any prefix of each kept, any of them still running, a
// live read from liveSince: kept lines up to the seam and live lines after it show every line
// from `since` on exactly once (a deleted instance shows what was kept); an archive that hears
// overlapping re-reads (a reconnect asks again from an earlier time) takes each line once.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { InstanceCursors, sourceKey } from "../../../../src/ctrl/logs/seam.js";
import { grepPattern } from "../../../../src/ctrl/validate/logs.js";

/** Instances, each with its lines' distinct times in order, how many were kept, whether it runs. */
const world = fc.array(
  fc.record({
    times: fc
      .uniqueArray(fc.bigInt({ min: 1n, max: 10_000n }), { maxLength: 30 })
      .map((t) => t.sort((a, b) => (a < b ? -1 : 1))),
    keptShare: fc.double({ min: 0, max: 1, noNaN: true }),
    running: fc.boolean(),
  }),
  { minLength: 1, maxLength: 6 },
);

describe("log seam", () => {
  it("an instance without a cursor has nothing seen; admit moves the cursor, isNew does not", () => {
    const c = new InstanceCursors([["eu/a", 10n]]);
    assert.equal(c.isNew("eu/a", 10n), false);
    assert.equal(c.isNew("eu/a", 11n), true);
    assert.equal(c.isNew("eu/b", 1n), true);
    assert.equal(c.admit("eu/a", 12n), true);
    assert.equal(c.admit("eu/a", 12n), false, "the same line twice");
    assert.equal(c.admit("eu/a", 11n), false, "an earlier line");
    assert.equal(c.liveSince(["eu/a"], 0n), 12n);
    assert.equal(c.liveSince(["eu/a", "eu/b"], 5n), 5n, "an instance without a cursor: from the floor");
    assert.equal(c.liveSince(["eu/a"], 20n), 20n, "never before the floor");
    assert.equal(c.liveSince([], 7n), 7n);
  });

  it("property: kept lines up to the seam, then live ones, show each line from `since` once", () => {
    fc.assert(
      fc.property(world, fc.bigInt({ min: 0n, max: 10_000n }), (instances, since) => {
        const keys = instances.map((_, i) => sourceKey("eu", `pod-${i}`));
        const kept = instances.map((x) => x.times.slice(0, Math.floor(x.times.length * x.keptShare)));
        // The seam: each instance's last kept line.
        const seam = new InstanceCursors(
          kept.flatMap((k, i) => (k.length === 0 ? [] : [[keys[i] as string, k[k.length - 1] as bigint] as const])),
        );
        const shown = new Map<string, bigint[]>();
        const show = (key: string, ns: bigint): void => void shown.set(key, [...(shown.get(key) ?? []), ns]);
        // History: kept lines from since, up to the seam.
        kept.forEach((k, i) => {
          for (const ns of k) if (ns >= since && !seam.isNew(keys[i] as string, ns)) show(keys[i] as string, ns);
        });
        // Live: the running instances' lines from liveSince (the kubelet's read), later than the seam.
        const running = keys.filter((_, i) => instances[i]?.running);
        const liveSince = seam.liveSince(running, since);
        instances.forEach((x, i) => {
          if (!x.running) return;
          for (const ns of x.times)
            if (ns >= liveSince && ns >= since && seam.isNew(keys[i] as string, ns)) show(keys[i] as string, ns);
        });
        instances.forEach((x, i) => {
          const key = keys[i] as string;
          const want = (x.running ? x.times : (kept[i] as bigint[])).filter((ns) => ns >= since);
          assert.deepEqual(shown.get(key) ?? [], want, `${key} (${x.running ? "running" : "gone"})`);
        });
      }),
      { numRuns: 1000 },
    );
  });

  it("property: re-reads from earlier times (reconnects) are archived once each", () => {
    fc.assert(
      fc.property(world, fc.array(fc.nat({ max: 40 }), { maxLength: 5 }), (instances, restarts) => {
        const c = new InstanceCursors();
        const taken = new Map<number, bigint[]>();
        // A first read, then re-reads each from an earlier position, as a reconnect would ask.
        const starts = [0, ...restarts];
        for (const start of starts)
          instances.forEach((x, i) => {
            for (const ns of x.times.slice(Math.min(start, x.times.length)))
              if (c.admit(sourceKey("eu", `pod-${i}`), ns)) taken.set(i, [...(taken.get(i) ?? []), ns]);
          });
        instances.forEach((x, i) => assert.deepEqual(taken.get(i) ?? [], x.times));
      }),
    );
  });

  it("streams: a merged cursor covers both; a merged line is seen up to where both were; a stream without a cursor reads from the floor", () => {
    const c = new InstanceCursors([
      ["eu/a", 10n, ""],
      ["eu/b", 20n, "stdout"],
      ["eu/b", 15n, "stderr"],
      ["eu/c", 30n, "stdout"],
    ]);
    assert.equal(c.isNew("eu/a", 9n, "stderr"), false, "kept merged before streams were");
    assert.equal(c.isNew("eu/a", 11n, "stderr"), true);
    assert.equal(c.isNew("eu/b", 17n, "stderr"), true, "stderr is behind stdout");
    assert.equal(c.isNew("eu/b", 17n, "stdout"), false);
    assert.equal(c.isNew("eu/b", 16n, ""), true, "a merged line may be stderr's");
    assert.equal(c.isNew("eu/b", 15n, ""), false);
    assert.equal(c.liveSince(["eu/a", "eu/b"], 0n), 10n);
    assert.equal(c.liveSince(["eu/b"], 0n), 15n, "from the stream furthest behind");
    assert.equal(c.liveSince(["eu/c"], 3n), 3n, "c's stderr has no cursor: from the floor");
    assert.equal(c.admit("eu/b", 16n, "stderr"), true);
    assert.equal(c.admit("eu/b", 16n, "stderr"), false);
  });

  it("property: two streams read apart, each kept to its own point: kept then live lines show each line once", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            lines: fc
              .uniqueArray(fc.bigInt({ min: 1n, max: 10_000n }), { maxLength: 30 })
              .map((t) => t.sort((a, b) => (a < b ? -1 : 1)))
              .chain((t) =>
                fc.tuple(fc.constant(t), fc.array(fc.boolean(), { minLength: t.length, maxLength: t.length })),
              ),
            keptShare: fc.tuple(fc.double({ min: 0, max: 1, noNaN: true }), fc.double({ min: 0, max: 1, noNaN: true })),
            running: fc.boolean(),
          }),
          { minLength: 1, maxLength: 5 },
        ),
        fc.bigInt({ min: 0n, max: 10_000n }),
        (instances, since) => {
          type L = { ns: bigint; stream: "stdout" | "stderr" };
          const all = instances.map(({ lines: [times, err] }) =>
            times.map((ns, j): L => ({ ns, stream: err[j] ? "stderr" : "stdout" })),
          );
          // Each stream's kept prefix is its own (the two are archived apart).
          const kept = all.map((ls, i) =>
            (["stdout", "stderr"] as const).flatMap((s, k) => {
              const of = ls.filter((l) => l.stream === s);
              return of.slice(0, Math.floor(of.length * (instances[i]?.keptShare[k] ?? 0)));
            }),
          );
          const seam = new InstanceCursors(
            kept.flatMap((k, i) =>
              (["stdout", "stderr"] as const).flatMap((s) => {
                const last = k.filter((l) => l.stream === s).at(-1);
                return last ? [[`eu/pod-${i}`, last.ns, s] as const] : [];
              }),
            ),
          );
          const running = instances.flatMap((x, i) => (x.running ? [`eu/pod-${i}`] : []));
          const liveSince = seam.liveSince(running, since);
          instances.forEach((x, i) => {
            const key = `eu/pod-${i}`;
            const shown: bigint[] = [];
            for (const l of kept[i] ?? []) if (l.ns >= since && !seam.isNew(key, l.ns, l.stream)) shown.push(l.ns);
            if (x.running)
              for (const l of all[i] ?? [])
                if (l.ns >= liveSince && l.ns >= since && seam.isNew(key, l.ns, l.stream)) shown.push(l.ns);
            const want = (x.running ? (all[i] ?? []) : (kept[i] ?? [])).map((l) => l.ns).filter((ns) => ns >= since);
            assert.deepEqual(
              shown.sort((a, b) => (a < b ? -1 : 1)),
              want.sort((a, b) => (a < b ? -1 : 1)),
              key,
            );
          });
        },
      ),
      { numRuns: 1000 },
    );
  });

  it("--grep: text as is, /regex/flags, and a clear error for a bad one", () => {
    assert.deepEqual(grepPattern("a.b"), { text: "a.b" }, "text is not a pattern");
    assert.deepEqual(grepPattern("/^err(or)? \\d+$/i"), { source: "^err(or)? \\d+$", flags: "i" });
    assert.match(String(grepPattern("/(/")), /not a valid regular expression/);
    assert.match(String(grepPattern("x".repeat(300))), /at most 256/);
    assert.deepEqual(grepPattern("/half"), { text: "/half" }, "an unclosed slash is text");
  });
});
