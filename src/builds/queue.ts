// The build queue's rules (pure): which queued builds start when slots free up, and which older
// builds a new one supersedes. ctrl's build worker (src/ctrl/builds/worker.ts) applies them to the
// `builds` table in one transaction.
//
// Order: production environments first, then the oldest request first (ties by id, so every
// replica picks the same). A newer build of the same environment cancels the older ones still
// queued or running: only the newest source of an environment is worth building. A pull request's
// build (for its preview) is in a lane of its own beside its base environment's: a newer push to
// the same pull request cancels its older builds, and nothing else's.

export type BuildState = "queued" | "running" | "succeeded" | "failed" | "cancelled";

export const BUILD_STATES: readonly BuildState[] = ["queued", "running", "succeeded", "failed", "cancelled"];

/** A state no build leaves. */
export function isFinished(state: BuildState): boolean {
  return state === "succeeded" || state === "failed" || state === "cancelled";
}

export interface QueuedBuild {
  readonly id: string;
  readonly environmentId: string;
  /** The preview a pull request's build makes (undefined: the environment's own build). */
  readonly preview?: string;
  readonly production: boolean;
  readonly createdAt: number;
  readonly state: BuildState;
}

/** Queue order: production first, then oldest first, then by id. */
export function compareQueued(a: QueuedBuild, b: QueuedBuild): number {
  if (a.production !== b.production) return a.production ? -1 : 1;
  if (a.createdAt !== b.createdAt) return a.createdAt - b.createdAt;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/** The ids of the queued builds to start now, in start order, with `slots` builds at most running. */
export function buildsToStart(builds: readonly QueuedBuild[], slots: number): string[] {
  const running = builds.filter((b) => b.state === "running").length;
  const free = Math.max(0, slots - running);
  return builds
    .filter((b) => b.state === "queued")
    .sort(compareQueued)
    .slice(0, free)
    .map((b) => b.id);
}

/** The builds `newer` supersedes: the same environment's (and preview's), requested before it, not finished. */
export function supersededBy(builds: readonly QueuedBuild[], newer: QueuedBuild): string[] {
  return builds
    .filter(
      (b) =>
        b.id !== newer.id &&
        b.environmentId === newer.environmentId &&
        b.preview === newer.preview &&
        !isFinished(b.state) &&
        compareAge(b, newer) < 0,
    )
    .map((b) => b.id);
}

function compareAge(a: QueuedBuild, b: QueuedBuild): number {
  if (a.createdAt !== b.createdAt) return a.createdAt - b.createdAt;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/** Environments whose builds go first: by name, "production" or "prod". */
export function isProductionEnvironment(slug: string): boolean {
  return slug === "production" || slug === "prod";
}
