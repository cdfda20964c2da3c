// A builder pod's gate: a connection holding the build's key reaches the daemon's unix socket
// (both ways, through the agent's dialer), one with another key never does.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdtempSync } from "node:fs";
import { createConnection, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { dialGate, parseGateKey, serveGate } from "../../../src/builds/gate.js";

const dir = mkdtempSync(join(tmpdir(), "krane-gate-"));
const daemonSocket = join(dir, "daemon.sock");
let reached = 0;
// Stands in for buildkitd: answers each line it gets, upper-cased.
const daemon = createServer((s) => {
  reached++;
  s.on("data", (d) => s.write(String(d).toUpperCase()));
});
daemon.listen(daemonSocket);
await once(daemon, "listening");
after(() => daemon.close());

const key = randomBytes(32);

/** Writes `text` through the dialer's socket and reads what comes back before the socket ends or 2 s pass. */
async function roundTrip(socket: string, text: string): Promise<string> {
  const c: Socket = createConnection(socket);
  await once(c, "connect");
  let got = "";
  c.on("data", (d) => (got += String(d)));
  c.write(text);
  await Promise.race([once(c, "close"), new Promise((r) => setTimeout(r, 2_000))]);
  c.destroy();
  return got;
}

test("a connection with the build's key reaches the daemon and back", async () => {
  const gate = await serveGate({ port: 0, host: "127.0.0.1", socket: daemonSocket, key });
  const dialer = await dialGate({ host: "127.0.0.1", port: gate.port, key, socket: join(dir, "agent-a.sock") });
  try {
    assert.equal(await roundTrip(dialer.socket, "solve"), "SOLVE");
  } finally {
    await dialer.close();
    await gate.close();
  }
});

test("a connection with another key is dropped before it reaches the daemon", async () => {
  const gate = await serveGate({ port: 0, host: "127.0.0.1", socket: daemonSocket, key });
  const wrong = await dialGate({
    host: "127.0.0.1",
    port: gate.port,
    key: randomBytes(32),
    socket: join(dir, "agent-b.sock"),
  });
  const before = reached;
  try {
    assert.equal(await roundTrip(wrong.socket, "solve"), "");
    assert.equal(reached, before, "the daemon saw no connection");
  } finally {
    await wrong.close();
    await gate.close();
  }
});

test("the key is 64 hex digits", () => {
  assert.equal(parseGateKey(`${"ab".repeat(32)}\n`).length, 32);
  assert.throws(() => parseGateKey("ab"), /64 lowercase hex digits/);
  assert.throws(() => parseGateKey("zz".repeat(32)), /64 lowercase hex digits/);
});
