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
  readonly containers?: readonly { readonly usage?: { readonly cpu?: unknown } }[];
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
    if (typeof id !== "string" || id === "" || !Array.isArray(pod.containers) || pod.containers.length === 0) continue;
    let millicores = 0;
    let valid = true;
    for (const c of pod.containers) {
      const q = typeof c.usage?.cpu === "string" ? parseQuantity(c.usage.cpu) : undefined;
      if (q === undefined || q < 0) valid = false;
      else millicores += q;
    }
    if (!valid) continue;
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
