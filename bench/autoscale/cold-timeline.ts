// Where a cold start's time goes (bench/autoscale/autoscale.ts): watches krane's Deployments, ReplicaSets,
// pods and EndpointSlices and notes when each event arrives, so a cold start can be split into the
// steps between the held request and its first byte. Watch events arrive a few milliseconds after
// the write; the API's own timestamps are whole seconds, too coarse for this.
import { LABEL_DEPLOYMENT_ID } from "../../src/contracts/labels.js";
import type { KubeClient } from "../../src/kube/client.js";
import { isRecord } from "../../src/kube/object.js";
import { resources } from "../../src/kube/resources.js";
import { sleep } from "../../src/retry/backoff.js";

export const MILESTONES = [
  "Deployment scaled up",
  "ReplicaSet scaled up",
  "pod created",
  "pod scheduled",
  "container running",
  "EndpointSlice lists it not ready",
  "pod Ready",
  "EndpointSlice lists it",
] as const;
export type Milestone = (typeof MILESTONES)[number];

interface Seen {
  readonly at: number;
  readonly deploymentId: string;
  readonly milestone: Milestone;
}

const get = (o: unknown, ...path: string[]): unknown => {
  let v = o;
  for (const p of path) v = isRecord(v) ? v[p] : undefined;
  return v;
};

/** Pure: the milestones one watched object has reached. */
export function reached(kind: "deployment" | "replicaset" | "pod" | "slice", obj: unknown): Milestone[] {
  const out: Milestone[] = [];
  if (kind === "deployment" && Number(get(obj, "spec", "replicas")) > 0) out.push("Deployment scaled up");
  if (kind === "replicaset" && Number(get(obj, "spec", "replicas")) > 0) out.push("ReplicaSet scaled up");
  if (kind === "pod") {
    if (get(obj, "metadata", "deletionTimestamp") !== undefined) return out;
    out.push("pod created");
    if (typeof get(obj, "spec", "nodeName") === "string") out.push("pod scheduled");
    const statuses = get(obj, "status", "containerStatuses");
    if (Array.isArray(statuses) && statuses.some((s) => get(s, "state", "running") !== undefined))
      out.push("container running");
    const conditions = get(obj, "status", "conditions");
    if (Array.isArray(conditions) && conditions.some((c) => get(c, "type") === "Ready" && get(c, "status") === "True"))
      out.push("pod Ready");
  }
  if (kind === "slice") {
    const eps = get(obj, "endpoints");
    if (Array.isArray(eps) && eps.some((e) => get(e, "conditions", "ready") === false))
      out.push("EndpointSlice lists it not ready");
    if (Array.isArray(eps) && eps.some((e) => get(e, "conditions", "ready") !== false))
      out.push("EndpointSlice lists it");
  }
  return out;
}

export class ColdTimeline {
  readonly #seen: Seen[] = [];
  readonly #ac = new AbortController();

  start(kube: KubeClient): void {
    const kinds = [
      ["deployment", resources.deployments],
      ["replicaset", resources.replicaSets],
      ["pod", resources.pods],
      ["slice", resources.endpointSlices],
    ] as const;
    for (const [kind, r] of kinds) {
      const loop = async (): Promise<void> => {
        while (!this.#ac.signal.aborted) {
          await kube
            .watch(
              r,
              { labelSelector: LABEL_DEPLOYMENT_ID, timeoutSeconds: 3600 },
              (type, obj) => {
                if (type !== "ADDED" && type !== "MODIFIED") return;
                const at = performance.now();
                const labels = get(obj, "metadata", "labels");
                const dep = isRecord(labels) ? labels[LABEL_DEPLOYMENT_ID] : undefined;
                if (typeof dep !== "string") return;
                for (const milestone of reached(kind, obj)) this.#seen.push({ at, deploymentId: dep, milestone });
              },
              this.#ac.signal,
            )
            .catch(() => undefined);
          // A watch that fails at once must not spin.
          await sleep(200, this.#ac.signal);
        }
      };
      void loop();
    }
  }

  stop(): void {
    this.#ac.abort();
  }

  /** Milliseconds from `since` to the first time each milestone was reached for the revision. */
  since(deploymentId: string, since: number): Map<Milestone, number> {
    const out = new Map<Milestone, number>();
    for (const s of this.#seen)
      if (s.deploymentId === deploymentId && s.at >= since && !out.has(s.milestone)) out.set(s.milestone, s.at - since);
    return out;
  }
}
