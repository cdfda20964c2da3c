// The workspace's pull Secret in the cluster (src/agent/deployments/pull-secret.ts): the pods of
// deployments and cron jobs name it only when the payload does, the workload carries its version
// (so a new version or none is a change the kind applies), the Secret is labelled as krane's with
// no region label (every region's agent writes the same one), and the name a live workload gives is
// the one the agent deletes when the last credential went.
import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { ApplyJobSchema, PullSecretSchema } from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { renderReplicaSet } from "../../../../src/agent/deployments/render.js";
import {
  ANNOTATION_PULL_SECRET_VERSION,
  pullSecretNameOf,
  renderPullSecret,
} from "../../../../src/agent/deployments/pull-secret.js";
import { validateApplyDeployment } from "../../../../src/agent/deployments/validate.js";
import { renderCronJob } from "../../../../src/agent/jobs/render.js";
import { validateApplyJob } from "../../../../src/agent/jobs/validate.js";
import { dockerConfigJson, PULL_SECRET_KEY, PULL_SECRET_NAME } from "../../../../src/contracts/images.js";
import { COMPONENT, LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_WORKSPACE_ID } from "../../../../src/contracts/labels.js";
import { sampleDeployment } from "./fixtures.js";

const pull = create(PullSecretSchema, { secretName: PULL_SECRET_NAME, version: "0123456789abcdef" });

type PodSpec = { imagePullSecrets?: { name: string }[] };

test("a ReplicaSet's pods name the pull Secret only when the payload does; the version is on the ReplicaSet", () => {
  const withIt = renderReplicaSet(sampleDeployment({ pullSecret: pull }), "local");
  const spec = withIt.spec as { template: { spec: PodSpec; metadata: { annotations: Record<string, string> } } };
  assert.deepEqual(spec.template.spec.imagePullSecrets, [{ name: PULL_SECRET_NAME }]);
  assert.equal(withIt.metadata.annotations?.[ANNOTATION_PULL_SECRET_VERSION], pull.version);
  // On the ReplicaSet, not the pod template: a new version changes no pod.
  assert.equal(spec.template.metadata.annotations[ANNOTATION_PULL_SECRET_VERSION], undefined);
  assert.equal(pullSecretNameOf(withIt), PULL_SECRET_NAME);

  const without = renderReplicaSet(sampleDeployment({ pullSecret: undefined }), "local");
  assert.ok(!("imagePullSecrets" in (without.spec as { template: { spec: PodSpec } }).template.spec));
  assert.equal(without.metadata.annotations?.[ANNOTATION_PULL_SECRET_VERSION], undefined);
  assert.equal(pullSecretNameOf(without), "");
  assert.equal(pullSecretNameOf(undefined), "");
});

/** A scheduled job's payload, without its pull Secret. */
const JOB = {
  workspaceId: "ws_1",
  projectId: "prj_1",
  environmentId: "env_1",
  jobId: "job_1",
  k8sNamespace: "ws-acme",
  k8sName: "job-report",
  region: "local",
  name: "report",
  schedule: "*/5 * * * *",
  image: "registry.example.com/shop:1",
  cpuMillicores: 100n,
  memoryMib: 64n,
};

test("a CronJob's runs name the pull Secret only when the payload does", () => {
  const cj = renderCronJob(create(ApplyJobSchema, { ...JOB, pullSecret: pull }), "local");
  const pod = (cj.spec as { jobTemplate: { spec: { template: { spec: PodSpec } } } }).jobTemplate.spec.template.spec;
  assert.deepEqual(pod.imagePullSecrets, [{ name: PULL_SECRET_NAME }]);
  assert.equal(cj.metadata.annotations?.[ANNOTATION_PULL_SECRET_VERSION], pull.version);
  assert.equal(pullSecretNameOf(cj), PULL_SECRET_NAME);
  const plain = renderCronJob(create(ApplyJobSchema, JOB), "local");
  assert.equal(pullSecretNameOf(plain), "");
  assert.equal(plain.metadata.annotations, undefined);
});

test("the Secret: dockerconfigjson, krane's labels, no region and no workspace id; ctrl's content as it came", () => {
  const json = dockerConfigJson([{ host: "registry.example.com:5000", username: "bot", password: "pa:ss" }]);
  const s = renderPullSecret(pull, "ws-acme", [
    { key: "ignored", value: Buffer.from("x") },
    { key: PULL_SECRET_KEY, value: Buffer.from(json) },
  ]);
  assert.equal(s.type, "kubernetes.io/dockerconfigjson");
  assert.equal(s.metadata.name, PULL_SECRET_NAME);
  assert.equal(s.metadata.namespace, "ws-acme");
  assert.deepEqual(s.metadata.labels, {
    [LABEL_MANAGED_BY]: "krane",
    [LABEL_COMPONENT]: COMPONENT.pullSecret,
  });
  // The namespace is the workspace's: one taken over by a new workspace of the same slug stays
  // writable (the fence keeps ownership labels such as the workspace id as they are).
  assert.ok(!Object.keys(s.metadata.labels ?? {}).includes(LABEL_WORKSPACE_ID));
  const data = s.data as Record<string, string>;
  assert.deepEqual(Object.keys(data), [PULL_SECRET_KEY]);
  assert.equal(Buffer.from(data[PULL_SECRET_KEY] ?? "", "base64").toString(), json);
  assert.throws(() => renderPullSecret(pull, "ws-acme", []), /no \.dockerconfigjson/);
});

test("a payload's pull Secret must be a valid name and version", () => {
  assert.equal(validateApplyDeployment(sampleDeployment({ pullSecret: pull }), "local", true), undefined);
  assert.match(
    validateApplyDeployment(sampleDeployment({ pullSecret: { ...pull, secretName: "Bad_Name" } }), "local", true) ?? "",
    /pull_secret\.secret_name "Bad_Name" is not a valid object name/,
  );
  assert.match(
    validateApplyDeployment(sampleDeployment({ pullSecret: { ...pull, version: "" } }), "local", true) ?? "",
    /pull_secret\.version/,
  );
  const job = create(ApplyJobSchema, { ...JOB, pullSecret: { ...pull, version: "not a label" } });
  assert.match(validateApplyJob(job, "local", false) ?? "", /pull_secret\.version "not a label"/);
});
