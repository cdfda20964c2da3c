import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  cannotStart,
  eventLine,
  eventsFingerprint,
  eventsKey,
  eventsOf,
  podEvents,
  startFailureEvents,
  startFailureMessage,
} from "../../../../src/agent/deployments/events.js";
import { instancesOf } from "../../../../src/agent/deployments/status.js";
import { InstanceStatus } from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { MESSAGE_MAX } from "../../../../src/agent/runtime/trim.js";
import { cachedBy } from "../../../support/kind-caches.js";
import { resources } from "../../../../src/kube/resources.js";
import type { KubeObject } from "../../../../src/kube/object.js";

const T0 = "2026-01-01T00:00:00Z";
const T1 = "2026-01-01T00:01:00Z";
const T2 = "2026-01-01T00:02:00Z";

function pod(name: string, status: Record<string, unknown>): KubeObject {
  return { metadata: { name, namespace: "ws-1" }, spec: { containers: [{ name: "app" }] }, status };
}

const unready = (at: string) => [{ type: "Ready", status: "False", lastTransitionTime: at }];

test("an OOM kill is a terminated event with its exit code, restarts and finish time", () => {
  const [e, ...rest] = podEvents(
    pod("a", {
      phase: "Running",
      conditions: [{ type: "Ready", status: "True", lastTransitionTime: T2 }],
      containerStatuses: [
        {
          image: "krane.local/hello:v1",
          restartCount: 1,
          ready: true,
          started: true,
          state: { running: { startedAt: T2 } },
          lastState: { terminated: { reason: "OOMKilled", exitCode: 137, finishedAt: T1 } },
        },
      ],
    }),
  );
  assert.equal(rest.length, 0);
  assert.equal(e?.kind, "terminated");
  assert.equal(e?.reason, "OOMKilled");
  assert.equal(e?.exitCode, 137);
  assert.equal(e?.restarts, 1);
  assert.equal(e?.atUnixMs, BigInt(Date.parse(T1)));
  assert.equal(e?.image, "krane.local/hello:v1");
});

test("a crash loop is the last termination and CrashLoopBackOff with that exit code", () => {
  const events = podEvents(
    pod("a", {
      conditions: unready(T0),
      containerStatuses: [
        {
          image: "img",
          restartCount: 5,
          ready: false,
          state: { waiting: { reason: "CrashLoopBackOff", message: "back-off 2m40s restarting failed container" } },
          lastState: { terminated: { reason: "Error", exitCode: 3, finishedAt: T1 } },
        },
      ],
    }),
  );
  assert.deepEqual(
    events.map((e) => [e.kind, e.reason, e.exitCode, e.restarts, Number(e.atUnixMs)]),
    [
      ["terminated", "Error", 3, 5, Date.parse(T1)],
      ["waiting", "CrashLoopBackOff", 3, 5, Date.parse(T1)],
    ],
  );
});

test("an image pull error names the image and keeps the kubelet's message, cut and without control characters", () => {
  const long = `Failed to pull image "docker.io/nope:1": not found\n${"x".repeat(2000)}`;
  const [e] = podEvents(
    pod("a", {
      conditions: unready(T0),
      containerStatuses: [{ image: "docker.io/nope:1", state: { waiting: { reason: "ErrImagePull", message: long } } }],
    }),
  );
  assert.equal(e?.reason, "ErrImagePull");
  assert.equal(e?.image, "docker.io/nope:1");
  assert.equal(e?.exitCode, undefined);
  assert.equal(e?.atUnixMs, BigInt(Date.parse(T0)));
  assert.ok(e?.message.startsWith('Failed to pull image "docker.io/nope:1": not found '));
  assert.ok((e?.message.length ?? 0) <= MESSAGE_MAX);
});

test("a normal start is no event; a container that was ready and stopped being ready is", () => {
  const starting = pod("a", {
    conditions: unready(T0),
    containerStatuses: [{ image: "i", ready: false, started: true, state: { running: { startedAt: T1 } } }],
  });
  assert.deepEqual(podEvents(starting), []);
  const creating = pod("b", {
    conditions: unready(T0),
    containerStatuses: [{ image: "i", state: { waiting: { reason: "ContainerCreating" } } }],
  });
  assert.deepEqual(podEvents(creating), []);
  const failing = pod("c", {
    conditions: unready(T2),
    containerStatuses: [{ image: "i", ready: false, started: true, state: { running: { startedAt: T1 } } }],
  });
  const [e] = podEvents(failing);
  assert.equal(e?.kind, "unready");
  assert.equal(e?.reason, "ReadinessProbeFailing");
  assert.equal(e?.atUnixMs, BigInt(Date.parse(T2)));
});

