// The hello app (the test workload image's program) over real sockets on loopback: who answered,
// the misbehaviour it is asked for (status codes, latency, refusing, resetting), its readiness,
// and SIGTERM: not ready at once, serving for the shutdown delay, then no longer listening. Its
// gRPC mode too, as the process the image runs (HELLO_PROTOCOL=grpc).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { after, describe, it } from "node:test";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { freePort } from "../../support/faults/processes.js";
import { HelloService } from "../../../src/gen/krane/hello/v1/hello_pb.js";
import { helloGrpcBeside } from "../../../src/cluster/workload/hello-grpc.js";
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

describe("the hello app in gRPC mode", () => {
  const post = (url: string, body: unknown) =>
    fetch(`${url}/_hello/control`, { method: "POST", body: JSON.stringify(body) }).then(async (res) => ({
      status: res.status,
      body: (await res.json()) as Record<string, unknown>,
    }));

  it("POST /_hello/control is applied and the process keeps serving HTTP/1.1 and gRPC on its one port", async () => {
    const port = await freePort();
    const entry = fileURLToPath(new URL("../../../src/cluster/workload/hello-main.ts", import.meta.url));
    const child = spawn(process.execPath, ["--import", "tsx", entry], {
      env: { ...process.env, HELLO_PROTOCOL: "grpc", PORT: String(port), KRANE_INSTANCE_ID: "hello-grpc-0" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
    child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
    const exited = new Promise<string>((resolve) =>
      child.once("exit", (code, signal) => resolve(`exited (${code ?? signal}): ${stderr.slice(-400)}`)),
    );
    /** Resolves once stdout has a line with `msg`, or with the reason when the process ended first. */
    const logged = async (msg: string): Promise<string | undefined> => {
      const seen = (): boolean => stdout.split("\n").some((l) => l.includes(`"msg":"${msg}"`));
      for (;;) {
        if (seen()) return undefined;
        const out = await Promise.race([exited, new Promise<undefined>((r) => setTimeout(() => r(undefined), 20))]);
        if (out !== undefined) return seen() ? undefined : out;
      }
    };
    try {
      assert.equal(await logged("hello listening (gRPC over h2c, HTTP/1.1 beside it)"), undefined);
      const url = `http://127.0.0.1:${port}`;
      assert.equal((await post(url, { status: 503 })).status, 200);
      // The app says so once the change is applied; a process that crashed instead never does.
      assert.equal(await logged("settings changed"), undefined, "the process survived the control request");
      assert.equal(((await get(`${url}/`)) as { status: number }).status, 503, "the setting took effect");
      const client = createClient(HelloService, createGrpcTransport({ baseUrl: url }));
      assert.equal((await client.say({ text: "still here" })).pod, "hello-grpc-0", "gRPC is still served");
      assert.equal(child.exitCode, null);
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("refuse closes the gRPC listener (every protocol refused); serve opens it again on the same port", async () => {
    const port = await freePort();
    const id = identity(port);
    const app = new HelloApp(id, DEFAULT_SETTINGS, { host: "127.0.0.1" });
    const grpc = helloGrpcBeside(id, app);
    await grpc.listen(port, "127.0.0.1");
    const url = `http://127.0.0.1:${port}`;
    const client = createClient(HelloService, createGrpcTransport({ baseUrl: url }));
    try {
      assert.equal((await client.say({ text: "a" })).text, "a");
      assert.equal((await post(url, { mode: "refuse" })).status, 200);
      let answer: unknown;
      for (let i = 0; i < 100; i++) {
        answer = await get(`${url}/`);
        if (JSON.stringify(answer) === JSON.stringify({ error: "ECONNREFUSED" })) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.deepEqual(answer, { error: "ECONNREFUSED" });
      await assert.rejects(client.say({ text: "b" }), "gRPC is refused too");
      await app.control({ mode: "serve" });
      assert.equal(((await get(`${url}/`)) as { status: number }).status, 200);
      assert.equal((await client.say({ text: "c" })).text, "c");
    } finally {
      await app.close();
      await grpc.close();
    }
  });
});
