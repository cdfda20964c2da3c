import { test } from "node:test";
import assert from "node:assert/strict";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { AutoscalePolicySchema, type AutoscalePolicy } from "../../../../src/gen/krane/ctrl/v1/autoscale_pb.js";
import { DeleteSentinelSchema } from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { validateApplySentinel, validateDeleteSentinel } from "../../../../src/agent/sentinels/validate.js";
import { sampleSentinel } from "./fixtures.js";

const REGION = "local";

test("a complete sentinel is valid; replicas 0 (paused) is valid", () => {
  assert.equal(validateApplySentinel(sampleSentinel(), REGION), undefined);
  assert.equal(validateApplySentinel(sampleSentinel({ replicas: 0 }), REGION), undefined);
  assert.equal(validateApplySentinel(sampleSentinel({ region: "" }), REGION), undefined);
  // No image: krane's own sentinel (the agent's default image).
  assert.equal(validateApplySentinel(sampleSentinel({ image: "" }), REGION), undefined);
});

test("each required field is named when empty", () => {
  const cases: Array<[Partial<Parameters<typeof sampleSentinel>[0]>, string]> = [
    [{ workspaceId: "" }, "workspace_id is required"],
    [{ projectId: "" }, "project_id is required"],
    [{ environmentId: "" }, "environment_id is required"],
    [{ sentinelId: "" }, "sentinel_id is required"],
    [{ k8sName: "" }, "k8s_name is required"],
    [{ image: "   " }, "image must not contain whitespace"],
  ];
  for (const [override, reason] of cases) assert.equal(validateApplySentinel(sampleSentinel(override), REGION), reason);
});

test("numbers: replicas >= 0, cpu and memory > 0", () => {
  assert.match(validateApplySentinel(sampleSentinel({ replicas: -1 }), REGION) ?? "", /^replicas must be >= 0/);
  assert.match(
    validateApplySentinel(sampleSentinel({ cpuMillicores: 0n }), REGION) ?? "",
    /^cpu_millicores must be > 0/,
  );
  assert.match(
    validateApplySentinel(sampleSentinel({ cpuMillicores: -5n }), REGION) ?? "",
    /^cpu_millicores must be > 0/,
  );
  assert.match(validateApplySentinel(sampleSentinel({ memoryMib: 0n }), REGION) ?? "", /^memory_mib must be > 0/);
});

test("k8s_name must be a DNS label that starts with a letter (it also names the Service)", () => {
  for (const bad of ["Snt-Upper", "snt_underscore", "-snt", "snt-", "1snt", "a".repeat(64), "snt.dot"]) {
    assert.match(validateApplySentinel(sampleSentinel({ k8sName: bad }), REGION) ?? "", /^k8s_name /, bad);
  }
  assert.equal(validateApplySentinel(sampleSentinel({ k8sName: "a".repeat(63) }), REGION), undefined);
});

test("ids must be label values; image without whitespace; region must be the agent's", () => {
  assert.match(
    validateApplySentinel(sampleSentinel({ sentinelId: "snt 1" }), REGION) ?? "",
    /^sentinel_id .* label value/,
  );
  assert.match(
    validateApplySentinel(sampleSentinel({ environmentId: "e".repeat(64) }), REGION) ?? "",
    /^environment_id /,
  );
  assert.equal(validateApplySentinel(sampleSentinel({ image: "a b" }), REGION), "image must not contain whitespace");
  assert.match(
    validateApplySentinel(sampleSentinel({ region: "eu-west" }), REGION) ?? "",
    /does not match this agent's region/,
  );
});

test("a routing policy: known mode, label-valued unique revisions, weights 0-100 adding up to 100 when weighted", () => {
  const policy = (mode: string, revisions: Array<[string, number]>) =>
    sampleSentinel({
      routing: {
        $typeName: "krane.ctrl.v1.RoutingPolicy",
        version: 3n,
        previewDeploymentId: "",
        policiesJson: "",
        apiKeysJson: "",
        mode,
        revisions: revisions.map(([deploymentId, weight]) => ({
          $typeName: "krane.ctrl.v1.RevisionWeight",
          deploymentId,
          weight,
        })),
      },
    });
  assert.equal(
    validateApplySentinel(
      policy("weighted", [
        ["dep_a", 90],
        ["dep_b", 10],
      ]),
      REGION,
    ),
    undefined,
  );
  assert.equal(validateApplySentinel(policy("instances", []), REGION), undefined);
  assert.match(validateApplySentinel(policy("random", []), REGION) ?? "", /^routing.mode/);
  assert.match(
    validateApplySentinel(
      policy("weighted", [
        ["dep_a", 90],
        ["dep_b", 5],
      ]),
      REGION,
    ) ?? "",
    /add up to 95/,
  );
  assert.match(
    validateApplySentinel(
      policy("weighted", [
        ["dep_a", 50],
        ["dep_a", 50],
      ]),
      REGION,
    ) ?? "",
    /appears twice/,
  );
  assert.match(validateApplySentinel(policy("weighted", [["dep a", 100]]), REGION) ?? "", /label value/);
  assert.match(validateApplySentinel(policy("weighted", [["dep_a", 101]]), REGION) ?? "", /0-100/);
});

test("delete needs a sentinel id and a valid name", () => {
  assert.equal(
    validateDeleteSentinel(create(DeleteSentinelSchema, { sentinelId: "snt_1", k8sName: "snt-a" })),
    undefined,
  );
  assert.equal(
    validateDeleteSentinel(create(DeleteSentinelSchema, { sentinelId: "", k8sName: "snt-a" })),
    "sentinel_id is required",
  );
  assert.match(
    validateDeleteSentinel(create(DeleteSentinelSchema, { sentinelId: "snt_1", k8sName: "" })) ?? "",
    /^k8s_name /,
  );
});

const policy = (init: MessageInitShape<typeof AutoscalePolicySchema>): AutoscalePolicy =>
  create(AutoscalePolicySchema, init);

test("an autoscaling policy ctrl would refuse is refused naming the field; a good one passes", () => {
  const ok = sampleSentinel({
    autoscale: policy({ minReplicas: 1, maxReplicas: 20, concurrencyTarget: 50, scaleDownWindowSeconds: 300 }),
  });
  assert.equal(validateApplySentinel(ok, "local"), undefined);
  const bad: [Parameters<typeof sampleSentinel>[0], RegExp][] = [
    [{ autoscale: policy({ minReplicas: 5, maxReplicas: 2, concurrencyTarget: 50 }) }, /^autoscale\.min_replicas/],
    [{ autoscale: policy({ minReplicas: 1, maxReplicas: 5000, concurrencyTarget: 50 }) }, /^autoscale\.max_replicas/],
    [{ autoscale: policy({ minReplicas: 1, maxReplicas: 5, concurrencyTarget: 0 }) }, /^autoscale\.concurrency/],
    [
      {
        autoscale: policy({
          minReplicas: 1,
          maxReplicas: 5,
          concurrencyTarget: 5,
          scaleToZero: { idleSeconds: 300, maxHeldRequests: 10, heldTimeoutSeconds: 5 },
        }),
      },
      /^autoscale\.scale_to_zero/,
    ],
  ];
  for (const [over, reason] of bad) assert.match(validateApplySentinel(sampleSentinel(over), "local") ?? "", reason);
});
