// CPU use per revision, from the resource metrics API's pod figures (PodMetrics, what
// metrics-server serves), as the autoscaler takes it: each revision's own pods' use added up,
// then its average per pod over the CPU each instance requests. Pure. A revision is judged on its
// own pods only, never on an average across canary and stable.
import { LABEL_DEPLOYMENT_ID } from "../contracts/labels.js";
import { parseQuantity } from "../kube/quantity.js";

/** What one revision's pods used, as last measured. */
export interface RevisionCpu {
  /** Their CPU use added up (millicores). */
  readonly millicores: number;
  /** How many pods the figure covers. */
  readonly pods: number;
}

interface PodMetricsLike {
  readonly metadata?: { readonly labels?: Readonly<Record<string, string>> };
  readonly containers?: unknown;
}

/**
 * A PodMetrics item's use of one resource, its containers added up, in thousandths of the base
 * unit (millicores; memory in bytes × 1000), as parseQuantity gives it; undefined when the pod
 * lists no container or a figure is not a quantity (never counted as idle).
 */
export function podUsage(containers: unknown, resource: "cpu" | "memory"): number | undefined {
  if (!Array.isArray(containers) || containers.length === 0) return undefined;
  let sum = 0;
  for (const c of containers as { usage?: Record<string, unknown> }[]) {
    const raw = c.usage?.[resource];
    const q = typeof raw === "string" ? parseQuantity(raw) : undefined;
    if (q === undefined || q < 0) return undefined;
    sum += q;
  }
  return sum;
}

/**
 * Each revision's use from PodMetrics items (a list's `items`). A pod without the deployment
 * label, or with a figure that is not a quantity, is left out (never counted as idle).
 */
export function cpuByRevision(items: readonly unknown[]): Map<string, RevisionCpu> {
  const out = new Map<string, { millicores: number; pods: number }>();
  for (const raw of items) {
    const pod = raw as PodMetricsLike;
    const id = pod.metadata?.labels?.[LABEL_DEPLOYMENT_ID];
    const millicores = podUsage(pod.containers, "cpu");
    if (typeof id !== "string" || id === "" || millicores === undefined) continue;
    const prev = out.get(id) ?? { millicores: 0, pods: 0 };
    out.set(id, { millicores: prev.millicores + millicores, pods: prev.pods + 1 });
  }
  return out;
}

/**
 * A revision's utilisation in percent of what each instance requests: its pods' average use over
 * the request. null when it cannot be judged (no figure, no pod, or no CPU request).
 */
export function cpuPercent(use: RevisionCpu | undefined, requestMillicores: number): number | null {
  if (use === undefined || use.pods === 0 || !(requestMillicores > 0)) return null;
  return (use.millicores / use.pods / requestMillicores) * 100;
}
