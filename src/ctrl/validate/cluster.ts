// Validation of agent (ClusterService) inputs: ids, reports and heartbeats.
import {
  Health,
  InstanceStatus,
  type HeartbeatRequest,
  type ReportDeploymentStatusRequest,
  type ReportSentinelStatusRequest,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { invalidArgument } from "../errors.js";
import type { DeploymentReport, HealthName, InstanceStatusName, SentinelReport } from "../store/reports.js";
import * as r from "./rules.js";

const K8S_NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

function k8sName(field: string, v: string, required: boolean): string {
  if (v === "") {
    if (required) throw invalidArgument(field, "is required");
    return v;
  }
  if (v.length > 253 || !K8S_NAME.test(v)) throw invalidArgument(field, "must be a Kubernetes object name");
  return v;
}

function optionalId(field: string, v: string, prefix: string): string {
  return v === "" ? "" : r.id(field, v, prefix);
}

export function validateIdList(field: string, ids: readonly string[], prefix: string): string[] {
  r.list(field, ids, 1000);
  return ids.map((v, i) => r.id(`${field}[${i}]`, v, prefix));
}

function instanceStatus(field: string, s: InstanceStatus): InstanceStatusName {
  switch (s) {
    case InstanceStatus.PENDING:
      return "pending";
    case InstanceStatus.RUNNING:
      return "running";
    case InstanceStatus.FAILED:
      return "failed";
    case InstanceStatus.UNSPECIFIED:
      return "unknown";
    default:
      throw invalidArgument(field, "is not a known instance status");
  }
}

function health(field: string, h: Health): HealthName {
  switch (h) {
    case Health.HEALTHY:
      return "healthy";
    case Health.UNHEALTHY:
      return "unhealthy";
    case Health.PAUSED:
      return "paused";
    case Health.UNSPECIFIED:
      return "unknown";
    default:
      throw invalidArgument(field, "is not a known health");
  }
}

export function validateDeploymentReport(req: ReportDeploymentStatusRequest): DeploymentReport {
  const c = req.change;
  switch (c.case) {
    case "update": {
      const u = c.value;
      const deploymentId = optionalId("update.deployment_id", u.deploymentId, "dep");
      const name = k8sName("update.k8s_name", u.k8sName, deploymentId === "");
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
      return { type: "update", deploymentId, k8sName: name, instances };
    }
    case "delete": {
      const deploymentId = optionalId("delete.deployment_id", c.value.deploymentId, "dep");
      return { type: "delete", deploymentId, k8sName: k8sName("delete.k8s_name", c.value.k8sName, deploymentId === "") };
    }
    case "rejected": {
      const deploymentId = optionalId("rejected.deployment_id", c.value.deploymentId, "dep");
      return {
        type: "rejected",
        deploymentId,
        k8sName: k8sName("rejected.k8s_name", c.value.k8sName, deploymentId === ""),
        reason: r.text("rejected.reason", c.value.reason.replace(/[\r\n\t]/g, " "), r.LIMITS.reasonMax, true),
      };
    }
    default:
      throw invalidArgument("change", "is required (update, delete or rejected)");
  }
}

export function validateSentinelReport(req: ReportSentinelStatusRequest): SentinelReport {
  const c = req.change;
  switch (c.case) {
    case "update": {
      const sentinelId = optionalId("update.sentinel_id", c.value.sentinelId, "snt");
      return {
        type: "update",
        sentinelId,
        k8sName: k8sName("update.k8s_name", c.value.k8sName, sentinelId === ""),
        availableReplicas: r.intRange("update.available_replicas", c.value.availableReplicas, 0, 100_000),
        health: health("update.health", c.value.health),
      };
    }
    case "delete": {
      const sentinelId = optionalId("delete.sentinel_id", c.value.sentinelId, "snt");
      return { type: "delete", sentinelId, k8sName: k8sName("delete.k8s_name", c.value.k8sName, sentinelId === "") };
    }
    case "rejected": {
      const sentinelId = optionalId("rejected.sentinel_id", c.value.sentinelId, "snt");
      return {
        type: "rejected",
        sentinelId,
        k8sName: k8sName("rejected.k8s_name", c.value.k8sName, sentinelId === ""),
        reason: r.text("rejected.reason", c.value.reason.replace(/[\r\n\t]/g, " "), r.LIMITS.reasonMax, true),
      };
    }
    default:
      throw invalidArgument("change", "is required (update, delete or rejected)");
  }
}

export function validateHeartbeat(req: HeartbeatRequest): { agentId: string; build: string; deploymentsVersion: number; sentinelsVersion: number } {
  return {
    agentId: r.text("agent_id", req.agentId, r.LIMITS.shortTextMax),
    build: r.text("build", req.build, r.LIMITS.shortTextMax),
    deploymentsVersion: r.intRange("deployments_version", req.deploymentsVersion, 0, Number.MAX_SAFE_INTEGER),
    sentinelsVersion: r.intRange("sentinels_version", req.sentinelsVersion, 0, Number.MAX_SAFE_INTEGER),
  };
}
