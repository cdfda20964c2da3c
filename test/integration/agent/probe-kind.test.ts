// A kind added exactly as src/agent/README.md says ("Adding a kind"): its messages
// (test/proto/krane/probe/v1/probe.proto), its folder on each side (./probe-kind/controller.ts
// for the agent, ./probe-kind/service.ts standing in for ctrl's), and one registration line
// (the `KINDS` list below). The real runtime — manager, shared caches, stream, cursor, queue,
// reporter — reconciles it against the real local Kubernetes: apply, a change, drift repaired,
// an invalid value refused before anything is applied, and a delete, each reported back.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { Registry } from "prom-client";
import { eventually, useCluster } from "../../support/cluster.js";
import { Manager } from "../../../src/agent/runtime/manager.js";
import { silentLogger } from "../../../src/base/log.js";
import type { KindEnv, KindRegistration } from "../../../src/agent/runtime/kind.js";
import type { KubeClient } from "../../../src/kube/client.js";
import type { KubeObject } from "../../../src/kube/object.js";
import { resources } from "../../../src/kube/resources.js";
import { adminKube } from "./support.js";
import { probes } from "./probe-kind/controller.js";
import { ProbeCtrl } from "./probe-kind/service.js";

const REGION = "probe";
const NS = "probe-test";
const handle = useCluster();
const service = new ProbeCtrl();
let admin: KubeClient;
let manager: Manager;

async function valueOf(id: string): Promise<string | undefined> {
  const cm = (await admin.get(resources.configMaps, NS, `probe-${id}`)) as
    (KubeObject & { data?: Record<string, string> }) | undefined;
  return cm?.data?.["value"];
}

function observed(id: string): string | undefined {
  const c = service.lastReport(id);
  return c?.case === "update" ? c.value.observedValue : undefined;
}

before(async () => {
  const cluster = await handle.ready();
  admin = adminKube(cluster);
  await admin.create(resources.namespaces, { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } });
  await service.start();
  // The registration line: one per kind, as in src/agent/kinds.ts.
  const KINDS: readonly KindRegistration[] = [probes(service.client())];
  manager = new Manager({ kube: admin, region: REGION, log: silentLogger, registry: new Registry() });
  // The probe kind talks to its own service: the product's ctrl client is not used.
  const env = { region: REGION, sentinel: { image: "unused" } } as unknown as KindEnv;
  for (const k of KINDS) k(manager, env, { resyncPeriodMs: 2_000 });
  manager.start();
});

after(async () => {
  await manager?.stop();
  await service.stop();
});

test("a probe is applied, changed, repaired and reported by the real runtime", async () => {
  service.apply("a", NS, "one");
  await eventually("the probe's ConfigMap", async () => ((await valueOf("a")) === "one" ? true : undefined));
  await eventually("the reported value", async () => (observed("a") === "one" ? true : undefined));

  service.apply("a", NS, "two");
  await eventually("the change applied and reported", async () =>
    (await valueOf("a")) === "two" && observed("a") === "two" ? true : undefined,
  );

  // Drift: another writer changes the value; the runtime's resync puts the desired one back.
  await admin.apply(
    resources.configMaps,
    { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "probe-a", namespace: NS }, data: { value: "tampered" } },
    { force: true, fieldManager: "someone-else" },
  );
  await eventually("the drift repaired", async () => ((await valueOf("a")) === "two" ? true : undefined));
});

test("an invalid probe is refused before anything is applied, and the refusal is reported", async () => {
  service.apply("b", NS, "x".repeat(64));
  const reason = await eventually("the rejection", async () => {
    const c = service.lastReport("b");
    return c?.case === "rejected" ? c.value.reason : undefined;
  });
  assert.match(reason, /value: longer than 63/);
  assert.equal(await valueOf("b"), undefined);
});

test("a deleted probe's ConfigMap goes and the deletion is reported", async () => {
  service.apply("c", NS, "three");
  await eventually("the probe applied", async () => ((await valueOf("c")) === "three" ? true : undefined));
  service.delete("c");
  await eventually("the ConfigMap gone and the deletion reported", async () =>
    (await valueOf("c")) === undefined && service.lastReport("c")?.case === "delete" ? true : undefined,
  );
});
