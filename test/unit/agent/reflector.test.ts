import { test } from "node:test";
import assert from "node:assert/strict";
import { Reflector, type ListWatchClient } from "../../../src/agent/runtime/reflector.js";
import { silentLogger } from "../../../src/agent/runtime/log.js";
import { resources } from "../../../src/kube/resources.js";
import type { KubeObject } from "../../../src/kube/object.js";
import type { WatchEventType, WatchParams } from "../../../src/kube/client.js";

function obj(name: string, rv: string): KubeObject {
  return { metadata: { name, namespace: "ns", resourceVersion: rv, labels: { k: name } } };
}

type Script = (emit: (t: WatchEventType, o: unknown) => void, signal: AbortSignal, params: WatchParams) => Promise<void>;

function fakeClient(lists: Array<{ items: KubeObject[]; rv: string }>, watches: Script[]): ListWatchClient & { listCalls: number; watchParams: WatchParams[] } {
  const c = {
    listCalls: 0,
    watchParams: [] as WatchParams[],
    async list() {
      const l = lists[Math.min(c.listCalls, lists.length - 1)];
      c.listCalls++;
      return { items: l?.items ?? [], resourceVersion: l?.rv ?? "0" };
    },
    async watch(_r: unknown, params: WatchParams, onEvent: (t: WatchEventType, o: unknown) => void, signal: AbortSignal) {
      c.watchParams.push(params);
      const script = watches[c.watchParams.length - 1] ?? ((_e, s) => new Promise<void>((r) => s.addEventListener("abort", () => r())));
      await script(onEvent, signal, params);
    },
  };
  return c;
}

test("list, watch with bookmarks from the list's version, re-watch after a clean end, re-list on 410", async () => {
  const ac = new AbortController();
  const events: string[] = [];
  const client = fakeClient(
    [
      { items: [obj("a", "1"), obj("b", "1")], rv: "5" },
      { items: [obj("a", "9"), obj("c", "9")], rv: "10" },
    ],
    [
      async (emit) => {
        emit("ADDED", obj("x", "6"));
        emit("MODIFIED", obj("x", "7"));
        emit("DELETED", obj("x", "8"));
        emit("BOOKMARK", { metadata: { resourceVersion: "8" } });
      },
      async (emit) => emit("ERROR", { kind: "Status", code: 410 }),
      async () => {
        ac.abort();
      },
    ],
  );
  const r = new Reflector({ resource: resources.pods, labelSelector: "k", client, log: silentLogger, indexBy: (o) => o.metadata.labels?.k });
  r.onChange((t, o) => events.push(`${t}:${o.metadata.name}`));
  await r.run(ac.signal);
  assert.equal(client.listCalls, 2);
  assert.equal(client.watchParams[0]?.resourceVersion, "5");
  assert.equal(client.watchParams[0]?.allowWatchBookmarks, true);
  assert.ok((client.watchParams[0]?.timeoutSeconds ?? 0) > 0);
  assert.equal(client.watchParams[1]?.resourceVersion, "8", "re-watch from the bookmark");
  assert.equal(client.watchParams[2]?.resourceVersion, "10", "after 410: from the new list");
  assert.deepEqual(events, ["added:a", "added:b", "added:x", "updated:x", "deleted:x", "updated:a", "added:c", "deleted:b"]);
  assert.deepEqual(r.list().map((o) => o.metadata.name).sort(), ["a", "c"]);
  assert.equal(r.byIndex("c")[0]?.metadata.name, "c");
  assert.equal(r.byIndex("b").length, 0);
});

test("a silent watch is aborted by the watchdog and restarted; failures retry forever", async () => {
  const ac = new AbortController();
  const client = fakeClient(
    [{ items: [], rv: "1" }],
    [
      (_e, signal) => new Promise<void>((r) => signal.addEventListener("abort", () => r())), // silent
      async () => {
        throw new Error("ECONNRESET");
      },
      async () => {
        ac.abort();
      },
    ],
  );
  const kinds: string[] = [];
  const r = new Reflector({
    resource: resources.pods,
    labelSelector: "k",
    client,
    log: silentLogger,
    watchdogMs: 20,
    backoff: { baseMs: 1, capMs: 2 },
    onEvent: (k) => kinds.push(k),
  });
  await r.run(ac.signal);
  assert.ok(kinds.includes("watchdog"));
  assert.ok(kinds.includes("error"));
  assert.equal(client.watchParams.length, 3);
  assert.equal(r.synced, true);
});
