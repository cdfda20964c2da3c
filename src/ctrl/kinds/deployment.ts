// The deployment kind's descriptor: its stream, its ClusterService methods, and the validation
// of its agents' reports (the instance set of a revision in a region, or a rejection), which
// ../domain/deployments.ts records. Its payloads are ../payloads/deployment.ts.
import { create } from "@bufbuild/protobuf";
import {
  DeploymentStateSchema,
  GetDesiredDeploymentStatesResponseSchema,
  InstanceStatus,
  type ReportDeploymentStatusRequest,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { recordDeploymentReport, type DeploymentReport, type InstanceStatusName } from "../domain/deployments.js";
import { invalidArgument } from "../errors.js";
import { deploymentPayloads } from "../payloads/deployment.js";
import { k8sName, rejectionReason, reportSubject } from "../validate/cluster.js";
import * as r from "../validate/rules.js";
import type { Kind } from "./kind.js";

function instanceStatus(field: string, s: InstanceStatus): InstanceStatusName {
  switch (s) {
    case InstanceStatus.PENDING:
      return "pending";
    case InstanceStatus.RUNNING:
      return "running";
    case InstanceStatus.FAILED:
      return "failed";
    case InstanceStatus.TERMINATING:
      return "terminating";
    case InstanceStatus.UNSPECIFIED:
      return "unknown";
    default:
      throw invalidArgument(field, "is not a known instance status");
  }
}

export function validateDeploymentReport(req: ReportDeploymentStatusRequest): DeploymentReport {
  const c = req.change;
  switch (c.case) {
    case "update": {
      const u = c.value;
      const subject = reportSubject("update", "deployment_id", "dep", { id: u.deploymentId, k8sName: u.k8sName });
      r.list("update.instances", u.instances, r.LIMITS.instancesMax);
      const instances = u.instances.map((i, n) => {
        const f = `update.instances[${n}]`;
        return {
          k8sName: k8sName(`${f}.k8s_name`, i.k8sName, true),
          address: r.text(`${f}.address`, i.address, r.LIMITS.shortTextMax),
          status: instanceStatus(`${f}.status`, i.status),
          cpuMillicores: r.intRange(`${f}.cpu_millicores`, i.cpuMillicores, 0, 10_000_000),
          memoryMib: r.intRange(`${f}.memory_mib`, i.memoryMib, 0, 100_000_000),
          nodeName: r.text(`${f}.node_name`, i.nodeName, r.LIMITS.shortTextMax),
          zone: r.text(`${f}.zone`, i.zone, r.LIMITS.shortTextMax),
          readySince: r.intRange(`${f}.ready_since_unix_ms`, i.readySinceUnixMs, 0, Number.MAX_SAFE_INTEGER),
        };
      });
      return { type: "update", ...subject, instances };
    }
    case "delete":
      return {
        type: "delete",
        ...reportSubject("delete", "deployment_id", "dep", { id: c.value.deploymentId, k8sName: c.value.k8sName }),
      };
    case "rejected": {
      const subject = reportSubject("rejected", "deployment_id", "dep", {
        id: c.value.deploymentId,
        k8sName: c.value.k8sName,
      });
      return { type: "rejected", ...subject, reason: rejectionReason("rejected.reason", c.value.reason) };
    }
    default:
      throw invalidArgument("change", "is required (update, delete or rejected)");
  }
}

// ---------------------------------------------------------------- descriptor

export const deploymentKind: Kind<typeof DeploymentStateSchema, DeploymentReport> = {
  name: deploymentPayloads.name,
  idPrefix: "dep",
  wire: { state: DeploymentStateSchema, apply: deploymentPayloads.apply, delete: deploymentPayloads.delete },
  recordReport: recordDeploymentReport,
  subject: (report) => ({ id: report.id, k8sName: report.k8sName }),
  methods: (h) => ({
    watchDeployments: (req, ctx) => h.watch(req, ctx),
    getDesiredDeploymentState: (req, ctx) => h.getOne(req, "deployment_id", req.deploymentId, ctx),
    getDesiredDeploymentStates: async (req, ctx) =>
      create(GetDesiredDeploymentStatesResponseSchema, await h.getMany(req, "deployment_ids", req.deploymentIds, ctx)),
    reportDeploymentStatus: async (req, ctx) => {
      await h.report(req, () => validateDeploymentReport(req), ctx);
      return {};
    },
  }),
};
