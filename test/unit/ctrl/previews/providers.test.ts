// Pull-request webhooks' pure parts: GitHub's and GitLab's signatures (any change to the body, the
// id or the time breaks them; the comparison takes the header as sent), what each event means for
// a preview (forks, ignored actions, GitLab's updates without new commits; a malformed event is
// invalid_argument naming the field), and image templates.
import assert from "node:assert/strict";
import { createHmac, randomBytes } from "node:crypto";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  githubSignature,
  gitlabSignature,
  imageFor,
  parseGithub,
  parseGitlab,
  previewName,
  verifyGithub,
  verifyGitlab,
} from "../../../../src/ctrl/previews/providers.js";
import { DomainError } from "../../../../src/ctrl/errors.js";
import { githubDelivery, gitlabDelivery } from "../../../support/git-providers.js";

const SHA = "0123456789abcdef0123456789abcdef01234567";

describe("GitHub", () => {
  it("accepts the signature of the exact body and refuses any other", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 16 }), fc.uint8Array({ minLength: 1 }), fc.nat(), (secret, body, flip) => {
        const b = Buffer.from(body);
        const h = { "x-hub-signature-256": githubSignature(secret, b), "x-github-delivery": "d-1" };
        assert.deepEqual(verifyGithub(secret, h, b), { ok: true, deliveryId: "d-1", method: "hmac-sha256" });
        const changed = Buffer.from(b);
        const at = flip % changed.length;
        changed[at] = (changed[at] ?? 0) ^ 1;
        assert.equal(verifyGithub(secret, h, changed).ok, false);
        assert.equal(verifyGithub(`${secret}x`, h, b).ok, false);
      }),
    );
    assert.match(JSON.stringify(verifyGithub("s".repeat(16), {}, Buffer.from("x"))), /not signed/);
  });

  it("reads a delivery the way GitHub sends it (the test support's, checked against GitHub's documented form)", () => {
    const d = githubDelivery("s".repeat(20), { action: "opened", number: 3, sha: SHA, repository: "acme/shop" });
    const want = `sha256=${createHmac("sha256", "s".repeat(20)).update(d.body).digest("hex")}`;
    assert.equal(d.headers["x-hub-signature-256"], want);
    const ev = parseGithub("pull_request", JSON.parse(d.body));
    assert.deepEqual(
      { action: ev.action, number: ev.number, sha: ev.headSha, fork: ev.fork, repo: ev.repository, who: ev.sender },
      { action: "open", number: 3, sha: SHA, fork: false, repo: ["acme/shop"], who: "octocat" },
    );
    assert.equal(
      parseGithub(
        "pull_request",
        JSON.parse(
          githubDelivery("x".repeat(16), {
            action: "synchronize",
            number: 3,
            sha: SHA,
            repository: "acme/shop",
            fork: true,
          }).body,
        ),
      ).fork,
      true,
    );
    assert.equal(parseGithub("push", {}).action, "ignore");
    assert.equal(parseGithub("pull_request", { ...JSON.parse(d.body), action: "labeled" }).action, "ignore");
    assert.equal(parseGithub("pull_request", { ...JSON.parse(d.body), action: "closed" }).action, "close");
  });

  it("a malformed pull_request event is invalid_argument naming the field; other events are ignored", () => {
    const ev = JSON.parse(
      githubDelivery("s".repeat(20), { action: "opened", number: 3, sha: SHA, repository: "acme/shop" }).body,
    ) as Record<string, unknown> & { pull_request: Record<string, unknown> };
    const { pull_request: pr, ...noPr } = ev;
    for (const [body, field] of [
      [noPr, "pull_request"],
      [{ ...ev, pull_request: "x" }, "pull_request"],
      [{ ...ev, action: "" }, "action"],
      [{ ...ev, number: 0, pull_request: { ...pr, number: 0 } }, "number"],
      [{ ...ev, pull_request: { ...pr, head: { sha: "not a sha" } } }, "pull_request.head.sha"],
      [null, "body"],
      [[], "body"],
    ] as const)
      assert.throws(
        () => parseGithub("pull_request", body),
        (e) => e instanceof DomainError && e.code === "invalid_argument" && e.field === field,
        field,
      );
    assert.equal(parseGithub("push", null).action, "ignore");
    assert.equal(parseGithub("ping", {}).ignored, "ping");
  });
});

