// Unit tests of the report checks every kind shares (src/ctrl/kinds/report.ts), through the
// registered descriptors: each kind's delete and rejected changes are checked the same way, a kind
// named by id alone requires the id, a bad field is refused naming it, and a rejection reason is
// kept on one line whatever the agent sent.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import {
  InstanceStatus,
  ObjectHealth,
  ReportDeploymentStatusRequestSchema,
  ReportGatewayStatusRequestSchema,
  ReportReleaseStatusRequestSchema,
  ReportSentinelStatusRequestSchema,
} from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { DomainError } from "../../../../src/ctrl/errors.js";
import { deploymentKind } from "../../../../src/ctrl/kinds/deployment.js";
import { gatewayKind } from "../../../../src/ctrl/kinds/gateway.js";
import { KINDS } from "../../../../src/ctrl/kinds/registry.js";
import { releaseKind } from "../../../../src/ctrl/kinds/release.js";
import { sentinelKind } from "../../../../src/ctrl/kinds/sentinel.js";

const field = (f: string) => (e: unknown) => e instanceof DomainError && e.code === "invalid_argument" && e.field === f;

describe("agent reports", () => {
  it("name their object by id, or by Kubernetes name for kinds whose agent may know only that", () => {
    const byName = deploymentKind.report.validate(
      create(ReportDeploymentStatusRequestSchema, {
        region: "eu",
        change: { case: "delete", value: { deploymentId: "", k8sName: "web-1" } },
      }),
    );
    assert.deepEqual(byName, { type: "delete", id: "", k8sName: "web-1" });
    assert.throws(
      () =>
        deploymentKind.report.validate(
          create(ReportDeploymentStatusRequestSchema, { change: { case: "delete", value: { deploymentId: "" } } }),
        ),
      field("delete.k8s_name"),
    );
    assert.throws(
      () =>
        sentinelKind.report.validate(
          create(ReportSentinelStatusRequestSchema, {
            change: { case: "rejected", value: { sentinelId: "dep_abc", reason: "no" } },
          }),
        ),
      field("rejected.sentinel_id"),
    );
    // Gateways and releases have no Kubernetes name in their reports: the id is required.
    assert.throws(
      () =>
        gatewayKind.report.validate(
          create(ReportGatewayStatusRequestSchema, { change: { case: "delete", value: { gatewayId: "" } } }),
        ),
      field("delete.gateway_id"),
    );
    assert.deepEqual(
      releaseKind.report.validate(
        create(ReportReleaseStatusRequestSchema, { change: { case: "delete", value: { releaseId: "rel_1" } } }),
      ),
      { type: "delete", id: "rel_1", k8sName: "" },
    );
  });

  it("keep a rejection reason on one line and refuse an empty one", () => {
    const r = gatewayKind.report.validate(
      create(ReportGatewayStatusRequestSchema, {
        change: { case: "rejected", value: { gatewayId: "env_1", reason: "line one\r\n\tline\u0000two\u001b[0m" } },
      }),
    );
    assert.deepEqual(r, { type: "rejected", id: "env_1", k8sName: "", reason: "line one line two [0m" });
    assert.throws(
      () =>
        deploymentKind.report.validate(
          create(ReportDeploymentStatusRequestSchema, {
            change: { case: "rejected", value: { deploymentId: "dep_1", reason: "" } },
          }),
        ),
      field("rejected.reason"),
    );
  });

  it("check an update's own fields, naming the one refused", () => {
    const ok = deploymentKind.report.validate(
      create(ReportDeploymentStatusRequestSchema, {
        change: {
          case: "update",
          value: {
            deploymentId: "dep_1",
            k8sName: "web-1",
            instances: [{ k8sName: "web-1-a", status: InstanceStatus.RUNNING, address: "10.0.0.1" }],
          },
        },
      }),
    );
    assert.equal(ok.type, "update");
    assert.equal(ok.type === "update" && ok.instances[0]?.status, "running");
    assert.throws(
      () =>
        deploymentKind.report.validate(
          create(ReportDeploymentStatusRequestSchema, {
            change: {
              case: "update",
              value: {
                deploymentId: "dep_1",
                k8sName: "web-1",
                instances: [{ k8sName: "a", status: 99 as InstanceStatus }],
              },
            },
          }),
        ),
      field("update.instances[0].status"),
    );
    assert.throws(
      () =>
        releaseKind.report.validate(
          create(ReportReleaseStatusRequestSchema, {
            change: {
              case: "update",
              value: {
                releaseId: "rel_1",
                objects: [{ id: "o", kind: { kind: "ConfigMap" }, name: "x", health: ObjectHealth.HEALTHY + 100 }],
              },
            },
          }),
        ),
      field("update.objects[0].health"),
    );
  });

  it("without a change are refused by every kind", () => {
    for (const kind of KINDS)
      assert.throws(() => kind.report.validate({ change: { case: undefined } }), field("change"));
  });
});
