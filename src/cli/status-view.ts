// Human rendering of an environment's status (deployments with their instances per region and
// each instance's last event, sentinels, clusters), shared by `krane status` and `krane dev`,
// of rollouts (`krane rollout`) and of instance events (`krane events`, `krane logs --events`).
//
// It renders the answers in their JSON form (the generated `…Json` types, imported as types
// only), which is what `krane status` reads off the wire without loading protobuf-es
// (json-call.ts); a caller holding messages passes `toJson(Schema, message)`. In that form a
// field at its default is absent, 64-bit integers are decimal strings and enums are their names.
import Table from "cli-table3";
import { describePolicy, policyFromWire } from "../contracts/autoscaling.js";
import { pullFailureReason, registryOf } from "../contracts/images.js";
import type { GetEnvironmentStatusResponseJson } from "../gen/krane/ctrl/v1/api_pb.js";
import type { AutoscalePolicyJson } from "../gen/krane/ctrl/v1/autoscale_pb.js";
import type { AddressRegionStatusJson } from "../gen/krane/ctrl/v1/exposure_pb.js";
import type { HealthJson, InstanceStatusJson } from "../gen/krane/ctrl/v1/cluster_pb.js";
import type { InstanceEventJson } from "../gen/krane/ctrl/v1/events_pb.js";
import type { RolloutStatusJson } from "../gen/krane/ctrl/v1/rollout_pb.js";

const instanceStatus: Record<InstanceStatusJson, string> = {
  INSTANCE_STATUS_UNSPECIFIED: "unknown",
  INSTANCE_STATUS_PENDING: "pending",
  INSTANCE_STATUS_RUNNING: "running",
  INSTANCE_STATUS_FAILED: "failed",
  INSTANCE_STATUS_TERMINATING: "terminating",
};

const health: Record<HealthJson, string> = {
  HEALTH_UNSPECIFIED: "unknown",
  HEALTH_HEALTHY: "healthy",
  HEALTH_UNHEALTHY: "unhealthy",
  HEALTH_PAUSED: "paused",
};

/** A 64-bit integer of the JSON form ("" or absent for 0). */
function int64(v: string | undefined): bigint {
  return v === undefined || v === "" ? 0n : BigInt(v);
}

function ago(unixMs: string | undefined, now: number): string {
  const ms = int64(unixMs);
  if (ms === 0n) return "never";
  const s = Math.max(0, Math.round((now - Number(ms)) / 1000));
  return s < 120 ? `${s}s ago` : `${Math.round(s / 60)}m ago`;
}

/** "0", or the total with the kinds that lag: "12 (deployments 10, sentinels 2)". */
export function behind(c: { changesBehind?: string; streams?: { kind?: string; behind?: string }[] }): string {
  const total = int64(c.changesBehind);
  if (total === 0n) return "0";
  const parts = (c.streams ?? []).filter((s) => int64(s.behind) > 0n).map((s) => `${s.kind ?? "?"} ${s.behind}`);
  return `${total}${parts.length ? ` (${parts.join(", ")})` : ""}`;
}

/** An autoscaling policy of the JSON form, described as `krane env` shows it. */
function policyText(p: AutoscalePolicyJson): string {
  const z = p.scaleToZero;
  return describePolicy(
    policyFromWire({
      minReplicas: p.minReplicas ?? 0,
      maxReplicas: p.maxReplicas ?? 0,
      concurrencyTarget: p.concurrencyTarget,
      cpuTargetPercent: p.cpuTargetPercent,
      scaleUpWindowSeconds: p.scaleUpWindowSeconds ?? 0,
      scaleDownWindowSeconds: p.scaleDownWindowSeconds ?? 0,
      maxStep: p.maxStep,
      scaleToZero: z && {
        idleSeconds: z.idleSeconds ?? 0,
        maxHeldRequests: z.maxHeldRequests ?? 0,
        heldTimeoutSeconds: z.heldTimeoutSeconds ?? 0,
      },
    }),
  );
}

/**
 * An address's HTTPS listeners in one region: "programmed" when each of its hostnames' listener
 * is, else the first one's state ("pending", or its reason); "-" where none is reported (the
 * region's agent serves no HTTPS, or the address has no certificate).
 */
export function httpsListener(r: AddressRegionStatusJson): string {
  const listeners = (r.route?.certificates ?? []).flatMap((c) => (c.listener ? [c.listener] : []));
  if (listeners.length === 0) return "-";
  const off = listeners.find((l) => l.status !== "True");
  if (!off) return "programmed";
  const status = off.status ?? "";
  return status === "" ? "pending" : off.reason || status.toLowerCase();
}

