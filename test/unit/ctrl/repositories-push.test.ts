// Push events of GitHub and GitLab as a repository's builds read them, and the branch →
// environment map: a branch's new commit builds; tags, deleted branches and other events build
// nothing, saying why; a malformed push is refused naming its field.
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseGithubPush, parseGitlabPush, pushDeliveryTime } from "../../../src/ctrl/repositories/push.js";
import { verifyGitlab } from "../../../src/ctrl/previews/providers.js";
import { checkFresh } from "../../../src/ctrl/previews/webhooks.js";
import { parseBranchMap } from "../../../src/ctrl/validate/repository.js";
import { DomainError } from "../../../src/ctrl/errors.js";

const SHA = "0123456789abcdef0123456789abcdef01234567";

function refusedAt(field: string, f: () => unknown): void {
  assert.throws(
    f,
    (err: unknown) => err instanceof DomainError && err.code === "invalid_argument" && err.field === field,
  );
}

test("a GitHub push: the branch, its new head, the repository, the push's time and who pushed", () => {
  const ev = parseGithubPush("push", {
    ref: "refs/heads/feature/x",
    after: SHA,
    deleted: false,
    repository: { full_name: "acme/app", pushed_at: 1_700_000_000 },
    sender: { login: "ada" },
  });
  assert.deepEqual(ev, {
    action: "build",
    branch: "feature/x",
    commit: SHA,
    repository: ["acme/app"],
    pushedAt: 1_700_000_000_000,
    sender: "ada",
  });
  assert.equal(parseGithubPush("ping", {}).action, "ignore");
  assert.match(parseGithubPush("pull_request", {}).ignored ?? "", /not a push event/);
  assert.match(parseGithubPush("push", { ref: "refs/tags/v1", after: SHA }).ignored ?? "", /not a branch/);
  assert.match(
    parseGithubPush("push", { ref: "refs/heads/main", after: "0".repeat(40), deleted: true }).ignored ?? "",
    /branch "main" was deleted/,
  );
  refusedAt("after", () => parseGithubPush("push", { ref: "refs/heads/main", after: "abc" }));
  refusedAt("ref", () => parseGithubPush("push", { after: SHA }));
  refusedAt("body", () => parseGithubPush("push", [1]));
});

test("a GitLab push: path and id of the project; a deleted branch builds nothing", () => {
  const ev = parseGitlabPush("Push Hook", {
    object_kind: "push",
    ref: "refs/heads/main",
    after: SHA,
    project_id: 42,
    project: { id: 42, path_with_namespace: "group/app" },
    user_username: "ada",
  });
  assert.deepEqual(ev, {
    action: "build",
    branch: "main",
    commit: SHA,
    repository: ["group/app", "42"],
    sender: "ada",
  });
  assert.match(
    parseGitlabPush("Push Hook", { object_kind: "push", ref: "refs/heads/main", after: "0".repeat(40) }).ignored ?? "",
    /was deleted/,
  );
  assert.equal(parseGitlabPush("Tag Push Hook", {}).action, "ignore");
  refusedAt("object_kind", () => parseGitlabPush("Push Hook", { object_kind: "tag_push" }));
});

test("the branch map: branch=environment, each branch once, names git and krane allow", () => {
  assert.deepEqual(parseBranchMap("branches", ["main=production", "release/1.x=staging"]), {
    main: "production",
    "release/1.x": "staging",
  });
  refusedAt("branches[0]", () => parseBranchMap("branches", ["main"]));
  refusedAt("branches[1]", () => parseBranchMap("branches", ["main=production", "main=staging"]));
  refusedAt("branches[0]", () => parseBranchMap("branches", ["bad..name=production"]));
  refusedAt("branches[0]", () => parseBranchMap("branches", ["a b=production"]));
  refusedAt("branches[0]", () => parseBranchMap("branches", ["main=Not A Slug"]));
});

test("a GitLab push sent with the plain secret token is dated by its receipt; a signed one by its timestamp", () => {
  const body = Buffer.from(
    JSON.stringify({
      object_kind: "push",
      ref: "refs/heads/main",
      after: SHA,
      project: { path_with_namespace: "acme/app", id: 1 },
      user_username: "ada",
    }),
  );
  const ev = parseGitlabPush("Push Hook", JSON.parse(body.toString()));
  const verdict = verifyGitlab(
    "plain-secret-token-123456",
    { "x-gitlab-token": "plain-secret-token-123456", "x-gitlab-event-uuid": "u-1" },
    body,
  );
  assert.ok(verdict.ok);
  const now = 1_700_000_000_000;
  // The body holds no time: the push is accepted (its event UUID is what refuses a replay).
  assert.equal(pushDeliveryTime(verdict, ev, now), now);
  checkFresh(pushDeliveryTime(verdict, ev, now), now, 600_000);
  // A signed timestamp, or the body's push time, still rules when there is one.
  assert.equal(pushDeliveryTime({ method: "signing-token", signedAt: now - 5_000 }, ev, now), now - 5_000);
  assert.equal(pushDeliveryTime({ method: "hmac-sha256" }, { pushedAt: now - 7_000 }, now), now - 7_000);
  // A GitHub delivery with no time in its body is still refused for it.
  assert.equal(pushDeliveryTime({ method: "hmac-sha256" }, {}, now), undefined);
  assert.throws(() => checkFresh(pushDeliveryTime({ method: "hmac-sha256" }, {}, now), now, 600_000), /holds no time/);
});
