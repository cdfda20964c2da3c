// WebSocket handshakes in the live request view (src/sentinel/websocket.ts → src/sentinel/tap.ts),
// through real sockets: a client (ws) → the Node shell's upgrade relay on a real listener → an app
// (ws server). Each handshake is one record when it is answered: a 101 with the revision and
// instance, the app's own refusal with the instance, a policy's refusal with the policy and no
// instance; an upgraded connection is a second record when it closes, with how long it was open;
// query values and the key never kept; nothing while nobody watches.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Registry } from "prom-client";
import { WebSocket, WebSocketServer } from "ws";
import { silentLogger } from "../../../src/base/log.js";
import { hashApiKey } from "../../../src/contracts/api-keys.js";
import { parseEdgePolicies } from "../../../src/contracts/edge-policy.js";
import type { SentinelRequestRecord } from "../../../src/contracts/request-view.js";
import { Balancer } from "../../../src/sentinel/balancer.js";
import { createSentinelMetrics } from "../../../src/sentinel/metrics.js";
import { EdgePolicies } from "../../../src/sentinel/policies.js";
import { RequestTap } from "../../../src/sentinel/tap.js";
import { UpgradeRelay } from "../../../src/sentinel/websocket.js";

async function listen(server: http.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

/** The handshake's outcome as the client saw it: "open" or the refusal's status. */
function handshake(port: number, path: string, headers: Record<string, string> = {}): Promise<"open" | number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`, { headers: { host: "chat.example.com", ...headers } });
    ws.once("open", () => {
      ws.send("ping");
      ws.once("message", (m: Buffer) => {
        assert.equal(m.toString(), "echo ping", "the upgraded connection relays both ways");
        ws.close();
        resolve("open");
      });
    });
    ws.once("unexpected-response", (_req, res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    ws.once("error", reject);
  });
}

test("each WebSocket handshake is one request-view record when it is answered", async (t) => {
  // The app: echoes on /chat, refuses /private itself with a 403.
  const app = http.createServer((_req, res) => res.end("not a websocket\n"));
  const wss = new WebSocketServer({ noServer: true });
  app.on("upgrade", (req, socket, head) => {
    if (req.url?.startsWith("/private")) {
      socket.end("HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => ws.on("message", (m: Buffer) => ws.send(`echo ${m.toString()}`)));
  });
  const appPort = await listen(app);

  const balancer = new Balancer();
  balancer.setTable({
    version: 1,
    mode: "instances",
    revisions: [
      {
        deploymentId: "dep_ws",
        weight: null,
        endpoints: [
          {
            key: `127.0.0.1:${appPort}`,
            address: "127.0.0.1",
            port: appPort,
            dialHost: "127.0.0.1",
            deploymentId: "dep_ws",
            pod: "chat-1",
            protocol: "http1" as const,
          },
        ],
      },
    ],
  });
  const metrics = createSentinelMetrics(() => [], new Registry(), false);
  const policies = new EdgePolicies(metrics.policyDecisions);
  policies.set(parseEdgePolicies("policies", [{ name: "keys", kind: "apikey" }]));
  policies.setKeys([
    {
      id: "k1",
      hash: hashApiKey("the-key"),
      name: "ci",
      expiresAt: null,
      limit: null,
      windowSeconds: null,
      metadata: {},
    },
  ]);
  const tap = new RequestTap();
  const relay = new UpgradeRelay({
    balancer,
    metrics,
    log: silentLogger,
    upstreamTimeoutMs: 5_000,
    hasTable: () => true,
    policies,
    tap,
  });
  const sentinel = http.createServer((_req, res) => res.end());
  sentinel.on("upgrade", relay.handle);
  const port = await listen(sentinel);
  t.after(() => {
    relay.closeAll();
    tap.close();
    wss.close();
    sentinel.close();
    app.close();
  });

  const key = { "x-api-key": "the-key" };
  // Nobody watches: a handshake leaves nothing.
  assert.equal(await handshake(port, "/chat", key), "open");
  for (let i = 0; i < 200 && relay.open.size > 0; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(relay.open.size, 0, "the unwatched connection is closed before anyone watches");
  tap.read(0);
  assert.equal(await handshake(port, "/chat?token=s3cret", key), "open");
  assert.equal(await handshake(port, "/private", key), 403);
  assert.equal(await handshake(port, "/chat"), 401, "no key: the policy refuses before any instance is dialled");

  // The close of the upgraded connection comes once both sides closed, whenever that is.
  let records: readonly SentinelRequestRecord[] = [];
  for (let i = 0; i < 200 && !records.some((r) => r.openMs !== undefined); i++) {
    await new Promise((r) => setTimeout(r, 10));
    records = tap.read(0).records;
  }
  const closes = records.filter((r) => r.openMs !== undefined);
  assert.equal(closes.length, 1, "one close, of the one connection upgraded while watched");
  const [close] = closes;
  assert.ok(close && close.openMs !== undefined && close.openMs > 0);
  const answered = records.filter((r) => r.openMs === undefined);
  assert.ok(close.latencyMs === answered[0]?.latencyMs, "the close repeats its handshake's answer");
  assert.deepEqual(
    { ...close, latencyMs: 0, timeMs: 0, seq: 0, openMs: 0 },
    { ...answered[0], latencyMs: 0, timeMs: 0, seq: 0, openMs: 0 },
  );
  const shown = answered.map((r): Partial<SentinelRequestRecord> => {
    assert.ok(r.latencyMs >= 0 && Number.isFinite(r.latencyMs) && r.timeMs > 0);
    const { latencyMs: _l, timeMs: _t, seq: _s, ...rest } = r;
    return rest;
  });
  assert.deepEqual(shown, [
    {
      method: "GET",
      path: "/chat?token=…",
      status: 101,
      deploymentId: "dep_ws",
      instance: "chat-1",
      policy: "",
      client: "127.0.0.1",
      key: "ci",
    },
    {
      method: "GET",
      path: "/private",
      status: 403,
      deploymentId: "dep_ws",
      instance: "chat-1",
      policy: "",
      client: "127.0.0.1",
      key: "ci",
    },
    {
      method: "GET",
      path: "/chat",
      status: 401,
      deploymentId: "",
      instance: "",
      policy: "keys",
      client: "127.0.0.1",
      key: "",
    },
  ]);
  const text = JSON.stringify(records);
  assert.ok(!text.includes("s3cret") && !text.includes("the-key"), "no query value and no key in the view");
});
