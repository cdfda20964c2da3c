// A connected repository's pull request events: built into a preview of the repository's preview
// base, deleted on close, a fork's built only when the repository opts in, nothing without a base.
import assert from "node:assert/strict";
import { test } from "node:test";
import { DomainError } from "../../../src/ctrl/errors.js";
import { parseGithub, parseGitlab } from "../../../src/ctrl/previews/providers.js";
import { isPullRequestEvent, pullRequestPlan } from "../../../src/ctrl/repositories/pull-requests.js";

const SHA = "a".repeat(40);

function github(action: string, o: { fork?: boolean; sha?: string } = {}) {
  return parseGithub("pull_request", {
    action,
    number: 7,
    pull_request: {
      head: { sha: o.sha ?? SHA, ref: "feature", repo: { full_name: o.fork ? "mallory/app" : "acme/app" } },
      base: { repo: { full_name: "acme/app" } },
      updated_at: new Date().toISOString(),
    },
    sender: { login: "ada" },
  });
}

const repo = { preview_base: "staging", preview_forks: 0 };

test("opened, reopened and synchronize build the head commit into pr-<n>; closed deletes it", () => {
  for (const a of ["opened", "reopened", "synchronize"])
    assert.deepEqual(pullRequestPlan(repo, "github", github(a)), { action: "build", preview: "pr-7", base: "staging" });
  assert.deepEqual(pullRequestPlan(repo, "github", github("closed")), {
    action: "close",
    preview: "pr-7",
    base: "staging",
  });
  assert.equal(pullRequestPlan(repo, "github", github("labeled")).action, "ignore");
});

test("a repository without a preview base builds no pull request, saying how to turn it on", () => {
  const p = pullRequestPlan({ preview_base: "", preview_forks: 0 }, "github", github("opened"));
  assert.equal(p.action, "ignore");
  assert.match("ignored" in p ? p.ignored : "", /krane repo update --previews/);
});

test("a fork's pull request is not built unless the repository opts in; its close still deletes", () => {
  const p = pullRequestPlan(repo, "github", github("opened", { fork: true }));
  assert.equal(p.action, "ignore");
  assert.match("ignored" in p ? p.ignored : "", /from a fork.*--build-forks/);
  assert.equal(
    pullRequestPlan({ ...repo, preview_forks: 1 }, "github", github("opened", { fork: true })).action,
    "build",
  );
  assert.equal(pullRequestPlan(repo, "github", github("closed", { fork: true })).action, "close");
});

test("a short head sha is refused naming the field (a build fetches exactly one commit)", () => {
  assert.throws(
    () => pullRequestPlan(repo, "github", github("opened", { sha: "abcdef1" })),
    (e: unknown) => e instanceof DomainError && e.field === "pull_request.head.sha",
  );
});

test("GitLab merge requests: open, update with a new head, merge; mr-<n>", () => {
  const mr = (action: string, extra: Record<string, unknown> = {}) =>
    parseGitlab("Merge Request Hook", {
      object_kind: "merge_request",
      project: { path_with_namespace: "acme/app", id: 1 },
      user: { username: "ada" },
      object_attributes: {
        action,
        iid: 3,
        last_commit: { id: SHA },
        source_branch: "feature",
        source_project_id: 1,
        target_project_id: 1,
        ...extra,
      },
    });
  assert.deepEqual(pullRequestPlan(repo, "gitlab", mr("open")), { action: "build", preview: "mr-3", base: "staging" });
  assert.equal(pullRequestPlan(repo, "gitlab", mr("update", { oldrev: "b".repeat(40) })).action, "build");
  assert.equal(pullRequestPlan(repo, "gitlab", mr("update")).action, "ignore");
  assert.equal(pullRequestPlan(repo, "gitlab", mr("merge")).action, "close");
  assert.ok(isPullRequestEvent("gitlab", "Merge Request Hook"));
  assert.ok(isPullRequestEvent("github", "pull_request"));
  assert.ok(!isPullRequestEvent("github", "push"));
});
