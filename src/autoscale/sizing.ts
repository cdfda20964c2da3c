// How the rollout engine turns a region's replica count into each revision's size, as the
// autoscaler needs it (`Serving.sizeAt`). The rules are the engines' own (canaryReplicas is
// imported, not copied); this file only says which rule applies to which revision.
import { canaryReplicas } from "../rollout/progressive/engine.js";
import type { Serving } from "./recommend.js";

/** What one revision measured in the region. */
export interface RevisionLoad {
  readonly deploymentId: string;
  readonly inFlight: number;
  readonly cpuPercent: number | null;
  readonly ready: number;
}

/** Where the environment's rollout stands in the region, as far as sizes go. */
export type Shape =
  /**
   * Rolling update, Recreate, paused or settled: the sentinels balance over every ready instance of
   * every revision, and the engine scales them in proportion, so they are one pool.
   */
  | { readonly kind: "pool" }
  /** A canary at `weight` percent; the stable keeps the full count unless scaleDownStable. */
  | {
      readonly kind: "canary";
      readonly stable: string | null;
      readonly canary: string;
      readonly weight: number;
      readonly scaleDownStable: boolean;
    }
  /** Blue-green: the active revision serves, the preview gets the full count but no traffic. */
  | { readonly kind: "blue-green"; readonly active: string };

const identity = (r: number): number => r;

export function servingOf(shape: Shape, loads: readonly RevisionLoad[]): Serving[] {
  if (shape.kind === "pool") {
    if (loads.length === 0) return [];
    const ready = loads.reduce((n, l) => n + l.ready, 0);
    // One pool: the sentinels spread requests evenly over its instances, so its use is the
    // average over all of them, and unknown while any revision with ready instances is unmeasured.
    const serving = loads.filter((l) => l.ready > 0);
    const cpuPercent =
      serving.length === 0 || serving.some((l) => l.cpuPercent === null)
        ? null
        : serving.reduce((n, l) => n + (l.cpuPercent ?? 0) * l.ready, 0) / Math.max(1, ready);
    return [
      {
        deploymentId: loads.map((l) => l.deploymentId).join("+"),
        inFlight: loads.reduce((n, l) => n + l.inFlight, 0),
        cpuPercent,
        ready,
        sizeAt: identity,
      },
    ];
  }
  if (shape.kind === "blue-green")
    return loads.filter((l) => l.deploymentId === shape.active).map((l) => ({ ...l, sizeAt: identity }));
  const out: Serving[] = [];
  for (const l of loads) {
    if (l.deploymentId === shape.canary) out.push({ ...l, sizeAt: (r) => canaryReplicas(r, shape.weight) });
    else if (l.deploymentId === shape.stable)
      out.push({
        ...l,
        sizeAt: shape.scaleDownStable
          ? (r) => (shape.weight < 100 ? Math.ceil((r * (100 - shape.weight)) / 100) : 0)
          : identity,
      });
  }
  return out;
}
