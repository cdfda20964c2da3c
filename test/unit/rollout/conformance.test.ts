// The conformance generator and comparator on their own (no Go harness): the generator is
// reproducible and produces valid inputs of every class; the comparator finds every kind of
// difference, and the intended differences explain only what they claim to.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { RolloutInputError, parseRolloutInput, planRollout } from "../../../src/rollout/index.js";
import type { RolloutInput, RolloutOutput } from "../../../src/rollout/index.js";
import { CLASSES, generateCase, generateCases } from "../../support/rollout-conformance/generator.js";
import { compareResults, int32Overflows, judge } from "../../support/rollout-conformance/compare.js";
import { deployment, input, rev } from "./helpers.js";

const kraneOf = (i: RolloutInput): RolloutOutput => planRollout(parseRolloutInput(structuredClone(i)));

describe("conformance generator", () => {
  it("gives the same case for the same seed and index, whatever the run's length", () => {
    const short = generateCases(7, 30);
    const long = generateCases(7, 300);
    assert.deepEqual(short, long.slice(0, 30));
    assert.deepEqual(generateCase(7, 123), long[123]);
    assert.notDeepEqual(generateCase(8, 123).input, generateCase(7, 123).input);
  });

  it("covers every class evenly with inputs the engine accepts (int32 may be refused, naming maxSurge)", () => {
    const cases = generateCases(1, 1000);
    const perClass = new Map<string, number>();
    let refused = 0;
    for (const c of cases) {
      perClass.set(c.class, (perClass.get(c.class) ?? 0) + 1);
      try {
        parseRolloutInput(structuredClone(c.input));
      } catch (err) {
        assert.ok(err instanceof RolloutInputError, String(err));
        assert.equal(c.class, "int32", `case ${c.index}: ${err.message}`);
        assert.equal(err.field, "deployment.strategy.rollingUpdate.maxSurge");
        refused++;
      }
    }
    assert.deepEqual([...perClass.keys()].sort(), [...CLASSES].sort());
    for (const n of perClass.values()) assert.equal(n, 100);
    assert.ok(refused > 0 && refused < 60, `refused ${refused}`);
  });

  it("varies what matters: strategies, fenceposts of both kinds, pauses, rollbacks, deadlines, history limits", () => {
    const inputs = generateCases(3, 600).map((c) => c.input);
    const d = inputs.map((i) => i.deployment);
    assert.ok(d.some((x) => x.strategy.type === "Recreate") && d.some((x) => x.strategy.type === "RollingUpdate"));
    const fences = d.flatMap((x) =>
      x.strategy.type === "RollingUpdate"
        ? [x.strategy.rollingUpdate.maxSurge, x.strategy.rollingUpdate.maxUnavailable]
        : [],
    );
    assert.ok(fences.some((f) => typeof f === "number") && fences.some((f) => typeof f === "string"));
    assert.ok(d.some((x) => x.paused) && d.some((x) => !x.paused));
    assert.ok(d.some((x) => x.rollbackTo === 0) && d.some((x) => (x.rollbackTo ?? 0) > 0));
    assert.ok(
      d.some((x) => x.progressDeadlineSeconds === null) &&
        d.some((x) => x.conditions.length === 0 && x.progressDeadlineSeconds !== null),
    );
    assert.ok(d.some((x) => x.conditions.some((c) => c.type === "Progressing")));
    assert.ok(d.some((x) => x.revisionHistoryLimit === 0) && d.some((x) => x.revisionHistoryLimit === null));
    assert.ok(d.some((x) => x.minReadySeconds > 0));
    assert.ok(d.some((x) => x.replicas > 2_000_000_000));
    assert.ok(inputs.some((i) => i.revisions.filter((r) => r.replicas > 0).length >= 3));
    assert.ok(inputs.some((i) => i.revisions.some((r) => r.name === i.deployment.target && r.revision === null)));
  });
});

