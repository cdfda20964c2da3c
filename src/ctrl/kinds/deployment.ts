// The deployment kind's descriptor: its stream and the rules of its
// agents' reports (an update is the instance set of a revision in a region, with its events),
// which ../domain/deployments.ts records. Its payloads are ../payloads/deployment.ts.
import {
  DeploymentStateSchema,
  InstanceStatus,
  type ReportDeploymentStatusRequest_Update,
  ReportDeploymentStatusRequestSchema,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { recordDeploymentReport, type InstanceStatusName } from "../domain/deployments.js";
import { invalidArgument } from "../errors.js";
import { deploymentPayloads } from "../payloads/deployment.js";
import { k8sName } from "../validate/cluster.js";
import * as r from "../validate/rules.js";
import { streamedKind } from "./kind.js";

/** At most this many events in one report: a few per pod (the agent sends what pods show now). */
const EVENTS_MAX = 4 * r.LIMITS.instancesMax;
const EVENT_KINDS = ["terminated", "waiting", "unready", "evicted"] as const;
/** The agent cuts the kubelet's messages to 512 characters (a margin for multi-byte text). */
const EVENT_MESSAGE_MAX = 1024;

function eventKind(field: string, v: string): string {
  if (!(EVENT_KINDS as readonly string[]).includes(v))
    throw invalidArgument(field, `must be one of ${EVENT_KINDS.join(", ")}`);
  return v;
}

/** A kubelet reason: a CamelCase word. */
function eventReason(field: string, v: string): string {
  if (!/^[A-Za-z][A-Za-z0-9]{0,63}$/.test(v))
    throw invalidArgument(field, "must be a word of letters and digits (at most 64)");
  return v;
}

const INSTANCE_STATUS: Record<number, InstanceStatusName> = {
  [InstanceStatus.PENDING]: "pending",
  [InstanceStatus.RUNNING]: "running",
  [InstanceStatus.FAILED]: "failed",
  [InstanceStatus.TERMINATING]: "terminating",
  [InstanceStatus.UNSPECIFIED]: "unknown",
};

/** The update's own fields: the revision's instances in the region and their events. */
function checkUpdate(u: ReportDeploymentStatusRequest_Update) {
  r.list("update.instances", u.instances, r.LIMITS.instancesMax);
  const instances = u.instances.map((i, n) => {
    const f = `update.instances[${n}]`;
    return {
      k8sName: k8sName(`${f}.k8s_name`, i.k8sName, true),
      address: r.text(`${f}.address`, i.address, r.LIMITS.shortTextMax),
      status: r.enumName(`${f}.status`, i.status, INSTANCE_STATUS, "instance status"),
      cpuMillicores: r.intRange(`${f}.cpu_millicores`, i.cpuMillicores, 0, 10_000_000),
      memoryMib: r.intRange(`${f}.memory_mib`, i.memoryMib, 0, 100_000_000),
      nodeName: r.text(`${f}.node_name`, i.nodeName, r.LIMITS.shortTextMax),
      zone: r.text(`${f}.zone`, i.zone, r.LIMITS.shortTextMax),
      readySince: r.intRange(`${f}.ready_since_unix_ms`, i.readySinceUnixMs, 0, Number.MAX_SAFE_INTEGER),
    };
  });
  r.list("update.events", u.events, EVENTS_MAX);
  const events = u.events.map((e, n) => {
    const f = `update.events[${n}]`;
    return {
      instance: k8sName(`${f}.instance`, e.instance, true),
      kind: eventKind(`${f}.kind`, e.kind),
      reason: eventReason(`${f}.reason`, e.reason),
      atMs: r.intRange(`${f}.at_unix_ms`, e.atUnixMs, 0, Number.MAX_SAFE_INTEGER),
      exitCode: e.exitCode === undefined ? null : r.intRange(`${f}.exit_code`, e.exitCode, -(2 ** 31), 2 ** 31 - 1),
      restarts: r.intRange(`${f}.restarts`, e.restarts, 0, 2 ** 31 - 1),
      image: r.text(`${f}.image`, e.image, r.LIMITS.imageMax),
      message: r.text(`${f}.message`, e.message, EVENT_MESSAGE_MAX),
    };
  });
  return { instances, events };
}

// ---------------------------------------------------------------- descriptor

export const deploymentKind = streamedKind({
  name: deploymentPayloads.name,
  idPrefix: "dep",
  wire: { state: DeploymentStateSchema, apply: deploymentPayloads.apply, delete: deploymentPayloads.delete },
  report: {
    message: ReportDeploymentStatusRequestSchema,
    key: "deploymentId",
    byK8sName: true,
    update: checkUpdate,
    record: recordDeploymentReport,
  },
});
