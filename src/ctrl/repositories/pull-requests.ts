// What a connected repository does with a pull request (merge request) event (pure): the event is
// read by ../previews/providers.ts's parsers, the same as a preview hook's; this decides, from the
// repository's settings, whether its head commit is built into a preview, the preview deleted, or
// nothing done (and why). A fork's pull request is built only when the repository opts in
// (`krane repo update --build-forks`): its author is not a member, and the build and the preview
// would run their code. A close (or merge) is always acted on: it only removes.
import type { RepositoryRow } from "../db/schema.js";
import { invalidArgument } from "../errors.js";
import { previewName, type Provider, type PullRequestEvent } from "../previews/providers.js";

export type PullRequestPlan =
  | { readonly action: "ignore"; readonly ignored: string }
  | { readonly action: "build" | "close"; readonly preview: string; readonly base: string };

const COMMIT = /^[0-9a-f]{40}$/;

/** Whether a delivery's event header names a pull (merge) request event. */
export function isPullRequestEvent(provider: Provider, event: string | undefined): boolean {
  return provider === "github" ? event === "pull_request" : event === "Merge Request Hook";
}

export function pullRequestPlan(
  repo: Pick<RepositoryRow, "preview_base" | "preview_forks">,
  provider: Provider,
  ev: PullRequestEvent,
): PullRequestPlan {
  if (ev.action === "ignore") return { action: "ignore", ignored: ev.ignored ?? "" };
  if (repo.preview_base === "")
    return {
      action: "ignore",
      ignored: "this repository builds no previews of pull requests (krane repo update --previews <environment>)",
    };
  const preview = previewName(provider, ev.number);
  if (ev.action === "close") return { action: "close", preview, base: repo.preview_base };
  if (ev.fork && Number(repo.preview_forks) !== 1)
    return {
      action: "ignore",
      ignored: `pull request ${ev.number} comes from a fork, and forks are not built (krane repo update --build-forks)`,
    };
  if (!COMMIT.test(ev.headSha))
    throw invalidArgument(
      provider === "github" ? "pull_request.head.sha" : "object_attributes.last_commit.id",
      "is not a 40-digit commit id",
    );
  return { action: "build", preview, base: repo.preview_base };
}
