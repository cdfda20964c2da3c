// The release controller's pure parts (src/agent/releases): objects rendered with krane's labels
// in the release's namespace, the inventory that survives a restart, kinds ever applied, health
// per kind, and validation.
import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { ApplyReleaseSchema, ObjectHealth } from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { healthOf } from "../../../../src/agent/releases/health.js";
import {
  inventoryKeyOf,
  inventoryKinds,
  kindsEver,
  renderInventory,
  renderReleaseObjects,
} from "../../../../src/agent/releases/render.js";
import { validateApplyRelease } from "../../../../src/agent/releases/validate.js";
import { LABEL_RELEASE_ID, LABEL_RELEASE_OBJECT, LABEL_RELEASE_VERSION } from "../../../../src/contracts/releases.js";
import { LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_REGION } from "../../../../src/contracts/labels.js";

const release = create(ApplyReleaseSchema, {
  workspaceId: "ws_1",
  projectId: "prj_1",
  environmentId: "env_1",
  releaseId: "rel_abc",
  k8sNamespace: "ws-acme",
  name: "default",
  version: 3n,
  region: "local",
  objects: [
    {
      id: "/ConfigMap/settings",
      kind: { group: "", version: "v1", kind: "ConfigMap" },
      name: "settings",
      manifestJson: JSON.stringify({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "settings", labels: { team: "a" } },
        data: { a: "1" },
      }),
    },
    {
      id: "batch/Job/migrate",
      kind: { group: "batch", version: "v1", kind: "Job" },
      name: "migrate",
      manifestJson: JSON.stringify({ apiVersion: "batch/v1", kind: "Job", metadata: { name: "migrate" }, spec: {} }),
    },
  ],
  kindsEver: [{ group: "", version: "v1", kind: "Service" }],
});

test("objects carry krane's labels (theirs kept), the release, their identity and the version", () => {
  assert.equal(validateApplyRelease(release, "local"), undefined);
  const [cm, job] = renderReleaseObjects(release, "local");
  const labels = cm!.object.metadata.labels ?? {};
  assert.equal(labels.team, "a");
  assert.equal(labels[LABEL_MANAGED_BY], "krane");
  assert.equal(labels[LABEL_COMPONENT], "release");
  assert.equal(labels[LABEL_REGION], "local");
  assert.equal(labels[LABEL_RELEASE_ID], "rel_abc");
  assert.equal(labels[LABEL_RELEASE_VERSION], "3");
  assert.match(labels[LABEL_RELEASE_OBJECT] ?? "", /^[0-9a-f]{16}$/);
  assert.notEqual(labels[LABEL_RELEASE_OBJECT], job!.object.metadata.labels?.[LABEL_RELEASE_OBJECT]);
  assert.equal(cm!.object.metadata.namespace, "ws-acme");
  assert.equal(job!.object.apiVersion, "batch/v1");
});

test("the inventory records every kind ever applied, and is found again after a restart", () => {
  const inv = renderInventory(release, "local");
  assert.equal(inventoryKeyOf(inv), "rel_abc");
  const kinds = inventoryKinds(inv).map((k) => `${k.group}/${k.version}/${k.kind}`);
  assert.deepEqual(
    kinds,
    ["/v1/ConfigMap", "/v1/Service", "batch/v1/Job"],
    "a kind that left the set (Service) is still swept",
  );
  assert.deepEqual(kindsEver({ kindsEver: [], objects: [] }, inventoryKinds(inv)).length, 3);
  assert.deepEqual(inventoryKinds({ metadata: {}, data: { kinds: "not json" } }), []);
});

test("validation: namespace, ids, names, JSON", () => {
  assert.match(
    validateApplyRelease(create(ApplyReleaseSchema, { ...release, k8sNamespace: "kube-system" }), "local") ?? "",
    /workspace namespace/,
  );
  assert.match(validateApplyRelease(create(ApplyReleaseSchema, { ...release, region: "eu" }), "local") ?? "", /region/);
  const other = create(ApplyReleaseSchema, {
    ...release,
    objects: [
      { ...release.objects[0]!, manifestJson: JSON.stringify({ metadata: { name: "settings", namespace: "other" } }) },
    ],
  });
  assert.match(validateApplyRelease(other, "local") ?? "", /another namespace/);
  const dup = create(ApplyReleaseSchema, { ...release, objects: [release.objects[0]!, release.objects[0]!] });
  assert.match(validateApplyRelease(dup, "local") ?? "", /repeated/);
});

test("health: Jobs, Deployments, CronJobs, pods; other kinds are healthy once they exist", () => {
  const job = (status: unknown) => healthOf({ apiVersion: "batch/v1", kind: "Job", metadata: { name: "j" }, status });
  assert.equal(job({ conditions: [{ type: "Complete", status: "True" }] }).health, ObjectHealth.HEALTHY);
  assert.equal(
    job({ conditions: [{ type: "Failed", status: "True", message: "BackoffLimitExceeded" }] }).health,
    ObjectHealth.DEGRADED,
  );
  assert.equal(job({ active: 1 }).health, ObjectHealth.PROGRESSING);
  const dep = (spec: unknown, status: unknown, generation = 1) =>
    healthOf({ apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "d", generation }, spec, status });
  assert.equal(
    dep(
      { replicas: 2 },
      { observedGeneration: 1, replicas: 2, updatedReplicas: 2, readyReplicas: 2, availableReplicas: 2 },
    ).health,
    ObjectHealth.HEALTHY,
  );
  assert.equal(
    dep(
      { replicas: 2 },
      {
        observedGeneration: 1,
        conditions: [{ type: "Progressing", status: "False", reason: "ProgressDeadlineExceeded" }],
      },
    ).health,
    ObjectHealth.DEGRADED,
  );
  assert.equal(dep({ replicas: 2 }, { observedGeneration: 0 }).health, ObjectHealth.PROGRESSING);
  assert.equal(dep({ replicas: 0 }, {}).health, ObjectHealth.SUSPENDED);
  const pod = (status: unknown) => healthOf({ apiVersion: "v1", kind: "Pod", metadata: { name: "p" }, status });
  // CrashLoopBackOff is Degraded even while the container is not ready (OpenChoreo's PR #2390).
  assert.equal(
    pod({ phase: "Running", containerStatuses: [{ ready: false, state: { waiting: { reason: "CrashLoopBackOff" } } }] })
      .health,
    ObjectHealth.DEGRADED,
  );
  assert.equal(
    healthOf({ apiVersion: "batch/v1", kind: "CronJob", metadata: { name: "c" }, spec: { suspend: true } }).health,
    ObjectHealth.SUSPENDED,
  );
  assert.equal(healthOf({ apiVersion: "v1", kind: "Service", metadata: { name: "s" } }).health, ObjectHealth.HEALTHY);
});
