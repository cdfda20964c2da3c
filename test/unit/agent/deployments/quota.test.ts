// The workspace quota's backstop as the agent renders it (src/agent/deployments/quota.ts): the
// ResourceQuota's numbers are ctrl's limits with room for a warm previous revision and a surge,
// rounded up; unlimited quotas leave their line out; both objects are krane's with no region
// label; a pod naming no size gets a revision's default; a negative limit is refused; every kind
// that puts pods in the namespace renders both, the LimitRange first.
import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import {
  ApplyJobSchema,
  ApplyReleaseSchema,
  WorkspaceQuotaSchema,
} from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import {
  ANNOTATION_WORKSPACE_QUOTA,
  QUOTA_OBJECT_NAME,
  QUOTA_SELECTOR,
  renderLimitRange,
  renderQuotaObjects,
  renderResourceQuota,
  ROOM,
  ROOM_FACTOR,
  withRoom,
} from "../../../../src/agent/deployments/quota.js";
import { REQUEST_DIVISOR, renderReplicaSet } from "../../../../src/agent/deployments/render.js";
import { validateApplyDeployment } from "../../../../src/agent/deployments/validate.js";
import { validateApplyJob } from "../../../../src/agent/jobs/validate.js";
import { validateApplyRelease } from "../../../../src/agent/releases/validate.js";
import { workspaceQuotaMessage } from "../../../../src/ctrl/payloads/deployment.js";
import {
  COMPONENT,
  LABEL_COMPONENT,
  LABEL_MANAGED_BY,
  LABEL_REGION,
  LABEL_WORKSPACE_ID,
} from "../../../../src/contracts/labels.js";
import { UNLIMITED } from "../../../../src/contracts/quotas.js";
import { sampleDeployment } from "./fixtures.js";

test("the room factor: the serving revisions, a warm previous one at full size, half again for a surge", () => {
  assert.deepEqual(ROOM, { serving: 1, warm: 1, surge: 0.5 });
  assert.equal(ROOM_FACTOR, 2.5);
  assert.equal(withRoom(0n), 0n);
  assert.equal(withRoom(1n), 3n); // 2.5 rounds up
  assert.equal(withRoom(2n), 5n);
  assert.equal(withRoom(1000n), 2500n);
  assert.equal(withRoom(1001n), 2503n); // 2502.5 rounds up
  // Exact far beyond a double's integers.
  assert.equal(withRoom(10n ** 18n + 1n), 25n * 10n ** 17n + 3n);
  for (let l = 0n; l < 50n; l++) {
    const r = withRoom(l);
    assert.ok(r * 2n >= l * 5n && (r - 1n) * 2n < l * 5n, `withRoom(${l}) = ${r} is ⌈2.5 × ${l}⌉`);
  }
});

test("a rolling update with a warm previous revision and a surge fits the room at exactly the limit", () => {
  // An environment using the whole quota: 4 instances of 500m; the previous revision warm with
  // its 4 pods, the new one at 4 plus a surge of 1 (25%), a warm one let go still terminating 1.
  const limitPods = 4n;
  const pods = 4n + 4n + 1n + 1n;
  assert.ok(pods <= withRoom(limitPods));
  assert.ok(pods * 500n <= withRoom(limitPods * 500n));
  // Three full revisions at once (two warm ones not yet gone) do not fit.
  assert.ok(12n > withRoom(limitPods));
});

test("the ResourceQuota carries each limited quota with room, requests and limits alike", () => {
  const rq = renderResourceQuota(
    create(WorkspaceQuotaSchema, { cpuMillicores: 2000n, memoryMib: 1025n, instances: 3n }),
    "ws-1",
  );
  assert.equal(rq.apiVersion, "v1");
  assert.equal(rq.kind, "ResourceQuota");
  assert.equal(rq.metadata.name, QUOTA_OBJECT_NAME);
  assert.equal(rq.metadata.namespace, "ws-1");
  assert.deepEqual(rq.spec, {
    hard: {
      "requests.cpu": "5000m",
      "limits.cpu": "5000m",
      "requests.memory": "2563Mi",
      "limits.memory": "2563Mi",
      pods: "8",
    },
  });
  const labels = rq.metadata.labels ?? {};
  assert.equal(labels[LABEL_MANAGED_BY], "krane");
  assert.equal(labels[LABEL_COMPONENT], COMPONENT.quota);
  // No workspace id: a namespace taken over by a new workspace of the same slug stays writable.
  assert.equal(labels[LABEL_WORKSPACE_ID], undefined);
  // Shared by every region's agent on the cluster.
  assert.equal(labels[LABEL_REGION], undefined);
});

test("an unlimited quota leaves its lines out; all unlimited leaves hard empty (server-side apply drops them)", () => {
  const some = renderResourceQuota(create(WorkspaceQuotaSchema, { instances: 2n }), "ws-1");
  assert.deepEqual(some.spec, { hard: { pods: "5" } });
  const none = renderResourceQuota(create(WorkspaceQuotaSchema, {}), "ws-1");
  assert.deepEqual(none.spec, { hard: {} });
  // A limit of 0 is a limit (nothing may run), not unlimited.
  const zero = renderResourceQuota(create(WorkspaceQuotaSchema, { cpuMillicores: 0n }), "ws-1");
  assert.deepEqual(zero.spec, { hard: { "requests.cpu": "0m", "limits.cpu": "0m" } });
});