const plain = { chars: { mid: "", "left-mid": "", "mid-mid": "", "right-mid": "" }, style: { head: [], border: [] } };

export function renderEnvironmentStatus(
  s: GetEnvironmentStatusResponseJson,
  now = Date.now(),
  rollout?: RolloutStatusJson,
  lastEvents: readonly InstanceEventJson[] = [],
): string {
  const last = new Map(
    lastEvents.map((e) => [instanceEventKey(e.deploymentId ?? "", e.region ?? "", e.instance ?? ""), e]),
  );
  const out: string[] = [];
  const env = s.environment;
  const regions = (env?.regions ?? []).map((r) => `${r.region ?? ""}×${r.replicas ?? 0}`).join(", ");
  out.push(`environment ${env?.slug ?? "?"} (${env?.id ?? "?"})  regions: ${regions || "none"}`);

  const deployments = new Table({
    head: ["REVISION", "DEPLOYMENT", "IMAGE", "REGION", "DESIRED", "RUNNING", "INSTANCES"],
    ...plain,
  });
  const all = s.deployments ?? [];
  for (const d of all) {
    const dep = d.deployment;
    const revision = dep ? String(int64(dep.revision)) : "";
    const image = imageText(dep?.image, dep?.imageDigest);
    if (!d.regions?.length) deployments.push([revision, dep?.id ?? "", image, "-", "-", "-", ""]);
    for (const r of d.regions ?? []) {
      const instances = r.rejectedReason
        ? `REJECTED: ${r.rejectedReason}`
        : (r.instances ?? [])
            .map((i) => {
              const e = last.get(instanceEventKey(dep?.id ?? "", r.region ?? "", i.k8sName ?? ""));
              const event = e ? `\n  ${describeInstanceEventAgo(e, now)}` : "";
              const state = instanceStatus[i.status ?? "INSTANCE_STATUS_UNSPECIFIED"];
              return `${i.address || i.k8sName || ""} ${state}${i.zone ? ` (${i.zone})` : ""}${event}`;
            })
            .join("\n") || "-";
      deployments.push([
        revision,
        dep?.id ?? "",
        image,
        r.region ?? "",
        String(r.desiredReplicas ?? 0),
        String(r.runningInstances ?? 0),
        instances,
      ]);
    }
  }
  out.push(all.length ? deployments.toString() : "no deployments");

  /** The routing policy version a region serves against the current one. */
  const routing = (want: bigint, served: bigint): string =>
    served === 0n ? `v${want} (not yet served)` : served === want ? `v${served}` : `v${served} → v${want}`;
  if (s.sentinels?.length) {
    const sentinels = new Table({
      head: ["SENTINEL", "REGION", "ADDRESS", "DESIRED", "AVAILABLE", "HEALTH", "ROUTING", "REPORTED"],
      ...plain,
    });
    for (const x of s.sentinels) {
      sentinels.push([
        x.k8sName ?? "",
        x.region ?? "",
        x.address || "-",
        String(x.desiredReplicas ?? 0),
        String(x.availableReplicas ?? 0),
        x.rejectedReason ? `REJECTED: ${x.rejectedReason}` : health[x.health ?? "HEALTH_UNSPECIFIED"],
        routing(int64(x.routingVersion), int64(x.servedRoutingVersion)),
        ago(x.reportedAtUnixMs, now),
      ]);
    }
    out.push(sentinels.toString());
  }
  if (s.autoscale?.length) {
    // Autoscaling: each region's policy and its agent's last decision with the reason for it.
    const autoscale = new Table({ head: ["AUTOSCALE", "REPLICAS", "POLICY", "DECIDED", "REASON"], ...plain });
    for (const a of s.autoscale)
      autoscale.push([
        a.region ?? "",
        String(a.replicas ?? 0),
        a.policy ? policyText(a.policy) : "off",
        ago(a.decidedAtUnixMs, now),
        a.reason ?? "",
      ]);
    out.push(autoscale.toString());
  }
  if (s.edgePolicies?.length) {
    // Edge policies in the order every sentinel checks them (served from the ROUTING version).
    const policies = new Table({ head: ["POLICY", "NAME", "KIND", "RULE"], ...plain });
    s.edgePolicies.forEach((p, i) =>
      policies.push([String(i), p.name ?? "", p.ip ? "ip" : p.limits ? "limits" : "?", p.summary ?? ""]),
    );
    out.push(policies.toString());
  }
  if (s.endpoints?.length || s.domains?.length) {
    // Exposure: each address and its readiness per region (gateway reports), and whether the
    // environment's Gateway serves it over HTTPS (its listeners, where the agent serves HTTPS).
    const addresses = new Table({ head: ["ADDRESS", "KIND", "REGION", "READINESS", "HTTPS", "WHY"], ...plain });
    for (const e of s.endpoints ?? []) {
      const url = e.endpoint?.url ?? "";
      const kind = `${e.endpoint?.visibility ?? ""} endpoint${e.endpoint?.auth ? " (jwt)" : ""}`;
      if (!e.regions?.length) addresses.push([url, kind, "-", "-", "-", "the environment is in no region"]);
      for (const r of e.regions ?? [])
        addresses.push([url, kind, r.region ?? "", r.readiness ?? "", httpsListener(r), r.message || "-"]);
    }
    for (const d of s.domains ?? []) {
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
      for (const r of d.regions ?? [])
        addresses.push([host, "domain", r.region ?? "", r.readiness ?? "", httpsListener(r), r.message || "-"]);
    }
    out.push(addresses.toString());
  }
  if (s.clusters?.length) {
    // BEHIND: changes desired in the region that its agent has not taken yet (ctrl's newest
    // version per kind minus the agent's cursor in its last heartbeat).
    const clusters = new Table({ head: ["CLUSTER", "REGION", "AGENT", "LAST SEEN", "BEHIND"], ...plain });
    for (const c of s.clusters)
      clusters.push([c.name ?? "", c.region ?? "", c.agentId || "-", ago(c.lastHeartbeatUnixMs, now), behind(c)]);
    out.push(clusters.toString());
  }
  if (rollout) out.push(renderRolloutStatus(rollout));
  return out.join("\n");
}

