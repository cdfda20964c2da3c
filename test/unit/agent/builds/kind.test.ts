// The build kind's pure parts (src/agent/builds): which desired builds start, the check of a
// desired build, the report of a build's end, the builder pod's name for ctrl's ids, and the
// reason a build past its time limit gives wherever it ran.
import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { decide } from "../../../../src/agent/builds/controller.js";
import { builderName } from "../../../../src/agent/builds/pod.js";
import { outcomeOf, sha256 } from "../../../../src/agent/builds/run.js";
import { pastDeadline } from "../../../../src/agent/builds/status.js";
import { validateApplyBuild } from "../../../../src/agent/builds/validate.js";
import { BuildFailed, timeLimitReason } from "../../../../src/builds/buildkit.js";
import { ApplyBuildSchema } from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import type { KubeObject } from "../../../../src/kube/object.js";

test("a desired build starts when a slot is free, waits when none is, and never runs twice", () => {
  assert.equal(decide(false, 0, 1), "start");
  assert.equal(decide(false, 1, 2), "start");
  assert.equal(decide(false, 2, 2), "wait");
  assert.equal(decide(true, 0, 2), "leave", "one running or ended here is left alone");
});

const APPLY = {
  buildId: "bld_7k2m9x",
  sourceDigest: sha256("source"),
  registry: "registry.example:5000",
  repository: "acme/shop",
  tag: "bld_7k2m9x",
  image: "registry.example:5000/acme/shop:bld_7k2m9x",
  cpuMillicores: 1000n,
  memoryMib: 2048n,
  timeoutSeconds: 900n,
  maxSourceBytes: 1n << 20n,
};

test("a desired build is checked, naming the field", () => {
  assert.equal(validateApplyBuild(create(ApplyBuildSchema, APPLY)), undefined);
  const bad = (o: Partial<typeof APPLY>) => validateApplyBuild(create(ApplyBuildSchema, { ...APPLY, ...o }));
  assert.match(bad({ buildId: "bld/../x" }) ?? "", /^build_id: /);
  assert.match(bad({ sourceDigest: "sha256:nope" }) ?? "", /^source_digest: /);
  assert.match(bad({ image: "elsewhere.example/acme/shop:x" }) ?? "", /^image: /);
  assert.match(bad({ cpuMillicores: 10n }) ?? "", /^cpu_millicores: /);
  assert.match(bad({ memoryMib: 64n }) ?? "", /^memory_mib: /);
  assert.match(bad({ timeoutSeconds: 0n }) ?? "", /^timeout_seconds: /);
});

test("ctrl's build ids name builder pods ('_' becomes '-')", () => {
  assert.equal(builderName("bld_7k2m9x"), "build-bld-7k2m9x");
});

test("a build's end is reported as the digest, a failure with its step and last lines, or a cancellation", () => {
  const digest = `sha256:${"c".repeat(64)}`;
  assert.deepEqual(outcomeOf({ digest }, false), { case: "succeeded", value: { imageDigest: digest } });
  const failed = new BuildFailed("the build failed at step [2/3] RUN make: exit 2", ["a", "b"], "[2/3] RUN make");
  assert.deepEqual(outcomeOf({ error: failed }, false), {
    case: "failed",
    value: {
      error: "the build failed at step [2/3] RUN make: exit 2",
      failedStep: "[2/3] RUN make",
      failedOutput: ["a", "b"],
      cancelled: false,
    },
  });
  const refused = new Error("fetch failed", { cause: new Error("unable to verify the first certificate") });
  assert.deepEqual(
    outcomeOf({ error: refused }, false),
    {
      case: "failed",
      value: {
        error: "fetch failed: unable to verify the first certificate",
        failedStep: "",
        failedOutput: [],
        cancelled: false,
      },
    },
    "the cause of a failed fetch is said",
  );
  assert.deepEqual(outcomeOf({ error: new Error("pod gone") }, true), {
    case: "failed",
    value: { error: "the build was cancelled", failedStep: "", failedOutput: [], cancelled: true },
  });
});

test("a build past its time limit says so, as the local worker does, however its pod ended", () => {
  assert.equal(timeLimitReason(90_000), "the build ran past its time limit of 90 s and was cancelled");
  assert.equal(
    timeLimitReason(90_000, "the workspace's build minutes ran out"),
    "the workspace's build minutes ran out",
  );
  const pod = (status: Record<string, unknown>) => ({ metadata: {}, status }) as unknown as KubeObject;
  assert.equal(pastDeadline(pod({ phase: "Failed", reason: "DeadlineExceeded" })), true);
  assert.equal(pastDeadline(pod({ phase: "Failed", reason: "Evicted" })), false);
});
