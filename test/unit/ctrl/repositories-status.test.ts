// A repository build's commit statuses, posted over real HTTP to a local server that answers as
// GitHub's and GitLab's commit status APIs do (test/support/git-providers.ts: it refuses a state
// outside the documented set, a bad sha, a wrong token, and GitLab's repeat of a state): building
// is pending, deployed is success with the environment's URL, failed is failure with the reason,
// cancelled is error; each under a context of its environment.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { buildCommitStatus, buildStatusContext, type BuildForStatus } from "../../../src/ctrl/repositories/status.js";
import { postCommitStatus } from "../../../src/ctrl/previews/status.js";
import { startFakeProviders, type FakeProviders } from "../../support/git-providers.js";

const SHA = "0123456789abcdef0123456789abcdef01234567";
const base: BuildForStatus = {
  state: "queued",
  environment: "production",
  deploy: true,
  error: "",
  url: "",
  logUrl: "https://krane.example.com/builds/bld_1",
};

describe("commit statuses of a repository build", () => {
  let providers: FakeProviders;
  before(async () => {
    providers = await startFakeProviders({
      githubToken: "gh-token",
      gitlabToken: "gl-token",
      githubRepos: ["acme/app"],
      gitlabProjects: ["group/app"],
    });
  });
  after(() => providers?.close());

  it("GitHub: building, then deployed with the URL; a failed one with its reason; a cancelled one", async () => {
    const post = (b: Partial<BuildForStatus>, sha = SHA) =>
      postCommitStatus(
        {
          provider: "github",
          apiUrl: providers.githubUrl,
          token: "gh-token",
          repository: "acme/app",
          sha,
          context: buildStatusContext(b.environment ?? base.environment),
        },
        buildCommitStatus({ ...base, ...b }),
      );
    await post({ state: "running" });
    await post({ state: "succeeded", url: "https://shop-production.example.com" });
    const other = SHA.replace(/^0/, "f");
    await post({ state: "failed", error: "step [2/3] RUN npm run build failed", environment: "staging" }, other);
    await post({ state: "cancelled", error: "superseded by build bld_2" }, other);
    const got = providers.statuses.filter((s) => s.provider === "github");
    assert.deepEqual(
      got.map((s) => [s.sha, s.state, s.context, s.targetUrl, s.description]),
      [
        [SHA, "pending", "krane/build (production)", base.logUrl, "building for production"],
        [SHA, "success", "krane/build (production)", "https://shop-production.example.com", "deployed to production"],
        [other, "failure", "krane/build (staging)", base.logUrl, "failed: step [2/3] RUN npm run build failed"],
        [other, "error", "krane/build (production)", base.logUrl, "cancelled: superseded by build bld_2"],
      ],
    );
    // A wrong token is the provider's 401, as an error naming it.
    await assert.rejects(
      postCommitStatus(
        { provider: "github", apiUrl: providers.githubUrl, token: "nope", repository: "acme/app", sha: SHA },
        buildCommitStatus(base),
      ),
      /github commit status API answered 401/,
    );
  });

  it("GitLab: running, then success with the URL, under the environment's name", async () => {
    const post = (b: Partial<BuildForStatus>) =>
      postCommitStatus(
        {
          provider: "gitlab",
          apiUrl: providers.gitlabUrl,
          token: "gl-token",
          repository: "group/app",
          sha: SHA,
          context: buildStatusContext("production"),
        },
        buildCommitStatus({ ...base, ...b }),
      );
    await post({ state: "running" });
    await post({ state: "succeeded", url: "https://shop-production.example.com" });
    const got = providers.statuses.filter((s) => s.provider === "gitlab");
    assert.deepEqual(
      got.map((s) => [s.state, s.context, s.targetUrl]),
      [
        ["running", "krane/build (production)", base.logUrl],
        ["success", "krane/build (production)", "https://shop-production.example.com"],
      ],
    );
  });
});
