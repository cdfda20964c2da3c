// The hello app (the test workload image's program) over real sockets on loopback: who answered,
// the misbehaviour it is asked for (status codes, latency, refusing, resetting), its readiness,
// and SIGTERM: not ready at once, serving for the shutdown delay, then no longer listening.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { freePort } from "../../support/faults/processes.js";
import { DEFAULT_SETTINGS, HelloApp, patchSettings, settingsFromEnv } from "../../../src/cluster/workload/hello.js";

const identity = (port: number) => ({
  name: "hello-abc",
  namespace: "ws-acme",
  revision: "7",
  image: "krane.local/hello:v2",
  node: "untrusted-real",
  podIp: "127.0.0.1",
  port,
});

async function get(url: string): Promise<{ status: number; body: Record<string, unknown> } | { error: string }> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause;
    return { error: cause?.code ?? String(err) };
  }
}

describe("the hello app", () => {
  const apps: HelloApp[] = [];
  after(async () => {
    for (const a of apps) await a.close();
  });
  const start = async (env: NodeJS.ProcessEnv = {}): Promise<string> => {
    const port = await freePort();
    const app = new HelloApp(identity(port), settingsFromEnv(env), { host: "127.0.0.1" });
    apps.push(app);
    await app.start();
    return `http://127.0.0.1:${port}`;
  };

  it("answers with its pod, revision and image, and is ready", async () => {
    const url = await start();
    const r = await get(`${url}/`);
    assert.ok("status" in r, JSON.stringify(r));
    assert.equal(r.status, 200);
    assert.equal(r.body.pod, "hello-abc");
    assert.equal(r.body.revision, "7");
    assert.equal(r.body.image, "krane.local/hello:v2");
    assert.deepEqual(await get(`${url}/healthz`), { status: 200, body: { ready: true, terminating: false } });
  });

  it("misbehaves as told by its environment and live by POST /_hello/control", async () => {
    const url = await start({ HELLO_STATUS: "503", HELLO_LATENCY_MS: "300" });
    const t0 = performance.now();
    const r = await get(`${url}/`);
    assert.ok("status" in r && r.status === 503, JSON.stringify(r));
    assert.ok(performance.now() - t0 >= 250, "the latency asked for");

    const post = (body: unknown) =>
      fetch(`${url}/_hello/control`, { method: "POST", body: JSON.stringify(body) }).then(async (res) => ({
        status: res.status,
        body: (await res.json()) as Record<string, unknown>,
      }));
    // A bad setting is refused, naming it, and changes nothing.
    const bad = await post({ status: 200, errorRate: 2 });
    assert.equal(bad.status, 400);
    assert.match(String(bad.body.error), /errorRate/);
    assert.equal(((await get(`${url}/`)) as { status: number }).status, 503, "nothing half-applied");

    assert.equal((await post({ status: 200, latencyMs: 0 })).status, 200);
    assert.equal(((await get(`${url}/`)) as { status: number }).status, 200);
    // Not ready on request: the readiness probe fails, requests are still served.
    await post({ ready: false });
    assert.equal(((await get(`${url}/healthz`)) as { status: number }).status, 503);
    assert.equal(((await get(`${url}/`)) as { status: number }).status, 200);
    await post({ ready: true });
    assert.equal(((await get(`${url}/healthz`)) as { status: number }).status, 200);

    // Refusing, live: the control request is answered, then nothing listens.
    assert.equal((await post({ mode: "refuse" })).status, 200);
    // The listener closes right after the answer; wait for it rather than for a fixed time.
    let answer: unknown;
    for (let i = 0; i < 100; i++) {
      answer = await get(`${url}/`);
      if (JSON.stringify(answer) === JSON.stringify({ error: "ECONNREFUSED" })) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.deepEqual(answer, { error: "ECONNREFUSED" });
  });

  it("a readiness that starts failing: ready, then 503 from HELLO_UNREADY_AFTER_MS on, serving all along", async () => {
    const url = await start({ HELLO_UNREADY_AFTER_MS: "400" });
    assert.equal(((await get(`${url}/healthz`)) as { status: number }).status, 200, "ready at first");
    // Polled until it turns (timers fire late on a loaded machine), then it stays failing.
    const deadline = Date.now() + 30_000;
    while (((await get(`${url}/healthz`)) as { status: number }).status !== 503) {
      assert.ok(Date.now() < deadline, "readiness never failed");
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(((await get(`${url}/healthz`)) as { status: number }).status, 503, "and stays failing");
    assert.equal(((await get(`${url}/`)) as { status: number }).status, 200, "requests are still served");
    assert.throws(() => patchSettings(DEFAULT_SETTINGS, { unreadyAfterMs: -1 }), /unreadyAfterMs/);
  });

  it("resets every connection in reset mode", async () => {
    const url = await start({ HELLO_MODE: "reset" });
    assert.match(JSON.stringify(await get(`${url}/`)), /ECONNRESET|UND_ERR_SOCKET/);
  });

  it("terminating (its SIGTERM handler) turns it unready at once, serves through the shutdown delay, then stops listening", async () => {
    const port = await freePort();
    const app = new HelloApp(identity(port), patchSettings(DEFAULT_SETTINGS, { shutdownDelayMs: 1_000 }), {
      host: "127.0.0.1",
    });
    apps.push(app);
    await app.start();
    const url = `http://127.0.0.1:${port}`;
    const terminated = app.terminate(5_000);
    const health = await get(`${url}/healthz`);
    assert.ok("status" in health && health.status === 503 && health.body.terminating === true, JSON.stringify(health));
    assert.equal(((await get(`${url}/`)) as { status: number }).status, 200, "still serving during the delay");
    await terminated;
    assert.deepEqual(await get(`${url}/`), { error: "ECONNREFUSED" });
  });
});