describe("GitLab", () => {
  const signing = `whsec_${randomBytes(32).toString("base64")}`;

  it("a signing token signs the id, the time and the body", () => {
    const d = gitlabDelivery(signing, { action: "open", iid: 4, sha: SHA, project: "acme/shop", projectId: 9 });
    const body = Buffer.from(d.body);
    const ok = verifyGitlab(signing, d.headers, body);
    assert.equal(ok.ok, true);
    assert.equal(ok.ok && ok.method, "signing-token");
    assert.equal(ok.ok && typeof ok.signedAt, "number");
    for (const [k, v] of [
      ["webhook-id", "another"],
      ["webhook-timestamp", "1"],
    ] as const)
      assert.equal(verifyGitlab(signing, { ...d.headers, [k]: v }, body).ok, false, `${k} changed`);
    assert.equal(verifyGitlab(signing, d.headers, Buffer.from(`${d.body} `)).ok, false, "body changed");
    // Several signatures (a rotation): one matching is enough.
    const several = { ...d.headers, "webhook-signature": `v1,AAAA ${d.headers["webhook-signature"]}` };
    assert.equal(verifyGitlab(signing, several, body).ok, true);
    const key = Buffer.from(signing.slice(6), "base64");
    assert.equal(
      d.headers["webhook-signature"],
      gitlabSignature(key, d.headers["webhook-id"] ?? "", d.headers["webhook-timestamp"] ?? "", body),
    );
    // The token form's header does not pass a hook that expects signatures.
    assert.equal(verifyGitlab(signing, { "x-gitlab-token": signing, "x-gitlab-event-uuid": "u" }, body).ok, false);
  });

  it("a secret token is compared as sent", () => {
    const token = "token-0123456789abcdef";
    const d = gitlabDelivery(token, { action: "open", iid: 4, sha: SHA, project: "acme/shop", projectId: 9 });
    assert.equal(verifyGitlab(token, d.headers, Buffer.from(d.body)).ok, true);
    assert.equal(verifyGitlab(`${token}x`, d.headers, Buffer.from(d.body)).ok, false);
  });

  it("reads merge request events: forks, merges, updates with and without new commits", () => {
    const ev = (action: "open" | "update" | "close" | "merge", fork = false) =>
      parseGitlab(
        "Merge Request Hook",
        JSON.parse(
          gitlabDelivery("t".repeat(16), { action, iid: 4, sha: SHA, project: "acme/shop", projectId: 9, fork }).body,
        ),
      );
    assert.equal(ev("open").action, "open");
    assert.deepEqual(ev("open").repository, ["acme/shop", "9"]);
    assert.equal(ev("update").action, "update");
    assert.equal(ev("merge").action, "close");
    assert.equal(ev("open", true).fork, true);
    const noCommits = JSON.parse(
      gitlabDelivery("t".repeat(16), { action: "update", iid: 4, sha: SHA, project: "acme/shop", projectId: 9 }).body,
    ) as {
      object_attributes: Record<string, unknown>;
    };
    delete noCommits.object_attributes.oldrev;
    assert.equal(parseGitlab("Merge Request Hook", noCommits).action, "ignore");
    assert.equal(typeof ev("open").updatedAt, "number", 'GitLab\'s "… UTC" time is read');
  });

  it("a malformed merge request event is invalid_argument naming the field; other events are ignored", () => {
    const b = JSON.parse(
      gitlabDelivery("t".repeat(16), { action: "open", iid: 4, sha: SHA, project: "acme/shop", projectId: 9 }).body,
    ) as Record<string, unknown> & { object_attributes: Record<string, unknown> };
    const a = b.object_attributes;
    for (const [body, field] of [
      [{ ...b, object_kind: "push" }, "object_kind"],
      [{ ...b, object_attributes: undefined }, "object_attributes"],
      [{ ...b, object_attributes: { ...a, action: undefined } }, "object_attributes.action"],
      [{ ...b, object_attributes: { ...a, iid: -1 } }, "object_attributes.iid"],
      [{ ...b, object_attributes: { ...a, last_commit: {} } }, "object_attributes.last_commit.id"],
      ["text", "body"],
    ] as const)
      assert.throws(
        () => parseGitlab("Merge Request Hook", body),
        (e) => e instanceof DomainError && e.code === "invalid_argument" && e.field === field,
        field,
      );
    assert.equal(parseGitlab("Push Hook", { object_kind: "push" }).action, "ignore");
  });
});

describe("images and names", () => {
  it("fills the template and keeps a branch to a tag's characters", () => {
    assert.equal(
      imageFor("r.io/shop:{short_sha}-{pr}", { headSha: SHA, number: 12, headRef: "x" }),
      "r.io/shop:0123456-12",
    );
    assert.equal(
      imageFor("r.io/shop:{branch}", { headSha: SHA, number: 1, headRef: "feat/ünïcode branch" }),
      "r.io/shop:feat--n-code-branch",
    );
    assert.equal(previewName("github", 12), "pr-12");
    assert.equal(previewName("gitlab", 12), "mr-12");
  });
});