test("an evicted pod is an eviction with the kubelet's message", () => {
  const [e] = podEvents(
    pod("a", {
      phase: "Failed",
      reason: "Evicted",
      message: "The node was low on resource: memory.",
      conditions: unready(T1),
      containerStatuses: [],
    }),
  );
  assert.equal(e?.kind, "evicted");
  assert.equal(e?.message, "The node was low on resource: memory.");
});

test("an eviction through the API (a node drain) is an eviction as soon as the pod carries DisruptionTarget", () => {
  const running = {
    image: "img",
    ready: true,
    started: true,
    state: { running: { startedAt: T0 } },
  };
  const drained = pod("a", {
    phase: "Running",
    conditions: [
      { type: "Ready", status: "True", lastTransitionTime: T0 },
      {
        type: "DisruptionTarget",
        status: "True",
        lastTransitionTime: T1,
        reason: "EvictionByEvictionAPI",
        message: "Eviction API: evicting",
      },
    ],
    containerStatuses: [running],
  });
  const events = podEvents(drained);
  assert.deepEqual(
    events.map((e) => [e.kind, e.reason, e.message, Number(e.atUnixMs)]),
    [["evicted", "EvictionByEvictionAPI", "Eviction API: evicting", Date.parse(T1)]],
  );
  // The cache keeps what the event needs.
  assert.equal(eventsKey(cachedBy(resources.pods)(structuredClone(drained))), eventsKey(drained));
  // The kubelet's own eviction sets the condition too: one event, with the kubelet's reason and message.
  const [byKubelet, ...more] = podEvents(
    pod("b", {
      phase: "Failed",
      reason: "Evicted",
      message: "The node was low on resource: ephemeral-storage.",
      conditions: [
        ...unready(T1),
        { type: "DisruptionTarget", status: "True", lastTransitionTime: T2, reason: "TerminationByKubelet" },
      ],
      containerStatuses: [],
    }),
  );
  assert.equal(more.length, 0);
  assert.deepEqual(
    [byKubelet?.reason, byKubelet?.message, Number(byKubelet?.atUnixMs)],
    ["Evicted", "The node was low on resource: ephemeral-storage.", Date.parse(T2)],
  );
  // A condition that is not (or no longer) true is no eviction.
  assert.deepEqual(
    podEvents(
      pod("c", {
        conditions: [{ type: "DisruptionTarget", status: "False", reason: "EvictionByEvictionAPI" }],
        containerStatuses: [running],
      }),
    ),
    [],
  );
});

const arbTime = fc.integer({ min: 1, max: 2_000_000_000 }).map((s) => new Date(s * 1000).toISOString());
const arbState = fc.oneof(
  fc.constant({}),
  fc.record({ running: fc.record({ startedAt: arbTime }) }),
  fc.record({
    waiting: fc.record({
      reason: fc.constantFrom("CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff", "ContainerCreating", ""),
      message: fc.string({ maxLength: 800 }),
    }),
  }),
  fc.record({
    terminated: fc.record({
      reason: fc.constantFrom("OOMKilled", "Error", "Completed"),
      exitCode: fc.integer({ min: 0, max: 255 }),
      finishedAt: arbTime,
      message: fc.string({ maxLength: 800 }),
    }),
  }),
);
const arbPod: fc.Arbitrary<KubeObject> = fc
  .record({
    name: fc.string({ minLength: 1, maxLength: 10 }),
    ready: fc.boolean(),
    readyAt: arbTime,
    evicted: fc.boolean(),
    disruption: fc.option(
      fc.record({
        status: fc.constantFrom("True", "False"),
        reason: fc.constantFrom(
          "EvictionByEvictionAPI",
          "PreemptionByScheduler",
          "TerminationByKubelet",
          "bad reason!",
        ),
        message: fc.string({ maxLength: 800 }),
        lastTransitionTime: arbTime,
      }),
      { nil: undefined },
    ),
    containers: fc.array(
      fc.record({
        image: fc.string({ maxLength: 20 }),
        restartCount: fc.integer({ min: 0, max: 100_000 }),
        ready: fc.boolean(),
        started: fc.boolean(),
        state: arbState,
        lastState: fc.oneof(fc.constant({}), arbState),
      }),
      { maxLength: 3 },
    ),
  })
  .map((p) =>
    pod(p.name, {
      phase: p.evicted ? "Failed" : "Running",
      ...(p.evicted ? { reason: "Evicted", message: "low on memory" } : {}),
      conditions: [
        { type: "Ready", status: p.ready ? "True" : "False", lastTransitionTime: p.readyAt },
        ...(p.disruption ? [{ type: "DisruptionTarget", ...p.disruption }] : []),
      ],
      containerStatuses: p.containers,
    }),
  );