// ---------------------------------------------------------------- rollouts

function iso(unixMs: string | undefined): string {
  const ms = int64(unixMs);
  return ms === 0n ? "-" : new Date(Number(ms)).toISOString().replace(/\.\d+Z$/, "Z");
}

/** A revision's image as deployed (its tag) and, below it, the digest its pods run. */
export function imageText(image: string | undefined, digest: string | undefined): string {
  return digest ? `${image ?? ""}\n${digest}` : (image ?? "");
}

/** A revision number, "-" for none. */
function revisionText(v: string | undefined): string {
  const n = int64(v);
  return n === 0n ? "-" : String(n);
}

/** Per region: progress, each revision's desired/current/ready/available counts, conditions, recent events. */
export function renderRolloutStatus(s: RolloutStatusJson, eventsShown = 5): string {
  const out: string[] = [];
  const p = s.progressive;
  if (p) {
    out.push(`${p.strategy ?? ""} ${p.phase ?? ""}${p.reason ? `: ${p.reason}` : ""}`);
    const waves = p.waves ?? 0;
    out.push(
      `  step ${p.step ?? 0}/${p.steps ?? 0} (${p.stepName ?? ""})${waves > 1 ? `, wave ${p.wave ?? 0}/${waves}${p.atWaveGate ? " at its gate" : ""}` : ""}`,
    );
    out.push(
      `  stable ${p.stableDeploymentId || "-"}, new ${p.canaryDeploymentId || "-"}${p.aborted ? " (aborted)" : ""}`,
    );
    for (const w of p.weights ?? []) {
      const ws = (w.weights ?? []).map((x) => `${x.deploymentId ?? ""} ${x.weight ?? 0}%`).join(", ");
      out.push(
        `  weights ${w.region ?? ""}: ${ws}${w.previewDeploymentId ? ` (preview ${w.previewDeploymentId} via ${p.previewHeader ?? ""})` : ""}`,
      );
    }
    if (p.lastAnalysis)
      out.push(`  last analysis: ${p.lastAnalysis}: ${p.lastAnalysisReason ?? ""} (${iso(p.lastAnalysisUnixMs)})`);
    if (p.previousDeploymentId)
      out.push(`  previous ${p.previousDeploymentId} kept until ${iso(p.previousUntilUnixMs)} (abort = route swap)`);
  }
  if (s.pinnedDeploymentId)
    out.push(
      `pinned to revision ${revisionText(s.pinnedRevision)} (${s.pinnedDeploymentId}) by \`krane rollback\`: newer deployments take no traffic until \`krane rollback --unpin\``,
    );
  for (const r of s.regions ?? []) {
    const state = r.deadlineExceeded
      ? "FAILED: progress deadline exceeded"
      : r.complete
        ? "complete"
        : (r.message ?? "");
    out.push(
      `rollout ${r.region ?? ""}: ${state}${r.paused ? " (paused)" : ""}  replicas ${r.replicas ?? 0}, updated ${r.updatedReplicas ?? 0}, ready ${r.readyReplicas ?? 0}, available ${r.availableReplicas ?? 0}`,
    );
    const revisions = new Table({
      head: ["", "revision", "deployment", "image", "desired", "current", "ready", "available"],
      ...plain,
    });
    for (const x of r.revisions ?? []) {
      revisions.push([
        x.target ? "→" : x.warm ? "warm" : "",
        revisionText(x.revision),
        x.deploymentId ?? "",
        x.image ?? "",
        String(x.desiredReplicas ?? 0),
        String(x.currentReplicas ?? 0),
        String(x.readyReplicas ?? 0),
        String(x.availableReplicas ?? 0),
      ]);
    }
    if (r.revisions?.length) out.push(revisions.toString());
    const warm = r.warm;
    if (warm?.deploymentId)
      out.push(
        `  warm: revision ${revisionText(warm.deploymentRevision)} (${warm.deploymentId}) keeps ${warm.replicas ?? 0} pods for an instant \`krane rollback\`, ${
          int64(warm.untilUnixMs) === 0n
            ? "until this rollout ends and its window after"
            : `until ${iso(warm.untilUnixMs)}`
        }`,
      );
    for (const c of r.conditions ?? [])
      out.push(
        `  ${c.type ?? ""}=${c.status ?? ""} ${c.reason ?? ""}: ${c.message ?? ""} (since ${iso(c.lastTransitionUnixMs)})`,
      );
    for (const e of (r.events ?? []).slice(-eventsShown))
      out.push(`  ${iso(e.atUnixMs)} ${e.type ?? ""} ${e.reason ?? ""}: ${e.message ?? ""}`);
  }
  return out.join("\n") || "no regions";
}