describe("conformance comparator", () => {
  const base = input(deployment("v2", { progressDeadlineSeconds: 600 }), [
    rev("v1", 1, 10, { desired: 10, max: 13 }),
    rev("v2", null, 0),
  ]) as unknown as RolloutInput;
  const out = kraneOf(base);

  it("finds no difference between equal results", () => {
    assert.deepEqual(compareResults({ output: out }, { output: structuredClone(out) }), []);
  });

  it("finds each kind of difference", () => {
    const other = structuredClone(out);
    other.target = "v1";
    (other.revisions[1] as { replicas: number }).replicas = 4;
    other.delete = ["v1"];
    other.status.unavailableReplicas = 9;
    (other.conditions.find((c) => c.type === "Progressing") as { reason: string }).reason = "Other";
    other.events = [];
    other.requeueAfterSeconds = 3;
    const kinds = compareResults({ output: out }, { output: { ...other, syncError: "boom" } }).map((d) => d.kind);
    assert.deepEqual(kinds.sort(), [
      "condition.Progressing.reason",
      "delete",
      "events",
      "requeueAfterSeconds",
      "revision.replicas",
      "status.unavailableReplicas",
      "syncError",
      "target",
    ]);
    // Sizes of a revision deleted by either side are not compared; others are.
    const resized = structuredClone(out);
    (resized.revisions[1] as { replicas: number }).replicas = 4;
    assert.deepEqual(
      compareResults({ output: out }, { output: resized }).map((d) => [d.kind, d.where]),
      [["revision.replicas", "v2"]],
    );
  });

  it("reports a negative or oversized krane size even when Kubernetes says the same", () => {
    const bad = structuredClone(out);
    (bad.revisions[0] as { replicas: number }).replicas = -1;
    const v = judge(base, { output: bad }, { output: bad });
    assert.deepEqual(
      v.unexplained.map((d) => d.kind),
      ["krane.invalid"],
    );
  });

  it("explains Kubernetes deleting a revision a paused pass just scaled up from 0, and nothing else", () => {
    const revs = [rev("v1", 1, 0, { desired: 3, max: 4 }), rev("v2", 2, 0, { desired: 3, max: 4 }), rev("v3", null, 0)];
    const paused = input(
      deployment("v3", { paused: true, replicas: 3, revisionHistoryLimit: 0 }),
      revs,
    ) as unknown as RolloutInput;
    const k = kraneOf(paused);
    const kube = { ...structuredClone(k), delete: ["v1", "v2"] };
    assert.deepEqual(judge(paused, { output: k }, { output: kube }).intended, ["paused-cleanup-keeps-scaled-up"]);
    // Deleting a revision that was not just scaled up is not explained.
    const wrong = { ...structuredClone(k), delete: ["v1", "v3"] };
    assert.equal(judge(paused, { output: k }, { output: wrong }).unexplained.length, 1);
    // Nor is the same difference when the deployment is not paused.
    const running = structuredClone(paused);
    running.deployment.paused = false;
    assert.equal(judge(running, { output: k }, { output: kube }).unexplained.length, 1);
  });

  it("explains int32 differences only where the controller's int32 arithmetic overflows", () => {
    const small = input(deployment("v2", { replicas: 10 }), [
      rev("v1", 1, 10),
      rev("v2", 2, 0),
    ]) as unknown as RolloutInput;
    assert.equal(int32Overflows(small), false);
    const product = input(deployment("v2", { replicas: 50_000 }), [
      rev("v1", 1, 50_000),
      rev("v2", 2, 0),
    ]) as unknown as RolloutInput;
    assert.equal(int32Overflows(product), true, "50,000 × (50,000 + surge) passes 2^31−1");
    const sum = input(deployment("v2", { replicas: 1 }), [
      rev("v1", 1, 2_000_000_000, { status: [0, 0, 0] }),
      rev("v2", 2, 2_000_000_000, { status: [0, 0, 0] }),
    ]) as unknown as RolloutInput;
    assert.equal(int32Overflows(sum), true);
    const k = kraneOf(small);
    const kube = { ...structuredClone(k), status: { ...k.status, replicas: -5 } };
    assert.equal(judge(small, { output: k }, { output: kube }).unexplained.length, 1);
  });
});
