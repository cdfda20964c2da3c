// Human rendering of an environment's status (deployments with their instances per region and
// each instance's last event, sentinels, clusters), shared by `krane status` and `krane dev`,
// and of instance events (`krane events`).
import Table from "cli-table3";
import { describePolicy, policyFromWire } from "../contracts/autoscaling.js";
import type { GetEnvironmentStatusResponse } from "../gen/krane/ctrl/v1/api_pb.js";
import type { AddressRegionStatus } from "../gen/krane/ctrl/v1/exposure_pb.js";
import { Health, InstanceStatus } from "../gen/krane/ctrl/v1/cluster_pb.js";
import type { InstanceEvent } from "../gen/krane/ctrl/v1/events_pb.js";
import type { RolloutStatus } from "../gen/krane/ctrl/v1/rollout_pb.js";

const instanceStatus: Record<InstanceStatus, string> = {
  [InstanceStatus.UNSPECIFIED]: "unknown",
  [InstanceStatus.PENDING]: "pending",
  [InstanceStatus.RUNNING]: "running",
  [InstanceStatus.FAILED]: "failed",
  [InstanceStatus.TERMINATING]: "terminating",
};

const health: Record<Health, string> = {
  [Health.UNSPECIFIED]: "unknown",
  [Health.HEALTHY]: "healthy",
  [Health.UNHEALTHY]: "unhealthy",
  [Health.PAUSED]: "paused",
};

function ago(unixMs: bigint, now: number): string {
  if (unixMs === 0n) return "never";
  const s = Math.max(0, Math.round((now - Number(unixMs)) / 1000));
  return s < 120 ? `${s}s ago` : `${Math.round(s / 60)}m ago`;
}

/** "0", or the total with the kinds that lag: "12 (deployments 10, sentinels 2)". */
export function behind(c: { changesBehind: bigint; streams: { kind: string; behind: bigint }[] }): string {
  if (c.changesBehind === 0n) return "0";
  const parts = c.streams.filter((s) => s.behind > 0n).map((s) => `${s.kind} ${s.behind}`);
  return `${c.changesBehind}${parts.length ? ` (${parts.join(", ")})` : ""}`;
}

/**
 * An address's HTTPS listeners in one region: "programmed" when each of its hostnames' listener
 * is, else the first one's state ("pending", or its reason); "-" where none is reported (the
 * region's agent serves no HTTPS, or the address has no certificate).
 */
export function httpsListener(r: AddressRegionStatus): string {
  const listeners = (r.route?.certificates ?? []).flatMap((c) => (c.listener ? [c.listener] : []));
  if (listeners.length === 0) return "-";
  const off = listeners.find((l) => l.status !== "True");
  if (!off) return "programmed";
  return off.status === "" ? "pending" : off.reason || off.status.toLowerCase();
}

const plain = { chars: { mid: "", "left-mid": "", "mid-mid": "", "right-mid": "" }, style: { head: [], border: [] } };