/** `krane rollout history`: revisions per region, newest first. */
export function renderRolloutHistory(s: RolloutStatusJson): string {
  const t = new Table({ head: ["region", "revision", "deployment", "image", "created", "replicas", ""], ...plain });
  for (const r of s.regions ?? []) {
    const byRevision = [...(r.revisions ?? [])].sort((a, b) => Number(int64(b.revision) - int64(a.revision)));
    for (const x of byRevision) {
      t.push([
        r.region ?? "",
        revisionText(x.revision),
        x.deploymentId ?? "",
        x.image ?? "",
        iso(x.createdAtUnixMs),
        String(x.desiredReplicas ?? 0),
        x.target ? "current" : "",
      ]);
    }
  }
  return t.toString();
}

// ---------------------------------------------------------------- instance events

/** What an instance event says, in a few words: "OOMKilled (exit 137)", "CrashLoopBackOff, exit 3, 5 restarts". */
export function describeInstanceEvent(e: InstanceEventJson): string {
  const exit = e.exitCode === undefined ? "" : `exit ${e.exitCode}`;
  const n = e.restarts ?? 0;
  const restarts = n === 0 ? "" : `${n} restart${n === 1 ? "" : "s"}`;
  const reason = e.reason ?? "";
  const short = (m: string, max = 120) => (m.length <= max ? m : `${m.slice(0, max - 1)}…`);
  switch (e.kind) {
    case "terminated":
      return `${reason} (${[exit || "no exit code", restarts].filter(Boolean).join(", ")})`;
    case "waiting":
      if (reason === "CrashLoopBackOff") return [reason, exit, restarts].filter(Boolean).join(", ");
      if (/Image/.test(reason)) {
        // Name the registry and why it refused (a wrong or expired credential: 401, 403).
        const registry = registryOf(e.image ?? "");
        const why = pullFailureReason(e.message ?? "");
        const from = registry && why ? ` (registry ${registry}: ${why})` : "";
        return `${reason}${from}: ${e.image ?? ""}${e.message ? `: ${short(e.message)}` : ""}`;
      }
      return `${reason}${e.message ? `: ${short(e.message)}` : ""}`;
    case "unready":
      return "readiness probe failing";
    case "evicted":
      // The kubelet's eviction is "Evicted"; an eviction through the API, a preemption or a
      // taint says which in its reason.
      return `Evicted${reason !== "Evicted" && reason !== "" ? ` (${reason})` : ""}${e.message ? `: ${short(e.message)}` : ""}`;
    default:
      return reason;
  }
}

/** An event with how long ago it happened: "OOMKilled (exit 137) 2m ago". */
export function describeInstanceEventAgo(e: InstanceEventJson, now: number): string {
  return `${describeInstanceEvent(e)} ${ago(e.atUnixMs, now)}`;
}

/** The key of an instance in a status: its revision's deployment, region and pod name. */
export function instanceEventKey(deploymentId: string, region: string, instance: string): string {
  return `${deploymentId}\u0000${region}\u0000${instance}`;
}
