import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { Informer, type ListWatchClient } from "../../../src/kube/informer.js";
import { silentLogger } from "../../../src/base/log.js";
import { resources } from "../../../src/kube/resources.js";
import type { KubeObject } from "../../../src/kube/object.js";
import type { WatchEventType, WatchParams } from "../../../src/kube/client.js";

/** An object whose content changes with its version (so every update is a visible change). */
function obj(name: string, rv: string): KubeObject {
  return { metadata: { name, namespace: "ns", resourceVersion: rv, generation: Number(rv), labels: { k: name } } };
}

type Script = (
  emit: (t: WatchEventType, o: unknown) => void,
  signal: AbortSignal,
  params: WatchParams,
) => Promise<void>;

function fakeClient(
  lists: Array<{ items: KubeObject[]; rv: string }>,
  watches: Script[],
): ListWatchClient & { listCalls: number; watchParams: WatchParams[] } {
  const c = {
    listCalls: 0,
    watchParams: [] as WatchParams[],
    async list() {
      const l = lists[Math.min(c.listCalls, lists.length - 1)];
      c.listCalls++;
      return { items: l?.items ?? [], resourceVersion: l?.rv ?? "0" };
    },
    async watch(
      _r: unknown,
      params: WatchParams,
      onEvent: (t: WatchEventType, o: unknown) => void,
      signal: AbortSignal,
    ) {
      c.watchParams.push(params);
      const script =
        watches[c.watchParams.length - 1] ??
        ((_e, s) => new Promise<void>((r) => s.addEventListener("abort", () => r())));
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
  const r = new Informer({
    resource: resources.pods,
    labelSelector: "k",
    client,
    log: silentLogger,
    indexes: { k: (o) => o.metadata.labels?.k },
  });
  r.onChange((t, o) => events.push(`${t}:${o.metadata.name}`));
  await r.run(ac.signal);
  assert.equal(client.listCalls, 2);
  assert.equal(client.watchParams[0]?.resourceVersion, "5");
  assert.equal(client.watchParams[0]?.allowWatchBookmarks, true);
  assert.ok((client.watchParams[0]?.timeoutSeconds ?? 0) > 0);
  assert.equal(client.watchParams[1]?.resourceVersion, "8", "re-watch from the bookmark");
  assert.equal(client.watchParams[2]?.resourceVersion, "10", "after 410: from the new list");
  assert.deepEqual(events, [
    "added:a",
    "added:b",
    "added:x",
    "updated:x",
    "deleted:x",
    "updated:a",
    "added:c",
    "deleted:b",
  ]);
  assert.deepEqual(
    r
      .list()
      .map((o) => o.metadata.name)
      .sort(),
    ["a", "c"],
  );
  assert.equal(r.byIndex("k", "c")[0]?.metadata.name, "c");
  assert.equal(r.byIndex("k", "b").length, 0);
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
  const r = new Informer({
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

test("a transform trims what is cached; an update that changes nothing kept is stored but not announced", async () => {
  const ac = new AbortController();
  const big = (rv: string, phase: string, noise: string): KubeObject => ({
    metadata: { name: "p", namespace: "ns", resourceVersion: rv, labels: { k: "p" } },
    status: { phase, noise },
  });
  const client = fakeClient(
    [{ items: [big("1", "Pending", "a")], rv: "1" }],
    [
      async (emit, _s, params) => {
        assert.equal(params.namespace, "only-here");
        emit("MODIFIED", big("2", "Pending", "b")); // only a dropped field changed
        emit("MODIFIED", big("3", "Running", "b"));
        ac.abort();
      },
    ],
  );
  const r = new Informer({
    resource: resources.pods,
    labelSelector: "k",
    namespace: "only-here",
    client,
    log: silentLogger,
    transform: (o) => ({ metadata: o.metadata, status: { phase: (o.status as { phase: string }).phase } }),
  });
  const events: string[] = [];
  r.onChange((t, o) => events.push(`${t}:${(o.status as { phase: string }).phase}`));
  await r.run(ac.signal);
  assert.deepEqual(events, ["added:Pending", "updated:Running"]);
  const cached = r.get("ns", "p");
  assert.deepEqual(cached?.status, { phase: "Running" }, "the dropped field is not cached");
  assert.equal(cached?.metadata.resourceVersion, "3", "the quiet update was stored");
});

test("a value may index an object under several keys; an index added after start covers what is cached", async () => {
  const ac = new AbortController();
  const client = fakeClient([{ items: [obj("a", "1")], rv: "1" }], [async () => ac.abort()]);
  const r = new Informer({ resource: resources.pods, labelSelector: "k", client, log: silentLogger });
  r.addIndex("both", (o) => [`x-${o.metadata.name ?? ""}`, `y-${o.metadata.name ?? ""}`]);
  assert.throws(() => r.addIndex("both", () => undefined), /declared twice/);
  await r.run(ac.signal);
  assert.equal(r.byIndex("both", "x-a").length, 1);
  assert.equal(r.byIndex("both", "y-a").length, 1);
  r.addIndex("late", (o) => `late-${o.metadata.name ?? ""}`);
  assert.deepEqual(
    r.byIndex("late", "late-a").map((o) => o.metadata.name),
    ["a"],
  );
  assert.throws(() => r.addIndex("late", () => undefined), /declared twice/);
  assert.throws(() => r.byIndex("nope", "a"), /no index/);
});

test("an index finds exactly the cached objects with the value, through any sequence of adds, updates and deletes", async () => {
  // Values shared by none, one or several objects, and objects moving between values: one key is
  // held alone and several in a set, in both directions.
  const event = fc.record({
    type: fc.constantFrom<WatchEventType>("ADDED", "MODIFIED", "DELETED"),
    name: fc.constantFrom("a", "b", "c", "d"),
    group: fc.constantFrom("g1", "g2", "g3"),
  });
  await fc.assert(
    fc.asyncProperty(fc.array(event, { maxLength: 40 }), async (events) => {
      const ac = new AbortController();
      const client = fakeClient(
        [{ items: [], rv: "1" }],
        [
          async (emit) => {
            events.forEach((e, i) =>
              emit(e.type, {
                metadata: { name: e.name, namespace: "ns", resourceVersion: String(i + 2), labels: { g: e.group } },
              }),
            );
            ac.abort();
          },
        ],
      );
      const r = new Informer({
        resource: resources.pods,
        labelSelector: "g",
        client,
        log: silentLogger,
        indexes: { g: (o) => o.metadata.labels?.g },
      });
      await r.run(ac.signal);
      for (const g of ["g1", "g2", "g3"]) {
        const want = r
          .list()
          .filter((o) => o.metadata.labels?.g === g)
          .map((o) => o.metadata.name)
          .sort();
        const got = r
          .byIndex("g", g)
          .map((o) => o.metadata.name)
          .sort();
        assert.deepEqual(got, want, g);
      }
    }),
    { numRuns: 300 },
  );
});
