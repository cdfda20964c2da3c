// The reserved namespaces are one list (src/contracts/cluster.ts), and every agent kind that
// applies user objects into a workspace namespace refuses each of them, whatever ctrl sent.
import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { validateApplyDeployment } from "../../../src/agent/deployments/validate.js";
import { validateApplyGateway } from "../../../src/agent/gateways/validate.js";
import { validateApplyJob } from "../../../src/agent/jobs/validate.js";
import { validateApplyRelease } from "../../../src/agent/releases/validate.js";
import {
  AGENT_NAMESPACE,
  isReservedNamespace,
  RESERVED_NAMESPACES,
  SENTINEL_NAMESPACE,
} from "../../../src/contracts/cluster.js";
import { ApplyGatewaySchema, ApplyJobSchema, ApplyReleaseSchema } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { sampleDeployment } from "../agent/deployments/fixtures.js";

const ids = { workspaceId: "ws_1", projectId: "prj_1", environmentId: "env_1" };

/** Each kind's validator, given a namespace for an otherwise valid Apply message. */
const VALIDATORS: Record<string, (namespace: string) => string | undefined> = {
  deployment: (ns) => validateApplyDeployment(sampleDeployment({ k8sNamespace: ns }), "local", true),
  job: (ns) =>
    validateApplyJob(
      create(ApplyJobSchema, {
        ...ids,
        jobId: "job_1",
        k8sNamespace: ns,
        k8sName: "job-shop-prod-report",
        region: "local",
        name: "report",
        schedule: "*/5 * * * *",
        image: "registry.example.com/shop:1",
        concurrencyPolicy: "Forbid",
        cpuMillicores: 250n,
        memoryMib: 256n,
      }),
      "local",
      false,
    ),
  release: (ns) =>
    validateApplyRelease(
      create(ApplyReleaseSchema, {
        ...ids,
        releaseId: "rel_1",
        k8sNamespace: ns,
        name: "default",
        version: 1n,
        region: "local",
        objects: [
          {
            id: "/ConfigMap/settings",
            kind: { group: "", version: "v1", kind: "ConfigMap" },
            name: "settings",
            manifestJson: JSON.stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "settings" } }),
          },
        ],
      }),
      "local",
    ),
  gateway: (ns) =>
    validateApplyGateway(
      create(ApplyGatewaySchema, {
        ...ids,
        gatewayId: "env_1",
        region: "local",
        k8sNamespace: ns,
        k8sName: "gw-shop-production-abc123",
        routes: [
          {
            name: "public",
            visibility: "public",
            hostnames: ["p.apps.example"],
            pathPrefix: "/",
            auth: { hosts: ["p.apps.example"], defaultAction: "allow" },
          },
        ],
      }),
      "local",
    ),
};

test("the reserved list holds Kubernetes' namespaces, krane's own and default", () => {
  for (const ns of ["default", "kube-system", "kube-public", "kube-node-lease", SENTINEL_NAMESPACE, AGENT_NAMESPACE])
    assert.ok(RESERVED_NAMESPACES.includes(ns), ns);
  assert.ok(isReservedNamespace("kube-anything"));
  assert.ok(!isReservedNamespace("ws-acme"));
});

for (const [kind, validate] of Object.entries(VALIDATORS)) {
  test(`the ${kind} kind refuses every reserved namespace and accepts a workspace's`, () => {
    assert.equal(validate("ws-acme"), undefined, "the message is valid in a workspace namespace");
    for (const ns of [...RESERVED_NAMESPACES, "kube-anything"])
      assert.match(validate(ns) ?? "", /k8s_namespace/, `${kind} in ${ns}`);
  });
}
