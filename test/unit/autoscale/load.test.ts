// A region's load from its sentinel pods' status documents, and the sentinel's own document.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { SentinelStatus } from "../../../src/contracts/routing.js";
import { regionLoad } from "../../../src/autoscale/load.js";

function doc(
  over: Partial<SentinelStatus>,
  revisions: { id: string; inFlight?: number; routable: number }[],
): SentinelStatus {
  return {
    environmentId: "env_1",
    region: "eu",
    ready: true,
    draining: false,
    routingVersion: 3,
    mode: "instances",
    policyError: null,
    kubeConnected: true,
    tableUpdatedAt: null,
    inFlight: 0,
    lastRequestAt: null,
    revisions: revisions.map((r) => ({
      deploymentId: r.id,
      weight: null,
      share: 50,
      endpoints: r.routable,
      routable: r.routable,
      ejected: 0,
      ...(r.inFlight === undefined ? {} : { inFlight: r.inFlight }),
    })),
    ...over,
  };
}

test("in-flight requests add up over the pods, per revision; the newest request wins", () => {
  const l = regionLoad([
    doc({ lastRequestAt: "2026-01-01T00:00:05.000Z" }, [
      { id: "a", inFlight: 3, routable: 2 },
      { id: "b", inFlight: 1, routable: 1 },
    ]),
    doc({ lastRequestAt: "2026-01-01T00:00:09.000Z" }, [
      { id: "a", inFlight: 4, routable: 2 },
      { id: "b", inFlight: 0, routable: 1 },
    ]),
  ]);
  assert.ok(l);
  assert.deepEqual(
    l.loads.map((x) => [x.deploymentId, x.inFlight, x.ready]),
    [
      ["a", 7, 2],
      ["b", 1, 1],
    ],
  );
  assert.equal(l.lastRequestMs, Date.parse("2026-01-01T00:00:09.000Z"));
});

test("no pod, or a sentinel that does not measure: no judgement", () => {
  assert.equal(regionLoad([]), null);
  const old = doc({}, [{ id: "a", routable: 1 }]);
  assert.equal(regionLoad([old]), null);
  const { lastRequestAt: _dropped, ...noLast } = doc({}, [{ id: "a", inFlight: 0, routable: 1 }]);
  assert.equal(regionLoad([noLast]), null);
  assert.equal(regionLoad([doc({}, [{ id: "a", inFlight: -1, routable: 1 }])]), null);
  assert.equal(regionLoad([doc({ lastRequestAt: "yesterday" }, [])]), null);
  // Never a request: measured, with no last request.
  assert.deepEqual(regionLoad([doc({ lastRequestAt: null }, [])]), { loads: [], lastRequestMs: null });
});