export function renderEnvironmentStatus(
  s: GetEnvironmentStatusResponse,
  now = Date.now(),
  rollout?: RolloutStatus,
  lastEvents: readonly InstanceEvent[] = [],
): string {
  const last = new Map(lastEvents.map((e) => [instanceEventKey(e.deploymentId, e.region, e.instance), e]));
  const out: string[] = [];
  const env = s.environment;
  out.push(
    `environment ${env?.slug ?? "?"} (${env?.id ?? "?"})  regions: ${env?.regions.map((r) => `${r.region}×${r.replicas}`).join(", ") || "none"}`,
  );

  const deployments = new Table({
    head: ["REVISION", "DEPLOYMENT", "IMAGE", "REGION", "DESIRED", "RUNNING", "INSTANCES"],
    ...plain,
  });
  for (const d of s.deployments) {
    const dep = d.deployment;
    if (d.regions.length === 0)
      deployments.push([String(dep?.revision ?? ""), dep?.id ?? "", dep?.image ?? "", "-", "-", "-", ""]);
    for (const r of d.regions) {
      const instances = r.rejectedReason
        ? `REJECTED: ${r.rejectedReason}`
        : r.instances
            .map((i) => {
              const e = last.get(instanceEventKey(dep?.id ?? "", r.region, i.k8sName));
              const event = e ? `\n  ${describeInstanceEventAgo(e, now)}` : "";
              return `${i.address || i.k8sName} ${instanceStatus[i.status]}${i.zone ? ` (${i.zone})` : ""}${event}`;
            })
            .join("\n") || "-";
      deployments.push([
        String(dep?.revision ?? ""),
        dep?.id ?? "",
        dep?.image ?? "",
        r.region,
        String(r.desiredReplicas),
        String(r.runningInstances),
        instances,
      ]);
    }
  }
  out.push(s.deployments.length ? deployments.toString() : "no deployments");

  /** The routing policy version a region serves against the current one. */
  const routing = (want: bigint, served: bigint): string =>
    served === 0n ? `v${want} (not yet served)` : served === want ? `v${served}` : `v${served} → v${want}`;
  if (s.sentinels.length) {
    const sentinels = new Table({
      head: ["SENTINEL", "REGION", "ADDRESS", "DESIRED", "AVAILABLE", "HEALTH", "ROUTING", "REPORTED"],
      ...plain,
    });
    for (const x of s.sentinels) {
      sentinels.push([
        x.k8sName,
        x.region,
        x.address || "-",
        String(x.desiredReplicas),
        String(x.availableReplicas),
        x.rejectedReason ? `REJECTED: ${x.rejectedReason}` : health[x.health],
        routing(x.routingVersion, x.servedRoutingVersion),
        ago(x.reportedAtUnixMs, now),
      ]);
    }
    out.push(sentinels.toString());
  }
  if (s.autoscale.length) {
    // Autoscaling: each region's policy and its agent's last decision with the reason for it.
    const autoscale = new Table({ head: ["AUTOSCALE", "REPLICAS", "POLICY", "DECIDED", "REASON"], ...plain });
    for (const a of s.autoscale)
      autoscale.push([
        a.region,
        String(a.replicas),
        a.policy ? describePolicy(policyFromWire(a.policy)) : "off",
        ago(a.decidedAtUnixMs, now),
        a.reason,
      ]);
    out.push(autoscale.toString());
  }
  if (s.endpoints.length || s.domains.length) {
    // Exposure: each address and its readiness per region (gateway reports), and whether the
    // environment's Gateway serves it over HTTPS (its listeners, where the agent serves HTTPS).
    const addresses = new Table({ head: ["ADDRESS", "KIND", "REGION", "READINESS", "HTTPS", "WHY"], ...plain });
    for (const e of s.endpoints) {
      const url = e.endpoint?.url ?? "";
      const kind = `${e.endpoint?.visibility ?? ""} endpoint${e.endpoint?.auth ? " (jwt)" : ""}`;
      if (e.regions.length === 0) addresses.push([url, kind, "-", "-", "-", "the environment is in no region"]);
      for (const r of e.regions) addresses.push([url, kind, r.region, r.readiness, httpsListener(r), r.message || "-"]);
    }
    for (const d of s.domains) {
      const host = d.domain?.hostname ?? "";
      if (d.domain?.state !== "verified") {
        addresses.push([
          host,
          "domain",
          "-",
          d.domain?.state ?? "?",
          "-",
          d.domain?.lastError || `create TXT ${d.domain?.txtName ?? ""} = ${d.domain?.txtValue ?? ""}`,
        ]);
        continue;
      }
      for (const r of d.regions)
        addresses.push([host, "domain", r.region, r.readiness, httpsListener(r), r.message || "-"]);
    }
    out.push(addresses.toString());
  }
  if (s.clusters.length) {
    // BEHIND: changes desired in the region that its agent has not taken yet (ctrl's newest
    // version per kind minus the agent's cursor in its last heartbeat).
    const clusters = new Table({ head: ["CLUSTER", "REGION", "AGENT", "LAST SEEN", "BEHIND"], ...plain });
    for (const c of s.clusters)
      clusters.push([c.name, c.region, c.agentId || "-", ago(c.lastHeartbeatUnixMs, now), behind(c)]);
    out.push(clusters.toString());
  }
  if (rollout) out.push(renderRolloutStatus(rollout));
  return out.join("\n");
}

// ---------------------------------------------------------------- rollouts

function iso(unixMs: bigint): string {
  return unixMs === 0n ? "-" : new Date(Number(unixMs)).toISOString().replace(/\.\d+Z$/, "Z");
}

