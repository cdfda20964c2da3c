// Validation rules of agent (ClusterService) inputs shared by every kind: id lists, Kubernetes
// names, the subject of a report, rejection reasons, and heartbeats. Each kind's report
// validation (../kinds/<kind>.ts) is built from these.
import type { HeartbeatRequest } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { invalidArgument } from "../errors.js";
import * as r from "./rules.js";

const K8S_NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

export function k8sName(field: string, v: string, required: boolean): string {
  if (v === "") {
    if (required) throw invalidArgument(field, "is required");
    return v;
  }
  if (v.length > 253 || !K8S_NAME.test(v)) throw invalidArgument(field, "must be a Kubernetes object name");
  return v;
}

export function optionalId(field: string, v: string, prefix: string): string {
  return v === "" ? "" : r.id(field, v, prefix);
}

/**
 * The object a report change is about: its id (`<case>.<idField>`, may be empty) and its
 * Kubernetes name (`<case>.k8s_name`, required when the id is empty).
 */
export function reportSubject(
  change: string,
  idField: string,
  prefix: string,
  v: { id: string; k8sName: string },
): { id: string; k8sName: string } {
  const id = optionalId(`${change}.${idField}`, v.id, prefix);
  return { id, k8sName: k8sName(`${change}.k8s_name`, v.k8sName, id === "") };
}

/** Text from the API server may span lines or hold other control characters: status keeps it on one line. */
export function oneLine(s: string): string {
  // eslint-disable-next-line no-control-regex
  return s.replace(/[\u0000-\u001f\u007f]+/g, " ");
}

/** An agent's rejection reason, on one line. */
export function rejectionReason(field: string, v: string): string {
  return r.text(field, oneLine(v), r.LIMITS.reasonMax, true);
}

export function validateIdList(field: string, ids: readonly string[], prefix: string): string[] {
  r.list(field, ids, 1000);
  return ids.map((v, i) => r.id(`${field}[${i}]`, v, prefix));
}

const KIND = /^[a-z][a-z0-9-]{0,39}$/;

export function validateHeartbeat(req: HeartbeatRequest): {
  agentId: string;
  build: string;
  deploymentsVersion: number;
  sentinelsVersion: number;
  cursors: { kind: string; version: number }[];
} {
  r.list("cursors", req.cursors, r.LIMITS.listMax);
  const seen = new Set<string>();
  const cursors = req.cursors.map((c, i) => {
    if (!KIND.test(c.kind))
      throw invalidArgument(`cursors[${i}].kind`, "must be a kind name (lowercase letters, digits and '-')");
    if (seen.has(c.kind)) throw invalidArgument(`cursors[${i}].kind`, `"${c.kind}" is listed twice`);
    seen.add(c.kind);
    return { kind: c.kind, version: r.intRange(`cursors[${i}].version`, c.version, 0, Number.MAX_SAFE_INTEGER) };
  });
  return {
    agentId: r.text("agent_id", req.agentId, r.LIMITS.shortTextMax),
    build: r.text("build", req.build, r.LIMITS.shortTextMax),
    deploymentsVersion: r.intRange("deployments_version", req.deploymentsVersion, 0, Number.MAX_SAFE_INTEGER),
    sentinelsVersion: r.intRange("sentinels_version", req.sentinelsVersion, 0, Number.MAX_SAFE_INTEGER),
    cursors,
  };
}
