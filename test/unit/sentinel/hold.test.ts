// Scale to zero at the sentinel (src/sentinel/hold.ts through the request path): requests held
// while no instance is routable, released when one is, bounded (503 with Retry-After when full or
// timed out, never dropped), the client leaving ends its hold, and the wake long-poll answers at
// the first held request.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Registry } from "prom-client";
import { silentLogger } from "../../../src/base/log.js";
import { Balancer } from "../../../src/sentinel/balancer.js";
import { createHoldMetrics, HeldRequests } from "../../../src/sentinel/hold.js";
import { createSentinelMetrics } from "../../../src/sentinel/metrics.js";
import { RequestPath, type OwnAnswer, type RequestHead } from "../../../src/sentinel/request-path.js";
import type { RoutingTable } from "../../../src/sentinel/table.js";

function table(n: number): RoutingTable {
  return {
    version: 1,
    mode: "instances",
    revisions: [
      {
        deploymentId: "dep-a",
        weight: null,
        endpoints: Array.from({ length: n }, (_, i) => ({
          key: `10.0.0.${i + 1}:8080`,
          address: `10.0.0.${i + 1}`,
          port: 8080,
          dialHost: `10.0.0.${i + 1}`,
          deploymentId: "dep-a",
          pod: `a-${i}`,
          protocol: "http1" as const,
        })),
      },
    ],
  };
}

const head: RequestHead = {
  method: "GET",
  target: "/",
  host: "shop.example.com",
  hostRequired: true,
  rawHeaders: ["host", "shop.example.com"],
  clientAddress: "127.0.0.1",
  hasBody: false,
  requestId: undefined,
  preview: undefined,
  authorization: undefined,
};

function setup(policy: { maxHeld: number; timeoutMs: number } | undefined) {
  const registry = new Registry();
  const balancer = new Balancer();
  balancer.setTable(table(0));
  const held = new HeldRequests(createHoldMetrics(registry));
  held.policy = policy;
  const path = new RequestPath({
    balancer,
    metrics: createSentinelMetrics(() => [], registry, false),
    log: silentLogger,
    hasTable: () => true,
    isReady: () => true,
    held,
  });
  const metric = async (name: string, labels = ""): Promise<number> => {
    const line = (await registry.metrics()).split("\n").find((l) => l.startsWith(`${name}${labels} `));
    return line === undefined ? 0 : Number(line.split(" ")[1]);
  };
  return { path, balancer, held, metric };
}

test("without scale to zero, no instance is a 503 at once", () => {
  const { path, held } = setup(undefined);
  const trip = path.begin(head);
  assert.equal(trip.next(), undefined);
  const w = trip.waitForInstance();
  assert.ok(!(w instanceof Promise));
  assert.equal(w.status, 503);
  assert.equal(w.headers["x-krane-sentinel-error"], "no-instance");
  assert.equal(held.held, 0);
});

test("held requests go on once an instance is routable; the cold start is measured", async () => {
  const { path, balancer, held, metric } = setup({ maxHeld: 10, timeoutMs: 60_000 });
  const trips = [path.begin(head), path.begin(head), path.begin(head)];
  const waits = trips.map((t) => {
    assert.equal(t.next(), undefined);
    const w = t.waitForInstance();
    assert.ok(w instanceof Promise);
    return w;
  });
  assert.equal(held.held, 3);
  assert.equal(held.wakes, 1, "one cold start for the three");
  assert.equal(path.inFlight, 3, "held requests are in flight (drain waits for them)");
  balancer.setTable(table(1));
  held.routable();
  assert.deepEqual(await Promise.all(waits), ["retry", "retry", "retry"]);
  for (const t of trips) {
    assert.ok(t.next(), "an instance now");
    t.finish("2xx");
  }
  assert.equal(held.held, 0);
  assert.equal(await metric("krane_sentinel_held_requests_total", '{outcome="released"}'), 3);
  assert.equal(await metric("krane_sentinel_cold_start_seconds_count"), 1);
});

