import { test } from "node:test";
import assert from "node:assert/strict";
import {
  BOOST_WINDOW_MS,
  boostKey,
  boostStep,
  resizePatch,
  StartupBoost,
} from "../../../../src/agent/deployments/boost.js";
import { trimPod } from "../../../../src/agent/runtime/trim.js";
import type { KubeClient } from "../../../../src/kube/client.js";
import type { KubeObject } from "../../../../src/kube/object.js";

const ON = { millicores: 1000 };

function pod(o: {
  cpu?: string;
  ready?: boolean;
  restarts?: number;
  deleting?: boolean;
  phase?: string;
  name?: string;
}): KubeObject {
  return {
    metadata: {
      name: o.name ?? "web-abcde",
      namespace: "ws-1",
      ...(o.deleting ? { deletionTimestamp: "2026-11-30T00:00:00Z" } : {}),
    },
    spec: {
      containers: [{ name: "app", resources: { limits: { cpu: o.cpu ?? "100m", memory: "128Mi" } } }],
    },
    status: {
      phase: o.phase ?? "Pending",
      conditions: [{ type: "Ready", status: o.ready ? "True" : "False" }],
      containerStatuses: [{ name: "app", restartCount: o.restarts ?? 0 }],
    },
  };
}

test("a starting pod at its own limit is boosted, once", () => {
  assert.deepEqual(boostStep(pod({}), 100, ON, 0, undefined), { action: "up", cpu: "1000m" });
  // Boosted before by this process (and resized down since, or refused): never again.
  assert.equal(boostStep(pod({}), 100, ON, 0, 5), undefined);
});

test("no boost for a Ready, restarted, terminating or finished pod, nor when off or not above the revision's limit", () => {
  assert.equal(boostStep(pod({ ready: true }), 100, ON, 0, undefined), undefined);
  assert.equal(boostStep(pod({ restarts: 1 }), 100, ON, 0, undefined), undefined);
  assert.equal(boostStep(pod({ deleting: true }), 100, ON, 0, undefined), undefined);
  assert.equal(boostStep(pod({ phase: "Failed" }), 100, ON, 0, undefined), undefined);
  assert.equal(boostStep(pod({}), 100, { millicores: 0 }, 0, undefined), undefined);
  assert.equal(boostStep(pod({ cpu: "2" }), 2000, ON, 0, undefined), undefined);
  // A pod whose limit is neither the revision's nor above it (written by someone else): left alone.
  assert.equal(boostStep(pod({ cpu: "50m" }), 100, ON, 0, undefined), undefined);
});

test("a boosted pod gets its own limit back once Ready", () => {
  assert.equal(boostStep(pod({ cpu: "1" }), 100, ON, 1_000, 0), undefined);
  assert.deepEqual(boostStep(pod({ cpu: "1", ready: true }), 100, ON, 1_000, 0), { action: "down", cpu: "100m" });
});

test("a boosted pod that is not Ready within the window gets its own limit back (a crash loop keeps no boost)", () => {
  assert.equal(boostStep(pod({ cpu: "1" }), 100, ON, BOOST_WINDOW_MS - 1, 0), undefined);
  assert.deepEqual(boostStep(pod({ cpu: "1" }), 100, ON, BOOST_WINDOW_MS, 0), { action: "down", cpu: "100m" });
  assert.deepEqual(boostStep(pod({ cpu: "1" }), 100, { millicores: 1000, windowMs: 10 }, 10, 0), {
    action: "down",
    cpu: "100m",
  });
});

test("a pod above its limit that this process did not boost (an agent restart, the boost turned off) is resized down at once", () => {
  assert.deepEqual(boostStep(pod({ cpu: "1" }), 100, ON, 0, undefined), { action: "down", cpu: "100m" });
  assert.deepEqual(boostStep(pod({ cpu: "1" }), 100, { millicores: 0 }, 0, undefined), {
    action: "down",
    cpu: "100m",
  });
});

