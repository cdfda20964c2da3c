// KubeClient.watch aborted from inside its own event callback (as the informer does on a 410
// ERROR event or when its watchdog finds a watch silent) must end the watch quietly: Node destroys
// the kept-alive socket with an AbortError after the answer began, and without a listener that
// was an uncaught exception (an agent process would have exited). A real HTTP server on loopback.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as http from "node:http";
import { KubeClient } from "../../../src/kube/client.js";
import { resources } from "../../../src/kube/resources.js";
import { loopbackKubeConfig } from "./support.js";

test("a watch aborted from its event callback ends without an uncaught error", async () => {
  const gone = {
    type: "ERROR",
    object: { kind: "Status", apiVersion: "v1", status: "Failure", reason: "Expired", code: 410 },
  };
  const server = http.createServer((_req, res) => {
    // The whole answer at once, as kube-apiserver's cache answers a too-old resourceVersion: the
    // callback aborts while the socket is about to go back to the agent's pool.
    res.writeHead(200, { "content-type": "application/json" }).end(`${JSON.stringify(gone)}\n`);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const uncaught: unknown[] = [];
  const monitor = (err: unknown): void => void uncaught.push(err);
  process.on("uncaughtExceptionMonitor", monitor);
  const client = new KubeClient(loopbackKubeConfig(server));
  try {
    for (let i = 0; i < 3; i++) {
      const ac = new AbortController();
      const seen: string[] = [];
      await client.watch(
        resources.replicaSets,
        { namespace: "ns" },
        (type) => {
          seen.push(type);
          ac.abort();
        },
        ac.signal,
      );
      assert.deepEqual(seen, ["ERROR"]);
    }
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(uncaught, []);
  } finally {
    process.off("uncaughtExceptionMonitor", monitor);
    client.close();
    server.closeAllConnections();
    server.close();
  }
});
