// The usage reader's pure core: the metrics API's figures per pod, a pod as an instance, and the
// minutes a reader keeps (restarts counted once from a baseline, figures added per minute,
// minutes dropped once acknowledged or past the bound).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { LABEL_DEPLOYMENT_ID, LABEL_ENVIRONMENT_ID } from "../../../../src/contracts/labels.js";
import {
  MAX_PENDING_MINUTES,
  MINUTE_MS,
  UsageMinutes,
  instanceOf,
  useByPod,
} from "../../../../src/agent/usage/minutes.js";
import { usageReport } from "../../../../src/agent/usage/reader.js";

const T0 = 1_800_000_000_000 - (1_800_000_000_000 % MINUTE_MS);

function pod(name: string, restarts: number[], dep = "dep_1") {
  return {
    metadata: {
      name,
      namespace: "ws-acme",
      labels: { [LABEL_ENVIRONMENT_ID]: "env_1", [LABEL_DEPLOYMENT_ID]: dep },
    },
    status: { containerStatuses: restarts.map((restartCount) => ({ restartCount })) },
  };
}

function seen(name: string, restartCount: number) {
  const i = instanceOf(pod(name, [restartCount]));
  assert.ok(i);
  return i;
}

describe("usage minutes", () => {
  it("reads CPU and memory per pod; leaves out a pod with a figure that is not a quantity", () => {
    const use = useByPod([
      {
        metadata: { name: "a", namespace: "ws" },
        containers: [{ usage: { cpu: "250m", memory: "64Mi" } }, { usage: { cpu: "3000000n", memory: "1Ki" } }],
      },
      { metadata: { name: "b", namespace: "ws" }, containers: [{ usage: { cpu: "lots", memory: "1Mi" } }] },
      { metadata: { name: "c", namespace: "ws" }, containers: [] },
      { metadata: { namespace: "ws" }, containers: [{ usage: { cpu: "1", memory: "1" } }] },
    ]);
    assert.deepEqual([...use.keys()], ["ws/a"]);
    assert.equal(use.get("ws/a")?.cpuMillicores, 253);
    assert.equal(use.get("ws/a")?.memoryBytes, 64 * 2 ** 20 + 1024);
  });

  it("a pod is an instance with its revision and its containers' restarts added up", () => {
    assert.deepEqual(instanceOf(pod("web-1", [2, 3])), {
      key: "ws-acme/web-1",
      environmentId: "env_1",
      deploymentId: "dep_1",
      instance: "web-1",
      restartCount: 5,
    });
    assert.equal(instanceOf({ metadata: { name: "x", labels: { [LABEL_ENVIRONMENT_ID]: "env_1" } } }), undefined);
  });

  it("counts restarts from the first round's baseline, a new pod's all of them, each once", () => {
    const m = new UsageMinutes();
    m.observe(T0, [seen("old", 4)], undefined);
    assert.deepEqual(m.pending(), [], "the baseline is not a restart");
    m.observe(T0 + 10_000, [seen("old", 6), seen("new", 2)], undefined);
    m.observe(T0 + 20_000, [seen("old", 6), seen("new", 2)], undefined);
    const [minute] = m.pending();
    assert.equal(minute?.instances.get("ws-acme/old")?.restarts, 2);
    assert.equal(minute?.instances.get("ws-acme/new")?.restarts, 2);
    assert.equal(minute?.instances.get("ws-acme/new")?.readings, 0, "no figure without the metrics API");
  });

  it("adds the figures into the round's minute; forgets the minutes that ended before an acknowledged round", () => {
    const m = new UsageMinutes();
    const use = new Map([["ws-acme/a", { cpuMillicores: 100, memoryBytes: 1000 }]]);
    m.observe(T0 + 1_000, [seen("a", 0)], use);
    m.observe(T0 + 31_000, [seen("a", 0)], use);
    m.observe(T0 + MINUTE_MS + 1_000, [seen("a", 0)], use);
    const report = usageReport("eu", m.pending());
    assert.equal(report?.region, "eu");
    assert.deepEqual(
      report?.minutes.map((x) => [Number(x.minuteUnixMs), x.instances[0]?.cpuMillicoresSum, x.instances[0]?.readings]),
      [
        [T0, 200, 2],
        [T0 + MINUTE_MS, 100, 1],
      ],
    );
    m.acknowledged(T0 + MINUTE_MS + 1_000);
    assert.deepEqual(
      m.pending().map((x) => x.minuteMs),
      [T0 + MINUTE_MS],
      "the current minute is sent again as it fills",
    );
    assert.equal(usageReport("eu", []), undefined);
  });

  it("keeps at most MAX_PENDING_MINUTES while ctrl does not acknowledge", () => {
    const m = new UsageMinutes();
    const use = new Map([["ws-acme/a", { cpuMillicores: 1, memoryBytes: 1 }]]);
    for (let i = 0; i < MAX_PENDING_MINUTES + 5; i++) m.observe(T0 + i * MINUTE_MS, [seen("a", 0)], use);
    const pending = m.pending();
    assert.equal(pending.length, MAX_PENDING_MINUTES);
    assert.equal(pending[0]?.minuteMs, T0 + 5 * MINUTE_MS, "the oldest go first");
  });

  it("property: the restarts reported add up to each pod's increase after the baseline", () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.nat({ max: 3 }), { minLength: 3, maxLength: 3 }), { minLength: 1, maxLength: 30 }),
        (steps) => {
          const m = new UsageMinutes();
          const counts = [1, 0, 7];
          const first = [...counts];
          steps.forEach((inc, round) => {
            if (round > 0) inc.forEach((d, i) => (counts[i] = (counts[i] ?? 0) + d));
            m.observe(
              T0 + round * 20_000,
              counts.map((c, i) => seen(`p${i}`, c)),
              undefined,
            );
          });
          const reported = [0, 1, 2].map((i) =>
            m.pending().reduce((n, x) => n + (x.instances.get(`ws-acme/p${i}`)?.restarts ?? 0), 0),
          );
          // At most 10 minutes are kept: 30 rounds of 20 s stay within them.
          assert.deepEqual(
            reported,
            counts.map((c, i) => c - (first[i] ?? 0)),
          );
        },
      ),
    );
  });
});