test("ctrl's payload carries its limits, unlimited ones absent", () => {
  const q = workspaceQuotaMessage({ ...UNLIMITED, cpu: 1500, instances: 0 }).workspaceQuota;
  assert.equal(q?.cpuMillicores, 1500n);
  assert.equal(q?.memoryMib, undefined);
  assert.equal(q?.instances, 0n);
});

test("the LimitRange gives a container naming no size a revision's default, requests at half", () => {
  const lr = renderLimitRange("ws-1");
  assert.equal(lr.kind, "LimitRange");
  assert.equal(lr.metadata.name, QUOTA_OBJECT_NAME);
  assert.equal(lr.metadata.labels?.[LABEL_COMPONENT], COMPONENT.quota);
  assert.deepEqual(lr.spec, {
    limits: [
      {
        type: "Container",
        default: { cpu: "250m", memory: "256Mi" },
        defaultRequest: { cpu: "125m", memory: "128Mi" },
      },
    ],
  });
  // Requests at half the limits, as a revision's pods (render.ts).
  assert.equal(REQUEST_DIVISOR, 2n);
});

test("a negative limit in the payload is refused, naming the field", () => {
  assert.equal(validateApplyDeployment(sampleDeployment(), "local", true), undefined);
  const ok = sampleDeployment({ workspaceQuota: create(WorkspaceQuotaSchema, { cpuMillicores: 0n, instances: 1n }) });
  assert.equal(validateApplyDeployment(ok, "local", true), undefined);
  const bad = sampleDeployment({ workspaceQuota: create(WorkspaceQuotaSchema, { memoryMib: -1n }) });
  assert.equal(validateApplyDeployment(bad, "local", true), "workspace_quota.memory_mib must be >= 0 (got -1)");
});

test("the ReplicaSet carries the quota it was rendered with (a new quota is a change to apply), not its pods", () => {
  const rs = renderReplicaSet(
    sampleDeployment({ workspaceQuota: create(WorkspaceQuotaSchema, { cpuMillicores: 1000n, instances: 2n }) }),
    "local",
  );
  assert.equal(rs.metadata.annotations?.[ANNOTATION_WORKSPACE_QUOTA], "requests.cpu=2500m,limits.cpu=2500m,pods=5");
  const tpl = (rs.spec as { template: { metadata: { annotations?: Record<string, string> } } }).template;
  assert.equal(tpl.metadata.annotations?.[ANNOTATION_WORKSPACE_QUOTA], undefined);
  const unlimited = renderReplicaSet(sampleDeployment({ workspaceQuota: create(WorkspaceQuotaSchema, {}) }), "local");
  assert.equal(unlimited.metadata.annotations?.[ANNOTATION_WORKSPACE_QUOTA], "");
  const older = renderReplicaSet(sampleDeployment({ workspaceQuota: undefined }), "local");
  assert.equal(older.metadata.annotations?.[ANNOTATION_WORKSPACE_QUOTA], undefined);
});

test("the quota objects a kind renders: the LimitRange first, then the ResourceQuota naming what it holds; none without a quota", () => {
  const q = create(WorkspaceQuotaSchema, { cpuMillicores: 1000n, instances: 2n });
  const [lr, rq, ...rest] = renderQuotaObjects(q, "ws-1");
  assert.deepEqual([lr?.kind, rq?.kind, rest.length], ["LimitRange", "ResourceQuota", 0]);
  // A quota made unlimited drops a line of `hard`, which a drift check of the rendered fields
  // cannot see; the annotation changes, so the object is written again.
  assert.equal(rq?.metadata.annotations?.[ANNOTATION_WORKSPACE_QUOTA], "requests.cpu=2500m,limits.cpu=2500m,pods=5");
  assert.equal(
    renderQuotaObjects(create(WorkspaceQuotaSchema, { instances: 2n }), "ws-1")[1]?.metadata.annotations?.[
      ANNOTATION_WORKSPACE_QUOTA
    ],
    "pods=5",
  );
  assert.deepEqual(renderQuotaObjects(undefined, "ws-1"), []);
  // The caches find them by label alone: they carry no region.
  assert.equal(QUOTA_SELECTOR, `${LABEL_MANAGED_BY}=krane,${LABEL_COMPONENT}=${COMPONENT.quota}`);
  for (const o of [lr, rq])
    for (const [k, v] of QUOTA_SELECTOR.split(",").map((kv) => kv.split("=")))
      assert.equal(o?.metadata.labels?.[k ?? ""], v);
});

test("a cron job or a release with a negative limit in its quota is refused, naming the field", () => {
  const bad = create(WorkspaceQuotaSchema, { instances: -2n });
  const job = create(ApplyJobSchema, {
    workspaceId: "ws_1",
    projectId: "prj_1",
    environmentId: "env_1",
    jobId: "job_1",
    k8sNamespace: "ws-acme",
    k8sName: "job-report",
    schedule: "* * * * *",
    image: "tools:1",
    workspaceQuota: bad,
  });
  assert.equal(validateApplyJob(job, "local", false), "workspace_quota.instances must be >= 0 (got -2)");
  const release = create(ApplyReleaseSchema, {
    workspaceId: "ws_1",
    projectId: "prj_1",
    environmentId: "env_1",
    releaseId: "rel_1",
    k8sNamespace: "ws-acme",
    name: "infra",
    version: 1n,
    workspaceQuota: bad,
  });
  assert.equal(validateApplyRelease(release, "local"), "workspace_quota.instances must be >= 0 (got -2)");
  assert.equal(validateApplyRelease({ ...release, workspaceQuota: undefined }, "local"), undefined);
});
