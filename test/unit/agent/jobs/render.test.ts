// Cron jobs as CronJobs (src/agent/jobs): the user workloads' isolation in the pod template (what
// the admission fence demands of a workspace namespace), the environment's network policy labels,
// the revision's settings, and the runs reported from Jobs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { ApplyJobSchema, JobRunResult } from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { renderCronJob } from "../../../../src/agent/jobs/render.js";
import { runsOf } from "../../../../src/agent/jobs/status.js";
import { validateApplyJob } from "../../../../src/agent/jobs/validate.js";
import { LABEL_COMPONENT, LABEL_ENVIRONMENT_ID, LABEL_REGION } from "../../../../src/contracts/labels.js";

const job = create(ApplyJobSchema, {
  workspaceId: "ws_1",
  projectId: "prj_1",
  environmentId: "env_1",
  jobId: "job_1",
  k8sNamespace: "ws-acme",
  k8sName: "job-shop-prod-report-abc123",
  region: "local",
  name: "report",
  schedule: "*/5 * * * *",
  timeZone: "Europe/Paris",
  image: "registry.example.com/shop:1",
  command: ["/bin/report"],
  args: ["--daily"],
  concurrencyPolicy: "Forbid",
  deadlineSeconds: 600n,
  successfulJobsHistoryLimit: 3,
  failedJobsHistoryLimit: 1,
  cpuMillicores: 250n,
  memoryMib: 256n,
  deploymentId: "dep_1",
  config: { configMapName: "rev-config-1", values: [{ name: "A", value: "b" }] },
  secrets: { secretName: "rev-secrets-1", keys: ["B"] },
});

test("a CronJob with the user workloads' isolation and the environment's pod labels", () => {
  assert.equal(validateApplyJob(job, "local", false), undefined);
  const cj = renderCronJob(job, "local") as unknown as {
    spec: Record<string, unknown> & {
      jobTemplate: {
        spec: {
          activeDeadlineSeconds: number;
          template: {
            metadata: { labels: Record<string, string> };
            spec: Record<string, unknown> & { containers: Record<string, unknown>[] };
          };
        };
      };
    };
  };
  assert.equal(cj.spec.schedule, "*/5 * * * *");
  assert.equal(cj.spec.timeZone, "Europe/Paris");
  assert.equal(cj.spec.concurrencyPolicy, "Forbid");
  const pod = cj.spec.jobTemplate.spec.template;
  assert.equal(pod.spec.runtimeClassName, "gvisor");
  assert.equal(pod.spec.automountServiceAccountToken, false);
  assert.deepEqual(pod.spec.nodeSelector, { "node-class": "untrusted" });
  assert.equal(pod.spec.restartPolicy, "Never");
  assert.equal(cj.spec.jobTemplate.spec.activeDeadlineSeconds, 600);
  // The environment's CiliumNetworkPolicy selects deployment pods of the environment and region.
  assert.equal(pod.metadata.labels[LABEL_COMPONENT], "deployment");
  assert.equal(pod.metadata.labels[LABEL_ENVIRONMENT_ID], "env_1");
  assert.equal(pod.metadata.labels[LABEL_REGION], "local");
  const c = pod.spec.containers[0]!;
  assert.deepEqual(c.envFrom, [{ configMapRef: { name: "rev-config-1" } }, { secretRef: { name: "rev-secrets-1" } }]);
  assert.deepEqual(c.command, ["/bin/report"]);
});

test("a job without an image, or for another region, is refused", () => {
  assert.match(validateApplyJob(create(ApplyJobSchema, { ...job, image: "" }), "local", false) ?? "", /no image/);
  assert.match(validateApplyJob(job, "eu", false) ?? "", /region/);
  assert.match(
    validateApplyJob(create(ApplyJobSchema, { ...job, k8sName: "x".repeat(53) }), "local", false) ?? "",
    /52/,
  );
});

test("runs: newest first, with result and times", () => {
  const mk = (name: string, start: string, status: Record<string, unknown>) => ({
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name },
    status: { startTime: start, ...status },
  });
  const runs = runsOf([
    mk("a", "2026-01-01T00:00:00Z", {
      conditions: [{ type: "Complete", status: "True" }],
      completionTime: "2026-01-01T00:00:05Z",
    }),
    mk("b", "2026-01-01T00:05:00Z", {
      conditions: [{ type: "Failed", status: "True", lastTransitionTime: "2026-01-01T00:05:09Z" }],
    }),
    mk("c", "2026-01-01T00:10:00Z", { active: 1 }),
  ]);
  assert.deepEqual(
    runs.map((r) => [r.k8sName, r.result]),
    [
      ["c", JobRunResult.RUNNING],
      ["b", JobRunResult.FAILED],
      ["a", JobRunResult.SUCCEEDED],
    ],
  );
  assert.equal(runs[2]?.finishedUnixMs, BigInt(Date.parse("2026-01-01T00:00:05Z")));
  assert.equal(runs[0]?.finishedUnixMs, 0n);
});
