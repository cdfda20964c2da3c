// Many calls in flight at once: ctrl links every call's signal to its shutdown signal with one
// "abort" listener, which made Node print a plain-text MaxListenersExceededWarning into ctrl's
// JSON log past ten calls. With 50 streams and 50 unary calls in flight: no warning, and once
// they end the shared signal's listeners are back to their baseline (nothing leaks); the real
// `krane ctrl serve` process writes only JSON lines.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { getEventListeners, setMaxListeners } from "node:events";
import { createClient } from "@connectrpc/connect";
import { ClusterService } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { WorkspaceService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { startTestCtrl, tempDir, transportFor, type TestCtrl } from "./support.js";
import { spawnCtrl } from "./process.js";
import { addUserToken, generateToken } from "../../../src/ctrl/domain/tokens.js";
import { issueClusterToken } from "../../../src/ctrl/domain/clusters.js";
import { Store } from "../../../src/ctrl/db/store.js";

const CALLS = 50;
const dir = tempDir();

after(() => dir.remove());

/** Opens `n` watch streams and waits until each has its first message; returns a closer. */
async function openStreams(url: string, token: string, n: number): Promise<() => Promise<void>> {
  const client = createClient(ClusterService, transportFor(url, token));
  const stop = new AbortController();
  // Connect's client also adds one listener per call to the signal a call is given; this test's
  // own client shares one signal across its streams, so it lifts the limit on that signal: the
  // warning this test looks for is the server's.
  setMaxListeners(0, stop.signal);
  const started: Promise<void>[] = [];
  const ended: Promise<void>[] = [];
  for (let i = 0; i < n; i++) {
    let first!: () => void;
    started.push(new Promise<void>((r) => (first = r)));
    ended.push(
      (async () => {
        try {
          for await (const _ of client.watchDeployments(
            { region: "local", versionLastSeen: 0n },
            { signal: stop.signal },
          ))
            first();
        } catch {
          // aborted by the test
        }
      })(),
    );
  }
  await Promise.all(started);
  return async () => {
    stop.abort();
    await Promise.all(ended);
  };
}

async function unaryBurst(url: string, token: string, n: number): Promise<void> {
  const client = createClient(WorkspaceService, transportFor(url, token));
  await Promise.all(Array.from({ length: n }, () => client.listWorkspaces({})));
}

let ctrl: TestCtrl;
const warnings: Error[] = [];
const onWarning = (w: Error): void => {
  warnings.push(w);
};

before(async () => {
  ctrl = await startTestCtrl(`${dir.path}/inproc.db`);
  process.on("warning", onWarning);
});

after(async () => {
  process.off("warning", onWarning);
  await ctrl.close();
});

test(`${CALLS} streams and ${CALLS} unary calls in flight: no warning, and every listener is removed when they end`, async () => {
  const baseline = getEventListeners(ctrl.shutdownSignal, "abort").length;
  const token = await ctrl.agentToken("local");
  const close = await openStreams(ctrl.url, token, CALLS);
  const during = getEventListeners(ctrl.shutdownSignal, "abort").length;
  await unaryBurst(ctrl.url, ctrl.adminToken, CALLS);
  await close();
  // The server sees the client's cancel a moment after the client does.
  const deadline = Date.now() + 5000;
  while (getEventListeners(ctrl.shutdownSignal, "abort").length !== baseline && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 20));
  assert.equal(getEventListeners(ctrl.shutdownSignal, "abort").length, baseline);
  assert.ok(
    during >= baseline + CALLS,
    `the streams held ${during - baseline} listeners, expected ${CALLS}: is the signal still linked to calls?`,
  );
  assert.deepEqual(
    warnings.map((w) => `${w.name}: ${w.message}`),
    [],
  );
});

test("the real `krane ctrl serve` writes only JSON lines under the same load", async () => {
  const db = `${dir.path}/proc.db`;
  const admin = generateToken("user");
  // Tokens are made before ctrl starts (ctrl migrates the database when it opens it).
  const store = await Store.open({ url: db });
  await addUserToken(store, "admin", admin);
  const agent = (await issueClusterToken(store, "local", "default")).token;
  await store.close();
  const proc = await spawnCtrl(["--database", db]);
  let stderr = "";
  proc.child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  try {
    const close = await openStreams(proc.url, agent, CALLS);
    await unaryBurst(proc.url, admin, CALLS);
    await close();
  } finally {
    assert.equal(await proc.stop(), 0);
  }
  assert.equal(stderr, "", "ctrl wrote to stderr");
  const notJson = proc
    .stdout()
    .split("\n")
    .filter((l) => l.trim() !== "" && !isJson(l));
  assert.deepEqual(notJson, []);
});

function isJson(line: string): boolean {
  try {
    JSON.parse(line);
    return true;
  } catch {
    return false;
  }
}
