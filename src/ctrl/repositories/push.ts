// Push events of GitHub and GitLab, for a repository's builds (pure; signatures are checked by
// ../previews/providers.ts's verifyGithub / verifyGitlab, the same as the preview hooks'): which
// branch got which commit, or why the event builds nothing (another event, a tag, a deleted
// branch). The branch → environment map is ../validate/repository.ts's.
import { invalidArgument } from "../errors.js";
import { isObject, obj, str, time } from "../previews/providers.js";

export interface PushEvent {
  readonly action: "build" | "ignore";
  /** Why nothing is built. */
  readonly ignored?: string;
  readonly branch: string;
  /** The branch's new head (40 hex digits). */
  readonly commit: string;
  /** The repository pushed to (GitHub "owner/name"; GitLab path and id). */
  readonly repository: readonly string[];
  /** The provider's time of the push (unix ms), when the signed body says. */
  readonly pushedAt?: number;
  /** Who pushed (a login), for the audit log. */
  readonly sender: string;
}

const COMMIT = /^[0-9a-f]{40}$/;
const DELETED = "0".repeat(40);

const ignore = (why: string): PushEvent => ({
  action: "ignore",
  ignored: why,
  branch: "",
  commit: "",
  repository: [],
  sender: "",
});

/** The branch a ref names, or why it names none. */
function branchOf(ref: string, after: string, field: string): { branch: string } | { ignored: string } {
  if (ref === "") throw invalidArgument("ref", "is missing");
  if (!ref.startsWith("refs/heads/")) return { ignored: `ref "${ref}" is not a branch` };
  if (after === DELETED) return { ignored: `branch "${ref.slice(11)}" was deleted` };
  if (!COMMIT.test(after)) throw invalidArgument(field, "is not a 40-digit commit id");
  return { branch: ref.slice(11) };
}

/** A GitHub delivery (X-GitHub-Event `event`): the push it reports, or why it builds nothing. */
export function parseGithubPush(event: string | undefined, body: unknown): PushEvent {
  if (event === "ping") return ignore("ping");
  if (event !== "push") return ignore(`event "${event ?? ""}" is not a push event`);
  if (!isObject(body)) throw invalidArgument("body", "is not a JSON object");
  const after = str(body.after);
  if (body.deleted === true) return ignore(`branch "${str(body.ref).replace(/^refs\/heads\//, "")}" was deleted`);
  const b = branchOf(str(body.ref), after, "after");
  if ("ignored" in b) return ignore(b.ignored);
  const repo = obj(body.repository);
  // pushed_at: unix seconds in push events (an ISO time in others).
  const pushedAt = typeof repo.pushed_at === "number" ? repo.pushed_at * 1000 : time(repo.pushed_at);
  return {
    action: "build",
    branch: b.branch,
    commit: after,
    repository: [str(repo.full_name)].filter((x) => x !== ""),
    ...(pushedAt !== undefined ? { pushedAt } : {}),
    sender: str(obj(body.sender).login) || str(obj(body.pusher).name),
  };
}

/** A GitLab delivery (X-Gitlab-Event `event`), as parseGithubPush does for GitHub's. */
export function parseGitlabPush(event: string | undefined, body: unknown): PushEvent {
  if (event !== "Push Hook") return ignore(`event "${event ?? ""}" is not a push event`);
  if (!isObject(body)) throw invalidArgument("body", "is not a JSON object");
  if (body.object_kind !== "push")
    throw invalidArgument("object_kind", `is "${str(body.object_kind)}", not "push" as the event header says`);
  const after = str(body.after);
  const b = branchOf(str(body.ref), after, "after");
  if ("ignored" in b) return ignore(b.ignored);
  const project = obj(body.project);
  return {
    action: "build",
    branch: b.branch,
    commit: after,
    repository: [str(project.path_with_namespace), str(body.project_id || project.id)].filter((x) => x !== ""),
    sender: str(body.user_username),
  };
}

/**
 * The time a push delivery's age is measured from: the signed timestamp (GitLab's signing token),
 * else the push's time in the signed body (GitHub), else — GitLab's plain secret token, whose
 * push body holds no time of the push — its receipt. That token signs nothing: whoever holds it
 * can send any delivery, so a time in the body could not be trusted either; what refuses a replay
 * of such a delivery is its X-Gitlab-Event-UUID, recorded with what it did and kept twice the
 * replay window. Undefined: nothing to date it by (refused).
 */
export function pushDeliveryTime(
  verdict: { readonly method: string; readonly signedAt?: number },
  ev: Pick<PushEvent, "pushedAt">,
  receivedAt: number,
): number | undefined {
  return verdict.signedAt ?? ev.pushedAt ?? (verdict.method === "secret-token" ? receivedAt : undefined);
}
