// The sentinel's own readiness probing of starting instances while requests are held
// (src/sentinel/warm.ts): the probe as the kubelet's HTTP probe counts success, over real
// sockets, and the loop that promotes the first instance that answers.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as http from "node:http";
import * as net from "node:net";
import type { AddressInfo } from "node:net";
import type { Endpoint, RoutingTable } from "../../../src/sentinel/table.js";
import { MAX_PROBED, probeReadiness, WarmUp, type WarmCandidate } from "../../../src/sentinel/warm.js";

const endpoint = (key: string, port = 8080): Endpoint => ({
  key,
  address: key.split(":")[0] ?? "",
  port,
  dialHost: "127.0.0.1",
  deploymentId: "dep_a",
  pod: undefined,
  protocol: "http1",
});

function tableOf(starting: Endpoint[], endpoints: Endpoint[] = []): RoutingTable {
  return {
    version: 1,
    mode: "instances",
    revisions: [{ deploymentId: "dep_a", weight: null, endpoints, starting, readinessPath: "/healthz" }],
  };
}

async function listen(server: http.Server | net.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

test("the probe counts 2xx and 3xx as ready; 5xx, a refused port and a silent one are not", async () => {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    seen.push(`${req.url ?? ""} ${req.headers["user-agent"] ?? ""}`);
    const status = req.url === "/ok" ? 200 : req.url === "/moved" ? 302 : 503;
    res.writeHead(status).end();
  });
  const port = await listen(server);
  const silent = net.createServer(() => undefined); // accepts and never answers
  const silentPort = await listen(silent);
  const closed = net.createServer();
  const closedPort = await listen(closed);
  await new Promise((r) => closed.close(r));
  try {
    const c = (path: string, p = port): WarmCandidate => ({ endpoint: endpoint(`10.0.0.1:${p}`, p), path });
    assert.equal(await probeReadiness(c("/ok")), true);
    assert.equal(await probeReadiness(c("/moved")), true);
    assert.equal(await probeReadiness(c("/starting")), false);
    assert.equal(await probeReadiness(c("/ok", closedPort)), false, "connection refused");
    const started = performance.now();
    assert.equal(await probeReadiness(c("/ok", silentPort), 200), false, "no answer within the timeout");
    assert.ok(performance.now() - started < 2_000, "the timeout ends the probe");
    assert.deepEqual(seen.slice(0, 3), [
      "/ok krane-sentinel-warmup",
      "/moved krane-sentinel-warmup",
      "/starting krane-sentinel-warmup",
    ]);
  } finally {
    server.close();
    silent.close();
  }
});

test("the loop probes while requests are held and promotes the first instance that answers", async () => {
  let table = tableOf([endpoint("10.0.0.1:8080"), endpoint("10.0.0.2:8080")]);
  let holding = true;
  let round = 0;
  const probed: string[] = [];
  let promoted: readonly string[] = [];
  const done = new Promise<void>((resolve) => {
    const warm = new WarmUp({
      table: () => table,
      holding: () => holding,
      intervalMs: 5,
      probe: async (c) => {
        probed.push(c.endpoint.key);
        // The second instance starts answering in the third round.
        return c.endpoint.key === "10.0.0.2:8080" && round++ >= 2;
      },
      promote: (keys) => {
        promoted = keys;
        resolve();
      },
    });
    warm.start();
    warm.start(); // a second start while running adds no second loop
  });
  await done;
  assert.deepEqual(promoted, ["10.0.0.2:8080"]);
  assert.equal(probed.filter((k) => k === "10.0.0.1:8080").length, 3, "every starting instance each round");

  // Nothing held: no probe at all. Something routable already: no probe either.
  for (const [h, t] of [
    [false, tableOf([endpoint("10.0.0.1:8080")])],
    [true, tableOf([endpoint("10.0.0.1:8080")], [endpoint("10.0.0.3:8080")])],
  ] as const) {
    holding = h;
    table = t;
    let probes = 0;
    const warm = new WarmUp({
      table: () => table,
      holding: () => holding,
      probe: async () => (probes++, true),
      promote: () => assert.fail("nothing to promote"),
    });
    warm.start();
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(probes, 0);
    assert.equal(warm.running, false);
  }

  // The hold ends while probing (timeout, client gone): the loop stops without promoting.
  holding = true;
  table = tableOf([endpoint("10.0.0.1:8080")]);
  let probes = 0;
  const warm = new WarmUp({
    table: () => table,
    holding: () => holding,
    intervalMs: 5,
    probe: async () => (probes++ >= 2 ? ((holding = false), true) : false),
    promote: () => assert.fail("nothing is held any more"),
  });
  warm.start();
  while (warm.running) await new Promise((r) => setTimeout(r, 5));
  assert.equal(probes, 3);
});

test("an instance that keeps its probe waiting holds no one up; at most MAX_PROBED are probed at once", async () => {
  const starting = Array.from({ length: MAX_PROBED + 4 }, (_, i) => endpoint(`10.0.1.${i + 1}:8080`));
  const probed = new Set<string>();
  const promoted = await new Promise<readonly string[]>((resolve) => {
    new WarmUp({
      table: () => tableOf(starting),
      holding: () => true,
      probe: (c) => {
        probed.add(c.endpoint.key);
        // The first never answers; the second does at once.
        if (c.endpoint.key === "10.0.1.1:8080") return new Promise<boolean>(() => undefined);
        return Promise.resolve(c.endpoint.key === "10.0.1.2:8080");
      },
      promote: resolve,
    }).start();
  });
  assert.deepEqual(promoted, ["10.0.1.2:8080"]);
  assert.equal(probed.size, MAX_PROBED);
});