test("property: a pod yields at most 3 events per container plus an eviction, each well-formed", () => {
  fc.assert(
    fc.property(arbPod, (p) => {
      const events = podEvents(p);
      const containers = (p.status as { containerStatuses: unknown[] }).containerStatuses.length;
      assert.ok(events.length <= 3 * containers + 1);
      for (const e of events) {
        assert.equal(e.instance, p.metadata.name);
        assert.ok(["terminated", "waiting", "unready", "evicted"].includes(e.kind));
        assert.match(e.reason, /^[A-Za-z]+$/);
        assert.ok(e.message.length <= MESSAGE_MAX);
        assert.ok(e.restarts >= 0);
      }
    }),
  );
});

test("property: the cache's trimmed pod yields the same events, and the events do not depend on pod order", () => {
  const trim = cachedBy(resources.pods);
  fc.assert(
    fc.property(fc.uniqueArray(arbPod, { maxLength: 5, selector: (p) => p.metadata.name }), (pods) => {
      for (const p of pods) {
        const whole = structuredClone(p);
        assert.equal(eventsKey(trim(structuredClone(p))), eventsKey(whole));
      }
      const key = (ps: KubeObject[]) => eventsOf(ps).map(eventLine).join("\n");
      assert.equal(key([...pods].reverse()), key(pods));
    }),
  );
});

test("property: the same status seen again is the same events (a resend changes no key)", () => {
  fc.assert(
    fc.property(arbPod, (p) => {
      assert.equal(eventsKey(structuredClone(p)), eventsKey(p));
    }),
  );
});

test("the fingerprint moves with a new fact and only then (one report per change)", () => {
  const crash = (restarts: number, finishedAt: string) =>
    pod("a", {
      conditions: unready(T0),
      containerStatuses: [
        {
          image: "i",
          restartCount: restarts,
          state: { waiting: { reason: "CrashLoopBackOff" } },
          lastState: { terminated: { reason: "Error", exitCode: 3, finishedAt } },
        },
      ],
    });
  const fp = (p: KubeObject) => eventsFingerprint(eventsOf([p]));
  assert.equal(fp(crash(1, T1)), fp(crash(1, T1)));
  assert.notEqual(fp(crash(2, T2)), fp(crash(1, T1)));
  assert.equal(fp(pod("b", { conditions: unready(T0) })), eventsFingerprint([]));
});

// ---------------------------------------------------------------- pods that do not start

/** A Warning event about pod `name`, as the cluster writes it (trimmed as the agent caches it). */
function warning(name: string, reason: string, message: string, first: string): KubeObject {
  return cachedBy(resources.podWarningEvents)({
    apiVersion: "v1",
    kind: "Event",
    metadata: { name: `${name}.1`, namespace: "ws-1", resourceVersion: "1", managedFields: [] } as never,
    involvedObject: { kind: "Pod", name, namespace: "ws-1", uid: "u1" },
    reason,
    message,
    type: "Warning",
    firstTimestamp: first,
    lastTimestamp: T2,
    count: 7,
  } as KubeObject);
}

const MOUNT_FAILED =
  'MountVolume.SetUp failed for volume "krane-external-secrets" : rpc error: code = Unknown desc = failed to mount ' +
  "secrets store objects for pod ws-1/a, err: rpc error: code = Unknown desc = failed to mount objects, error: " +
  'secret "shop/db-cert" not found';