test("over the bound: 503 with Retry-After at once; the held ones are not disturbed", async () => {
  const { path, held, metric } = setup({ maxHeld: 2, timeoutMs: 60_000 });
  const a = path.begin(head);
  a.next();
  const wa = a.waitForInstance();
  const b = path.begin(head);
  b.next();
  const wb = b.waitForInstance();
  assert.ok(wa instanceof Promise && wb instanceof Promise);
  const c = path.begin(head);
  c.next();
  const full = c.waitForInstance() as OwnAnswer;
  assert.equal(full.status, 503);
  assert.equal(full.headers["retry-after"], "1");
  assert.equal(full.headers["x-krane-sentinel-error"], "held-full");
  assert.ok(c.finished);
  assert.equal(held.held, 2);
  assert.equal(await metric("krane_sentinel_held_requests_total", '{outcome="full"}'), 1);
  held.close();
  assert.equal(((await wa) as OwnAnswer).status, 503);
  assert.equal(((await wb) as OwnAnswer).headers["retry-after"], "1");
});

test("a held request times out with 503 and Retry-After, and the next one starts a new cold start", async () => {
  const { path, held, metric } = setup({ maxHeld: 5, timeoutMs: 30 });
  const t = path.begin(head);
  t.next();
  const w = t.waitForInstance();
  assert.ok(w instanceof Promise);
  const a = (await w) as OwnAnswer;
  assert.equal(a.status, 503);
  assert.equal(a.headers["x-krane-sentinel-error"], "held-timeout");
  assert.equal(a.headers["retry-after"], "1");
  assert.ok(t.finished);
  assert.equal(path.inFlight, 0);
  assert.equal(await metric("krane_sentinel_held_requests_total", '{outcome="timeout"}'), 1);
  const again = path.begin(head);
  again.next();
  void again.waitForInstance();
  assert.equal(held.wakes, 2);
  again.finish("aborted");
});

test("the client leaving ends its hold", async () => {
  const { path, held, metric } = setup({ maxHeld: 5, timeoutMs: 60_000 });
  const t = path.begin(head);
  t.next();
  const w = t.waitForInstance();
  assert.equal(held.held, 1);
  t.finish("aborted");
  assert.equal(held.held, 0);
  await w;
  assert.equal(path.inFlight, 0);
  assert.equal(await metric("krane_sentinel_held_requests_total", '{outcome="gone"}'), 1);
});

test("a request whose instance failed is not held", () => {
  const { path, balancer, held } = setup({ maxHeld: 5, timeoutMs: 60_000 });
  balancer.setTable(table(1));
  const t = path.begin(head);
  assert.ok(t.next());
  const refused = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
  // GET without a body: retried once elsewhere, but there is nowhere else.
  assert.equal(t.failed(refused, false), "retry");
  assert.equal(t.next(), undefined);
  const w = t.waitForInstance();
  assert.ok(!(w instanceof Promise));
  assert.equal(w.status, 502);
  assert.equal(held.held, 0);
});

test("the wake long-poll answers at the first held request, at once when already past, else at its timeout", async () => {
  const { path, held } = setup({ maxHeld: 5, timeoutMs: 60_000 });
  const quiet = await held.waitForWake(0, 20);
  assert.deepEqual(quiet, { wakes: 0, held: 0 });
  const poll = held.waitForWake(0, 60_000);
  const t = path.begin(head);
  t.next();
  void t.waitForInstance();
  assert.deepEqual(await poll, { wakes: 1, held: 1 });
  assert.deepEqual(await held.waitForWake(0, 60_000), { wakes: 1, held: 1 }, "already past: at once");
  assert.deepEqual(await held.waitForWake(7, 60_000), { wakes: 1, held: 1 }, "a count from before a restart: at once");
  const aborted = new AbortController();
  const cut = held.waitForWake(1, 60_000, aborted.signal);
  aborted.abort();
  assert.equal((await cut).wakes, 1);
  t.finish("aborted");
});