/** Per region: progress, each revision's desired/current/ready/available counts, conditions, recent events. */
export function renderRolloutStatus(s: RolloutStatus, eventsShown = 5): string {
  const out: string[] = [];
  const p = s.progressive;
  if (p) {
    out.push(`${p.strategy} ${p.phase}${p.reason ? `: ${p.reason}` : ""}`);
    out.push(
      `  step ${p.step}/${p.steps} (${p.stepName})${p.waves > 1 ? `, wave ${p.wave}/${p.waves}${p.atWaveGate ? " at its gate" : ""}` : ""}`,
    );
    out.push(
      `  stable ${p.stableDeploymentId || "-"}, new ${p.canaryDeploymentId || "-"}${p.aborted ? " (aborted)" : ""}`,
    );
    for (const w of p.weights) {
      const ws = w.weights.map((x) => `${x.deploymentId} ${x.weight}%`).join(", ");
      out.push(
        `  weights ${w.region}: ${ws}${w.previewDeploymentId ? ` (preview ${w.previewDeploymentId} via ${p.previewHeader})` : ""}`,
      );
    }
    if (p.lastAnalysis)
      out.push(`  last analysis: ${p.lastAnalysis}: ${p.lastAnalysisReason} (${iso(p.lastAnalysisUnixMs)})`);
    if (p.previousDeploymentId)
      out.push(`  previous ${p.previousDeploymentId} kept until ${iso(p.previousUntilUnixMs)} (abort = route swap)`);
  }
  for (const r of s.regions) {
    const state = r.deadlineExceeded ? "FAILED: progress deadline exceeded" : r.complete ? "complete" : r.message;
    out.push(
      `rollout ${r.region}: ${state}${r.paused ? " (paused)" : ""}  replicas ${r.replicas}, updated ${r.updatedReplicas}, ready ${r.readyReplicas}, available ${r.availableReplicas}`,
    );
    const revisions = new Table({
      head: ["", "revision", "deployment", "image", "desired", "current", "ready", "available"],
      ...plain,
    });
    for (const x of r.revisions) {
      revisions.push([
        x.target ? "→" : "",
        x.revision === 0n ? "-" : String(x.revision),
        x.deploymentId,
        x.image,
        String(x.desiredReplicas),
        String(x.currentReplicas),
        String(x.readyReplicas),
        String(x.availableReplicas),
      ]);
    }
    if (r.revisions.length) out.push(revisions.toString());
    for (const c of r.conditions)
      out.push(`  ${c.type}=${c.status} ${c.reason}: ${c.message} (since ${iso(c.lastTransitionUnixMs)})`);
    for (const e of r.events.slice(-eventsShown)) out.push(`  ${iso(e.atUnixMs)} ${e.type} ${e.reason}: ${e.message}`);
  }
  return out.join("\n") || "no regions";
}

/** `krane rollout history`: revisions per region, newest first. */
export function renderRolloutHistory(s: RolloutStatus): string {
  const t = new Table({ head: ["region", "revision", "deployment", "image", "created", "replicas", ""], ...plain });
  for (const r of s.regions) {
    const byRevision = [...r.revisions].sort((a, b) => Number(b.revision - a.revision));
    for (const x of byRevision) {
      t.push([
        r.region,
        x.revision === 0n ? "-" : String(x.revision),
        x.deploymentId,
        x.image,
        iso(x.createdAtUnixMs),
        String(x.desiredReplicas),
        x.target ? "current" : "",
      ]);
    }
  }
  return t.toString();
}

// ---------------------------------------------------------------- instance events

/** What an instance event says, in a few words: "OOMKilled (exit 137)", "CrashLoopBackOff, exit 3, 5 restarts". */
export function describeInstanceEvent(e: InstanceEvent): string {
  const exit = e.exitCode === undefined ? "" : `exit ${e.exitCode}`;
  const restarts = e.restarts === 0 ? "" : `${e.restarts} restart${e.restarts === 1 ? "" : "s"}`;
  const short = (m: string, n = 120) => (m.length <= n ? m : `${m.slice(0, n - 1)}…`);
  switch (e.kind) {
    case "terminated":
      return `${e.reason} (${[exit || "no exit code", restarts].filter(Boolean).join(", ")})`;
    case "waiting":
      if (e.reason === "CrashLoopBackOff") return [e.reason, exit, restarts].filter(Boolean).join(", ");
      if (/Image/.test(e.reason)) return `${e.reason}: ${e.image}${e.message ? `: ${short(e.message)}` : ""}`;
      return `${e.reason}${e.message ? `: ${short(e.message)}` : ""}`;
    case "unready":
      return "readiness probe failing";
    case "evicted":
      // The kubelet's eviction is "Evicted"; an eviction through the API, a preemption or a
      // taint says which in its reason.
      return `Evicted${e.reason !== "Evicted" && e.reason !== "" ? ` (${e.reason})` : ""}${e.message ? `: ${short(e.message)}` : ""}`;
    default:
      return e.reason;
  }
}

/** An event with how long ago it happened: "OOMKilled (exit 137) 2m ago". */
export function describeInstanceEventAgo(e: InstanceEvent, now: number): string {
  return `${describeInstanceEvent(e)} ${ago(e.atUnixMs, now)}`;
}

/** The key of an instance in a status: its revision's deployment, region and pod name. */
export function instanceEventKey(deploymentId: string, region: string, instance: string): string {
  return `${deploymentId}\u0000${region}\u0000${instance}`;
}