const SYNC_FAILED =
  "failed to get data in spc ws-1/ext-1 for secret ext-1, err: file matching objectName MISSING not found in the pod";

test("the cause of a mount or sync failure is cut out of its wrapping, naming the external secrets", () => {
  assert.equal(startFailureMessage("FailedMount", MOUNT_FAILED), 'external secrets: secret "shop/db-cert" not found');
  assert.equal(
    startFailureMessage("FailedToCreateSecret", SYNC_FAILED),
    "external secrets: file matching objectName MISSING not found in the pod",
  );
  assert.equal(
    startFailureMessage("FailedMount", 'MountVolume.SetUp failed for volume "data" : no such thing'),
    'volume data: MountVolume.SetUp failed for volume "data" : no such thing',
  );
});

test("a pod that cannot mount its volume is a failed instance with the reason, until a container runs", () => {
  const stuck = pod("a", { phase: "Pending", conditions: unready(T0) });
  const warnings = [
    warning("a", "FailedMount", MOUNT_FAILED, T1),
    warning("a", "FailedMount", "an older one", T0),
    warning("a", "Unhealthy", "probe failed", T1),
  ];
  assert.equal((warnings[2] as { message?: string }).message, undefined, "other reasons keep no message");
  const [e, ...rest] = startFailureEvents(stuck, warnings);
  assert.equal(rest.length, 0, "the newest of each reason, other reasons ignored");
  assert.deepEqual(
    [e?.kind, e?.reason, e?.atUnixMs, e?.message],
    ["waiting", "FailedMount", BigInt(Date.parse(T1)), 'external secrets: secret "shop/db-cert" not found'],
  );
  assert.equal(cannotStart(stuck, warnings), true);
  // Without an IP a pod is not reported at all, unless it cannot start: then it is, as failed.
  assert.deepEqual(
    instancesOf([stuck], () => ""),
    [],
  );
  const [i] = instancesOf(
    [stuck],
    () => "",
    (p) => cannotStart(p, warnings),
  );
  assert.deepEqual([i?.k8sName, i?.status, i?.address], ["a", InstanceStatus.FAILED, ""]);
  assert.deepEqual(
    eventsOf([stuck], () => warnings).map((x) => x.reason),
    ["FailedMount"],
  );
  // Once a container has run the old failure is history: nothing is reported for it.
  const running = pod("a", {
    phase: "Running",
    podIP: "10.0.0.5",
    conditions: [
      { type: "Ready", status: "True", lastTransitionTime: T2 },
      { type: "ContainersReady", status: "True", lastTransitionTime: T2 },
    ],
    containerStatuses: [
      { image: "x", restartCount: 0, ready: true, started: true, state: { running: { startedAt: T2 } } },
    ],
  });
  assert.deepEqual(startFailureEvents(running, warnings), []);
  assert.equal(
    instancesOf(
      [running],
      () => "",
      (p) => cannotStart(p, warnings),
    )[0]?.status,
    InstanceStatus.RUNNING,
  );
});

test("a Secret the store's driver cannot sync: the container waits and the driver's reason names the key", () => {
  const waiting = pod("b", {
    phase: "Pending",
    podIP: "10.0.0.6",
    conditions: unready(T0),
    containerStatuses: [
      {
        image: "x",
        restartCount: 0,
        ready: false,
        state: { waiting: { reason: "CreateContainerConfigError", message: 'secret "ext-1" not found' } },
      },
    ],
  });
  const events = eventsOf([waiting], () => [warning("b", "FailedToCreateSecret", SYNC_FAILED, T0)]);
  // The driver's reason replaces the kubelet's "secret not found", even within the same second
  // (which one ctrl would show as the last event would otherwise be a matter of order).
  assert.deepEqual(
    events.map((x) => [x.reason, x.message]),
    [["FailedToCreateSecret", "external secrets: file matching objectName MISSING not found in the pod"]],
  );
  assert.deepEqual(
    eventsOf([waiting]).map((x) => x.reason),
    ["CreateContainerConfigError"],
    "without the driver's event the kubelet's reason stays",
  );
});
