// Process supervision of the local cluster's components: a component that dies at start is
// reported with the tail of its log, and stopping reaches the whole process group.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  ComponentStartError,
  isAlive,
  startComponent,
  stopPid,
  waitUntilHealthy,
} from "../../../src/cluster/process.js";
import { renderNodes, DEFAULT_NODE_PLAN, ZONES } from "../../../src/cluster/topology.js";
import { NODE_CLASS_LABEL as NODE_CLASS_KEY, ZONE_LABEL as ZONE_KEY } from "../../../src/contracts/cluster.js";

test("a component that exits during start fails with its exit code and the tail of its log", async () => {
  const dir = await mkdtemp(join(tmpdir(), "krane-proc-"));
  try {
    const c = startComponent({
      name: "broken",
      command: "sh",
      args: [
        "-c",
        "for i in $(seq 1 40); do echo line $i; done; echo 'listen tcp: bind: address already in use'; exit 3",
      ],
      logFile: join(dir, "broken.log"),
    });
    await assert.rejects(
      waitUntilHealthy(c, async () => false, 10_000),
      (err: unknown) => {
        assert.ok(err instanceof ComponentStartError);
        assert.equal(err.component, "broken");
        assert.match(err.message, /exit code 3/);
        assert.match(err.tail, /address already in use/);
        assert.doesNotMatch(err.tail, /^line 1$/m, "only the tail of the log is shown");
        return true;
      },
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("a component that never becomes healthy times out with its log tail", async () => {
  const dir = await mkdtemp(join(tmpdir(), "krane-proc-"));
  const c = startComponent({
    name: "slow",
    command: "sh",
    args: ["-c", "echo starting slowly; sleep 30"],
    logFile: join(dir, "slow.log"),
  });
  try {
    await assert.rejects(
      waitUntilHealthy(c, async () => false, 300),
      /slow was not healthy after 0.3s[\s\S]*starting slowly/,
    );
  } finally {
    await stopPid(c.pid);
    await rm(dir, { recursive: true, force: true });
  }
});

test("stopPid ends the whole process group, children included, even one that ignores SIGTERM", async () => {
  const dir = await mkdtemp(join(tmpdir(), "krane-proc-"));
  try {
    // The parent ignores SIGTERM and starts a grandchild that also would survive a plain kill.
    const c = startComponent({
      name: "stubborn",
      command: "sh",
      args: ["-c", "trap '' TERM; sleep 60 & echo child $!; wait"],
      logFile: join(dir, "stubborn.log"),
    });
    await waitUntilHealthy(
      c,
      async () =>
        (await import("node:fs/promises")).readFile(join(dir, "stubborn.log"), "utf8").then((t) => t.includes("child")),
      5000,
    );
    const text = await (await import("node:fs/promises")).readFile(join(dir, "stubborn.log"), "utf8");
    const childPid = Number(/child (\d+)/.exec(text)?.[1]);
    assert.ok(isAlive(c.pid) && isAlive(childPid));
    await stopPid(c.pid, 300);
    // Components are unref'd children: hold the event loop open until their exit is observed,
    // or node:test sees an empty loop with this test still pending.
    const hold = setTimeout(() => undefined, 10_000);
    await c.exited;
    clearTimeout(hold);
    assert.equal(isAlive(c.pid), false);
    for (let i = 0; i < 250 && isAlive(childPid); i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(isAlive(childPid), false, "the grandchild in the same group is gone too");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("the node plan puts every pool in every zone and taints all but the general pool", () => {
  const nodes = renderNodes(DEFAULT_NODE_PLAN);
  assert.equal(
    nodes.length,
    ZONES.length * (DEFAULT_NODE_PLAN.untrusted + DEFAULT_NODE_PLAN.sentinel + DEFAULT_NODE_PLAN.general),
  );
  for (const pool of ["untrusted", "sentinel", "general"]) {
    const inPool = nodes.filter((n) => n.metadata.labels[NODE_CLASS_KEY] === pool);
    assert.deepEqual([...new Set(inPool.map((n) => n.metadata.labels[ZONE_KEY]))].sort(), [...ZONES]);
    for (const n of inPool) {
      const taints = n.spec.taints ?? [];
      if (pool === "general") assert.deepEqual(taints, []);
      else assert.deepEqual(taints, [{ key: NODE_CLASS_KEY, value: pool, effect: "NoSchedule" }]);
    }
  }
  assert.equal(new Set(nodes.map((n) => n.metadata.name)).size, nodes.length, "node names are unique");
});
