// Startup CPU boost (issue 49): a starting instance of a revision gets a higher CPU limit until it
// is Ready, then its own back, both through the pods/resize subresource (in-place pod resize,
// GA in Kubernetes 1.35). Under gVisor the sandbox (sentry, gofer) starts inside the pod's CPU
// cgroup, so at 100m its own start is throttled before the app's begins: docs/scaling.md "Below
// Kubernetes". Only the limit moves: requests, and so scheduling, the QoS class and the
// workspace quota's requests, stay the revision's; a quota that cannot take the higher limit
// refuses the resize, and the pod starts at its own. The fence (deploy/rbac/fence.yaml) lets the
// agent resize only the CPU limits of krane's pods in workspace namespaces.
import { Counter, type Registry } from "prom-client";
import type { KubeClient } from "../../kube/client.js";
import type { KubeObject } from "../../kube/object.js";
import { parseQuantity } from "../../kube/quantity.js";
import { resources } from "../../kube/resources.js";
import { CONTAINER_NAME } from "./render.js";

/** A pod not Ready this long after it was boosted gets its own limit back (a crash loop keeps no boost). */
export const BOOST_WINDOW_MS = 120_000;
/** The default boosted limit (millicores): a whole core while the sandbox and the app start. */
export const DEFAULT_BOOST_MILLICORES = 1_000;

export interface BoostSettings {
  /** The CPU limit a starting pod gets (millicores); 0 turns the boost off. */
  readonly millicores: number;
  readonly windowMs?: number;
  /** Where krane_agent_startup_cpu_boosts_total is registered. */
  readonly registry?: Registry;
}

/** What the boost wants done to one pod now. */
export type BoostStep = { readonly action: "up" | "down"; readonly cpu: string } | undefined;

interface PodView {
  readonly ready: boolean;
  readonly gone: boolean;
  readonly restarted: boolean;
  /** The app container's index and CPU limit (millicores), if it has one. */
  readonly index: number;
  readonly cpu: number | undefined;
}

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

function list(x: unknown): unknown[] {
  return Array.isArray(x) ? x : [];
}

function view(pod: KubeObject): PodView {
  const spec = isRecord(pod.spec) ? pod.spec : {};
  const status = isRecord(pod.status) ? pod.status : {};
  const containers = list(spec.containers);
  const index = containers.findIndex((c) => isRecord(c) && c.name === CONTAINER_NAME);
  const c = containers[index];
  const limits = isRecord(c) && isRecord(c.resources) && isRecord(c.resources.limits) ? c.resources.limits : {};
  const cpu = typeof limits.cpu === "string" ? parseQuantity(limits.cpu) : undefined;
  return {
    ready: list(status.conditions).some((x) => isRecord(x) && x.type === "Ready" && x.status === "True"),
    gone: pod.metadata.deletionTimestamp !== undefined || status.phase === "Succeeded" || status.phase === "Failed",
    restarted: list(status.containerStatuses).some((x) => isRecord(x) && Number(x.restartCount ?? 0) > 0),
    index,
    cpu,
  };
}

/**
 * The step for one pod of a revision whose CPU limit is `ownMillicores`. `boostedAtMs`: when
 * this agent boosted it (undefined: not by this process, or never). Up: a pod at its own limit
 * that is not Ready, has never restarted and was not boosted before. Down: a pod above its own
 * limit once it is Ready, or once the window has passed since the boost.
 */
export function boostStep(
  pod: KubeObject,
  ownMillicores: number,
  s: BoostSettings,
  nowMs: number,
  boostedAtMs: number | undefined,
): BoostStep {
  const v = view(pod);
  if (v.gone || v.cpu === undefined || v.index < 0) return undefined;
  if (v.cpu > ownMillicores) {
    const expired = boostedAtMs === undefined || nowMs - boostedAtMs >= (s.windowMs ?? BOOST_WINDOW_MS);
    return v.ready || expired ? { action: "down", cpu: `${ownMillicores}m` } : undefined;
  }
  if (s.millicores <= ownMillicores || v.cpu !== ownMillicores) return undefined;
  if (v.ready || v.restarted || boostedAtMs !== undefined) return undefined;
  return { action: "up", cpu: `${s.millicores}m` };
}

/** What of a pod the boost reads: a change of it is a reason to look at the pod's revision again. */
export function boostKey(pod: KubeObject | undefined): string {
  if (pod === undefined) return "";
  const v = view(pod);
  return `${v.ready}|${v.gone}|${v.restarted}|${v.cpu}`;
}

/** The JSON patch of the app container's CPU limit (the index checked by name first). */
export function resizePatch(index: number, cpu: string): unknown[] {
  return [
    { op: "test", path: `/spec/containers/${index}/name`, value: CONTAINER_NAME },
    { op: "replace", path: `/spec/containers/${index}/resources/limits/cpu`, value: cpu },
  ];
}

/** The boosts this process made (per revision: pod "namespace/name" → when), and the resizes they need. */
export class StartupBoost {
  readonly #boosted = new Map<string, Map<string, number>>();
  readonly #steps: Counter<"step">;

  constructor(
    readonly settings: BoostSettings,
    private readonly now: () => number = Date.now,
  ) {
    this.#steps = new Counter({
      name: "krane_agent_startup_cpu_boosts_total",
      help: "Startup CPU boost resizes of starting pods: up (boosted), down (back to the revision's limit), refused (the API server said no).",
      labelNames: ["step"],
      registers: settings.registry ? [settings.registry] : [],
    });
  }

  /**
   * Resizes the pods of revision `key` as boostStep says. A refused resize (a quota without room,
   * a pod gone) goes to `onError` and is not retried for that pod: it starts at its own limit.
   * Answers how long until a boosted pod's window ends (undefined: none is boosted).
   */
  async apply(
    kube: KubeClient,
    key: string,
    pods: readonly KubeObject[],
    ownMillicores: number,
    signal: AbortSignal,
    onError: (pod: string, err: unknown) => void,
  ): Promise<number | undefined> {
    const window = this.settings.windowMs ?? BOOST_WINDOW_MS;
    const boosted = this.#boosted.get(key) ?? new Map<string, number>();
    const live = new Set<string>();
    let next: number | undefined;
    for (const pod of pods) {
      const id = `${pod.metadata.namespace ?? ""}/${pod.metadata.name ?? ""}`;
      live.add(id);
      const now = this.now();
      const at = boosted.get(id);
      const step = boostStep(pod, ownMillicores, this.settings, now, at);
      if (step === undefined) {
        if (at !== undefined && (view(pod).cpu ?? 0) > ownMillicores)
          next = Math.min(next ?? Infinity, at + window - now);
        continue;
      }
      // Marked before the write: a refused boost is not tried again.
      if (step.action === "up") boosted.set(id, now);
      try {
        await kube.patchSubresource(
          resources.pods,
          pod.metadata.namespace ?? "",
          pod.metadata.name ?? "",
          "resize",
          resizePatch(view(pod).index, step.cpu),
          signal,
        );
        this.#steps.inc({ step: step.action });
        if (step.action === "up") next = Math.min(next ?? Infinity, window);
      } catch (err) {
        this.#steps.inc({ step: "refused" });
        onError(id, err);
      }
    }
    for (const id of boosted.keys()) if (!live.has(id)) boosted.delete(id);
    if (boosted.size > 0) this.#boosted.set(key, boosted);
    else this.#boosted.delete(key);
    return next;
  }

  /** Forgets a revision (its key was deleted). */
  forget(key: string): void {
    this.#boosted.delete(key);
  }
}
