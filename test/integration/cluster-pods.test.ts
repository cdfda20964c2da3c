// Simulated pod behaviour for rollout tests: readiness can be delayed, and pods of chosen
// images start (Running, with an IP) but never become Ready.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from "@kubernetes/client-node";
import { eventually, useCluster } from "../support/cluster.js";

const h = useCluster({ pods: { readyDelayMs: 3000, neverReadyImages: ["example.com/broken:1"] } });

const condition = (p: V1Pod, type: string) => p.status?.conditions?.find((c) => c.type === type);

test("readiness is delayed, and a never-ready image runs with an IP but stays unready", async () => {
  const core = h.cluster.kubeConfig().makeApiClient(CoreV1Api);
  await core.patchNamespace(
    { name: "pods", body: { apiVersion: "v1", kind: "Namespace", metadata: { name: "pods" } }, fieldManager: "krane" },
    setHeaderOptions("Content-Type", PatchStrategy.ServerSideApply),
  );
  await eventually("the namespace's default service account", async () =>
    (await core.readNamespacedServiceAccount({ name: "default", namespace: "pods" })) ? true : undefined,
  );
  for (const [name, image] of [
    ["good", "example.com/good:1"],
    ["broken", "example.com/broken:1"],
  ] as const) {
    await core.createNamespacedPod({
      namespace: "pods",
      body: { metadata: { name }, spec: { containers: [{ name: "app", image }] } },
    });
  }
  const good = await eventually("the good pod to become Ready", async () => {
    const p = await core.readNamespacedPod({ name: "good", namespace: "pods" });
    return condition(p, "Ready")?.status === "True" ? p : undefined;
  });
  const created = new Date(good.metadata?.creationTimestamp ?? 0).getTime();
  const readyAt = new Date(condition(good, "Ready")?.lastTransitionTime ?? 0).getTime();
  assert.ok(readyAt - created >= 2000, `ready ${readyAt - created} ms after creation; the stage delays it by 3 s`);

  const broken = await eventually("the broken pod to be Running", async () => {
    const p = await core.readNamespacedPod({ name: "broken", namespace: "pods" });
    return p.status?.phase === "Running" ? p : undefined;
  });
  assert.ok(broken.status?.podIP, "a running pod has an IP");
  assert.equal(condition(broken, "Ready")?.status, "False");
  assert.equal(condition(broken, "ContainersReady")?.status, "False");
  // Well past the readiness delay it is still not ready.
  await new Promise((r) => setTimeout(r, 4000));
  const later = await core.readNamespacedPod({ name: "broken", namespace: "pods" });
  assert.equal(later.status?.phase, "Running");
  assert.equal(condition(later, "Ready")?.status, "False");
});