test("the pod as the agent's cache keeps it (trimmed) is boosted and resized back alike", () => {
  assert.deepEqual(boostStep(trimPod(pod({})), 100, ON, 0, undefined), { action: "up", cpu: "1000m" });
  assert.deepEqual(boostStep(trimPod(pod({ cpu: "1", ready: true })), 100, ON, 0, 0), { action: "down", cpu: "100m" });
  assert.notEqual(boostKey(trimPod(pod({ restarts: 1 }))), boostKey(trimPod(pod({}))));
});

test("the boost key changes with readiness, restarts and the CPU limit", () => {
  const base = boostKey(pod({}));
  assert.equal(boostKey(undefined), "");
  assert.notEqual(boostKey(pod({ ready: true })), base);
  assert.notEqual(boostKey(pod({ restarts: 1 })), base);
  assert.notEqual(boostKey(pod({ cpu: "1" })), base);
  assert.equal(boostKey(pod({ name: "other" })), base);
});

test("the resize patch tests the container's name before replacing its CPU limit", () => {
  assert.deepEqual(resizePatch(1, "1000m"), [
    { op: "test", path: "/spec/containers/1/name", value: "app" },
    { op: "replace", path: "/spec/containers/1/resources/limits/cpu", value: "1000m" },
  ]);
});

/** A KubeClient that records resizes (and refuses those of `refuse`). */
function recorder(refuse = new Set<string>()): { kube: KubeClient; calls: string[] } {
  const calls: string[] = [];
  const kube = {
    patchSubresource(_r: unknown, ns: string, name: string, sub: string, patch: { value?: unknown }[]) {
      calls.push(`${ns}/${name}/${sub}=${String(patch[1]?.value)}`);
      return refuse.has(name) ? Promise.reject(new Error("exceeded quota")) : Promise.resolve();
    },
  } as unknown as KubeClient;
  return { kube, calls };
}

test("StartupBoost: up while starting, down when Ready, a requeue for the window, nothing twice", async () => {
  let now = 0;
  const b = new StartupBoost(ON, () => now);
  const { kube, calls } = recorder();
  const errors: string[] = [];
  const onError = (p: string): number => errors.push(p);
  const signal = new AbortController().signal;
  assert.equal(await b.apply(kube, "dep_1", [pod({})], 100, signal, onError), BOOST_WINDOW_MS);
  assert.deepEqual(calls, ["ws-1/web-abcde/resize=1000m"]);
  // The informer still shows the old limit: no second boost.
  now = 500;
  assert.equal(await b.apply(kube, "dep_1", [pod({})], 100, signal, onError), undefined);
  // Boosted and starting: what is left of the window.
  now = 1_000;
  assert.equal(await b.apply(kube, "dep_1", [pod({ cpu: "1" })], 100, signal, onError), BOOST_WINDOW_MS - 1_000);
  assert.equal(calls.length, 1);
  await b.apply(kube, "dep_1", [pod({ cpu: "1", ready: true })], 100, signal, onError);
  assert.deepEqual(calls.slice(1), ["ws-1/web-abcde/resize=100m"]);
  // Ready at its own limit, then not Ready again (a failing probe): not boosted again.
  await b.apply(kube, "dep_1", [pod({})], 100, signal, onError);
  assert.equal(calls.length, 2);
  assert.deepEqual(errors, []);
});

test("StartupBoost: a refused boost is reported and not retried; a gone pod is forgotten", async () => {
  const b = new StartupBoost(ON, () => 0);
  const { kube, calls } = recorder(new Set(["web-abcde"]));
  const errors: string[] = [];
  const signal = new AbortController().signal;
  await b.apply(kube, "dep_1", [pod({})], 100, signal, (p) => errors.push(p));
  await b.apply(kube, "dep_1", [pod({})], 100, signal, (p) => errors.push(p));
  assert.deepEqual(errors, ["ws-1/web-abcde"]);
  assert.equal(calls.length, 1);
  // The pod went (and a new one of the same name would be a new start): forgotten.
  await b.apply(kube, "dep_1", [], 100, signal, (p) => errors.push(p));
  await b.apply(kube, "dep_1", [pod({})], 100, signal, (p) => errors.push(p));
  assert.equal(calls.length, 2);
});
