// The agent's connection to ctrl (src/agent/ctrl-client.ts) over real sockets: HTTP/2 PINGs close
// a session whose peer went silent (a blackhole through the TCP fault proxy, in front of a real
// ctrl) without the late error of that session ending the process, a connection that never completes (a TLS handshake nobody answers) is given up so the
// next call dials again, and unary calls without a deadline of their own get the default one.
import assert from "node:assert/strict";
import * as net from "node:net";
import { after, before, describe, it } from "node:test";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import * as http2 from "node:http2";
import { createCtrlConnection, guardSession } from "../../../src/agent/ctrl-client.js";
import { createRegion } from "../../../src/ctrl/domain/clusters.js";
import { TcpProxy } from "../../support/faults/tcp-proxy.js";
import { startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";
import { exitAfterLastHook } from "../../support/exit.js";

describe("the agent's connection to ctrl", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  let proxy: TcpProxy;
  let token: string;
  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { streamKeepaliveMs: 60_000 });
    await createRegion(ctrl.store, "eu");
    token = await ctrl.agentToken("eu");
    proxy = await TcpProxy.start({ target: { host: "127.0.0.1", port: Number(new URL(ctrl.url).port) } });
  });
  after(async () => {
    await proxy.close();
    await ctrl.close();
    dir.remove();
    exitAfterLastHook();
  });

  it("a session whose peer goes silent is closed after the PING interval and timeout; the next call opens another, and the old one's late error ends nothing", async () => {
    const link = createCtrlConnection(`http://127.0.0.1:${proxy.port}`, token, {
      pingIntervalMs: 300,
      pingTimeoutMs: 300,
    });
    const ac = new AbortController();
    const it = link.client
      .watchDeployments({ region: "eu" }, { signal: ac.signal, timeoutMs: 0 })
      [Symbol.asyncIterator]();
    assert.equal((await it.next()).value?.state.case, "bookmark");
    while ((await it.next()).value?.state.case !== "snapshotEnd");
    // ctrl's keepalive is a minute here: only the session's PINGs can notice the blackhole.
    proxy.partition();
    const started = performance.now();
    try {
      await assert.rejects(it.next(), (err: unknown) => {
        assert.equal(ConnectError.from(err).code, Code.Unavailable);
        assert.match(ConnectError.from(err).rawMessage, /PING timed out/);
        return true;
      });
      const took = performance.now() - started;
      assert.ok(took >= 250 && took < 3000, `closed after ${took.toFixed(0)} ms`);
    } finally {
      proxy.heal();
      ac.abort();
    }
    // The next call gets a new session that works, while node:http2 emits the closed session's
    // error once its socket is gone (unheard, it would end this process).
    for (let i = 0; i < 3; i++) await link.client.heartbeat({ region: "eu", agentId: "ping-test", build: "test" });
    link.close();
  });

  it("a guarded session, destroyed under a keepalive timer, answers ping() with false instead of throwing", async () => {
    const session = http2.connect(ctrl.url);
    await new Promise<void>((resolve, reject) => session.once("connect", () => resolve()).once("error", reject));
    const bare = http2.connect(ctrl.url);
    bare.on("error", () => undefined);
    await new Promise<void>((resolve) => bare.once("connect", () => resolve()));
    guardSession(session);
    session.destroy(new Error("gone"));
    bare.destroy(new Error("gone"));
    // What node:http2 does unguarded: a synchronous throw, out of a timer an uncaught exception.
    assert.throws(() => bare.ping(() => undefined), { code: "ERR_HTTP2_INVALID_SESSION" });
    assert.equal(
      session.ping(() => assert.fail("no PING is sent")),
      false,
    );
    // Its late 'error' is heard (an unheard one would end this process).
    await new Promise((r) => setTimeout(r, 50));
  });

  it("a connection that never completes is given up, and the next call dials again", async () => {
    // Accepts TCP and never answers the TLS handshake: node:http2 stays "connecting" for good.
    let connections = 0;
    let closing = false;
    const accepted: net.Socket[] = [];
    const mute = net.createServer((s) => {
      if (closing) return void s.destroy();
      connections++;
      accepted.push(s);
      s.on("error", () => undefined);
    });
    await new Promise<void>((r) => mute.listen(0, "127.0.0.1", () => r()));
    try {
      const port = (mute.address() as net.AddressInfo).port;
      const link = createCtrlConnection(`https://127.0.0.1:${port}`, token, { defaultTimeoutMs: 200 });
      // No deadline of its own: the default one ends it.
      await assert.rejects(link.client.heartbeat({ region: "eu" }), (err: unknown) => {
        assert.equal(ConnectError.from(err).code, Code.DeadlineExceeded);
        return true;
      });
      assert.equal(link.state(), "connecting");
      assert.equal(connections, 1);
      assert.equal(link.dropIfConnecting(), true);
      assert.notEqual(link.state(), "connecting");
      assert.equal(link.dropIfConnecting(), false, "nothing to drop any more");
      // A call at once after the drop: its new attempt is the manager's (not lost to it when the
      // dropped one's failure arrives), so it can be dropped in turn.
      await assert.rejects(link.client.heartbeat({ region: "eu" }, { timeoutMs: 200 }));
      assert.equal(connections, 2, "dialed again");
      assert.equal(link.state(), "connecting");
      assert.equal(link.dropIfConnecting(), true);
      // The server hangs up on both: nothing is left to fail unheard.
      for (const s of accepted) s.destroy();
      await new Promise((r) => setTimeout(r, 200));
      link.close();
    } finally {
      for (const s of accepted) s.destroy();
      // A connection accepted after this point would keep close() waiting: hang up on it at once.
      closing = true;
      await new Promise<void>((r) => mute.close(() => r()));
    }
  });
});
