// Outages with the real processes on a real local cluster
// (test/support/faults/outage-scenarios.ts): ctrl killed with SIGKILL and restarted with a
// `krane agent` connected (the agent reconnects and a deploy made at ctrl's readiness reaches the
// cluster), and the kube-apiserver frozen with SIGSTOP (the agent's metric shows it within 10 s;
// the change made meanwhile lands once it is back). The bounds here are loose for a loaded CI
// machine; `npm run bench -- outages` prints the figures against their targets.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { useCluster } from "../../support/cluster.js";
import { apiServerFrozen, ctrlRestartsWithAgent } from "../../support/faults/outage-scenarios.js";
import { ms, percentile } from "../../support/faults/processes.js";

const handle = useCluster({ pods: { readyDelayMs: 300, readyJitterMs: 300 } });
const dir = mkdtempSync(join(tmpdir(), "krane-outages-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test(
  "ctrl killed with SIGKILL 3 times with the agent connected: it reconnects and a deploy at readiness reaches the cluster",
  { timeout: 5 * 60_000 },
  async () => {
    const r = await ctrlRestartsWithAgent(await handle.ready(), dir, { cycles: 3 });
    console.log(
      `${r.name}: reconnect after ready max ${ms(percentile(r.reconnectMs, 100))}; deploy at ready → cluster max ${ms(percentile(r.deployMs, 100))}`,
    );
    assert.deepEqual(r.problems, []);
    assert.equal(r.reconnectMs.length, 3);
    assert.equal(r.deployMs.length, 3);
    assert.ok(Math.max(...r.reconnectMs) <= 5000, `reconnected ${r.reconnectMs.join(", ")} ms after ctrl was ready`);
    assert.ok(
      Math.max(...r.deployMs) <= 10_000,
      `deploy reached the cluster ${r.deployMs.join(", ")} ms after ctrl was ready`,
    );
  },
);

test(
  "kube-apiserver frozen (SIGSTOP): the agent's metric shows it within 10 s, the change made meanwhile lands after",
  { timeout: 5 * 60_000 },
  async () => {
    const r = await apiServerFrozen(await handle.ready(), dir, { freezeMs: 12_000 });
    console.log(
      `${r.name}: detected after ${ms(r.detectedMs ?? NaN)}; after SIGCONT: up again ${ms(r.upAgainMs ?? NaN)}, change in the cluster ${ms(r.convergedMs ?? NaN)}`,
    );
    assert.deepEqual(r.problems, []);
    assert.ok((r.detectedMs ?? Infinity) <= 10_000, `detected after ${r.detectedMs} ms`);
    assert.ok((r.convergedMs ?? Infinity) <= 10_000, `converged ${r.convergedMs} ms after the API server was back`);
  },
);
