// A repository build's commit status (pure): what GitHub's and GitLab's commit status APIs are
// told of a build of a pushed commit — building (pending), deployed (success, with the
// environment's URL), built without a deploy (success), failed (failure, with the reason),
// cancelled (error: a newer push superseded it). Posted with ../previews/status.ts's
// postCommitStatus, under a context per environment so that one commit's production and staging
// builds keep a status each.
import type { CommitStatus } from "../previews/status.js";

export interface BuildForStatus {
  readonly state: string;
  readonly environment: string;
  readonly deploy: boolean;
  readonly error: string;
  /** The environment's URL, once deployed. */
  readonly url: string;
  /** The build's page or log (a status without a URL of its own links there). */
  readonly logUrl: string;
}

/** The status's context (GitHub) or name (GitLab). */
export function buildStatusContext(environment: string): string {
  return `krane/build (${environment})`;
}

export function buildCommitStatus(b: BuildForStatus): CommitStatus {
  switch (b.state) {
    case "queued":
      return { state: "pending", description: `queued for ${b.environment}`, targetUrl: b.logUrl };
    case "running":
      return { state: "pending", description: `building for ${b.environment}`, targetUrl: b.logUrl };
    case "succeeded":
      return b.deploy
        ? { state: "success", description: `deployed to ${b.environment}`, targetUrl: b.url || b.logUrl }
        : { state: "success", description: "built", targetUrl: b.logUrl };
    case "cancelled":
      return { state: "error", description: `cancelled: ${b.error || "cancelled"}`, targetUrl: b.logUrl };
    default:
      return { state: "failure", description: `failed: ${b.error || "the build failed"}`, targetUrl: b.logUrl };
  }
}
