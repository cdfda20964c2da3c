// A kept-alive connection that the server closes just as the client reuses it (kube-apiserver
// closes idle connections; a burst's sockets go idle together) resets a request that never
// reached the server. KubeClient sends such a request again on a new connection, except a create
// (POST), which is not idempotent. A real HTTP server on loopback that closes, without an answer,
// every connection on its second request — the race made deterministic; the real API server
// cannot be made to lose it on demand.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as http from "node:http";
import type { Socket } from "node:net";
import { isStaleSocket, KubeClient } from "../../../src/kube/client.js";
import { resources } from "../../../src/kube/resources.js";
import { loopbackKubeConfig } from "./support.js";

async function withServer(
  fn: (client: KubeClient, seen: { connections: number; requests: string[] }) => Promise<void>,
): Promise<void> {
  const seen = { connections: 0, requests: [] as string[] };
  const served = new WeakMap<Socket, number>();
  const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    const n = (served.get(req.socket) ?? 0) + 1;
    served.set(req.socket, n);
    req.resume();
    if (n > 1) {
      // The second request on a connection: the server had closed it.
      req.socket.destroy();
      return;
    }
    seen.requests.push(`${req.method ?? ""} ${req.url ?? ""}`);
    const body = JSON.stringify({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "cm", namespace: "ns", resourceVersion: "1" },
    });
    res
      .writeHead(req.method === "POST" ? 201 : 200, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
      })
      .end(body);
  });
  server.on("connection", () => seen.connections++);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const client = new KubeClient(loopbackKubeConfig(server));
  try {
    await fn(client, seen);
  } finally {
    client.close();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  }
}

test("a get or an apply on a reused connection the server closed is sent again on a new one", async () => {
  await withServer(async (client, seen) => {
    assert.equal((await client.get(resources.configMaps, "ns", "cm"))?.metadata.name, "cm");
    // The first connection is now idle in the pool; reusing it is reset.
    assert.equal((await client.get(resources.configMaps, "ns", "cm"))?.metadata.name, "cm");
    const applied = await client.apply(resources.configMaps, {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "cm", namespace: "ns" },
    });
    assert.equal(applied.metadata.name, "cm");
    assert.deepEqual(
      seen.requests.map((r) => r.split("?")[0]),
      [
        "GET /api/v1/namespaces/ns/configmaps/cm",
        "GET /api/v1/namespaces/ns/configmaps/cm",
        "PATCH /api/v1/namespaces/ns/configmaps/cm",
      ],
    );
    assert.equal(seen.connections, 3, "each request that was reset went again on a new connection");
  });
});

test("a create on a reused connection the server closed is not sent again: the reset reaches the caller", async () => {
  await withServer(async (client, seen) => {
    await client.get(resources.configMaps, "ns", "cm");
    await assert.rejects(
      client.create(resources.configMaps, {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "cm2", namespace: "ns" },
      }),
      (err: NodeJS.ErrnoException) => err.code === "ECONNRESET",
    );
    assert.deepEqual(
      seen.requests.map((r) => r.split("?")[0]),
      ["GET /api/v1/namespaces/ns/configmaps/cm"],
    );
  });
});

test("a reset of a reused connection counts as stale whether it comes while writing (EPIPE) or waiting (ECONNRESET)", () => {
  const err = (code: string): NodeJS.ErrnoException => Object.assign(new Error(code), { code });
  // The server's reset reaches a client still writing a large body as EPIPE: the same stale
  // connection, to be sent again like ECONNRESET (loopback cannot be made to lose this race on demand).
  assert.equal(isStaleSocket(true, err("EPIPE")), true);
  assert.equal(isStaleSocket(true, err("ECONNRESET")), true);
  // A fresh connection that fails is not stale: the server may well have seen the request.
  assert.equal(isStaleSocket(false, err("EPIPE")), false);
  assert.equal(isStaleSocket(false, err("ECONNRESET")), false);
  assert.equal(isStaleSocket(true, err("ECONNREFUSED")), false);
  assert.equal(isStaleSocket(true, err("ETIMEDOUT")), false);
});
