// RepositoryService's validation: the URL (https or ssh, no credentials in it), which credential
// goes with which transport, the webhook secret, the branch map and how pull requests build; a
// credential never appears in an error.
import assert from "node:assert/strict";
import { test } from "node:test";
import { DomainError } from "../../../../src/ctrl/errors.js";
import { repositoryPath, validateConnectRepository } from "../../../../src/ctrl/validate/repository.js";

const KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n";
const base = {
  workspace: "acme",
  project: "web",
  provider: "github",
  url: "https://git.example.com/acme/web.git",
  token: "",
  tokenUsername: "",
  deployKey: "",
  webhookSecret: "s".repeat(32),
  branches: ["main=production"],
  statusApiUrl: "",
  statusToken: "",
  previews: "",
  buildForks: false,
};

function refused(field: string, req: Partial<typeof base>, secret?: string): void {
  assert.throws(
    () => validateConnectRepository({ ...base, ...req }),
    (err: unknown) => {
      assert.ok(err instanceof DomainError, String(err));
      assert.equal(err.code, "invalid_argument");
      assert.equal(err.field, field, err.message);
      if (secret !== undefined) assert.ok(!err.message.includes(secret), "the credential is not echoed");
      return true;
    },
  );
}

test("a repository's path is what push events name it by, from either URL form", () => {
  assert.equal(repositoryPath("https://github.com/acme/web.git"), "acme/web");
  assert.equal(repositoryPath("https://gitlab.example.com:8443/group/sub/web"), "group/sub/web");
  assert.equal(repositoryPath("git@github.com:acme/web.git"), "acme/web");
  assert.equal(repositoryPath("ssh://git@github.com:2222/acme/web.git"), "acme/web");
});

test("an https URL takes a token (or none, public); an ssh URL a deploy key", () => {
  const pub = validateConnectRepository(base);
  assert.deepEqual(pub.credential, { kind: "none" });
  assert.equal(pub.transport, "https");
  assert.equal(pub.path, "acme/web");
  assert.deepEqual(pub.branches, { main: "production" });
  const tok = validateConnectRepository({ ...base, token: "ghp_abcdef0123456789" });
  assert.deepEqual(tok.credential, { kind: "token", token: "ghp_abcdef0123456789", username: "x-access-token" });
  const ssh = validateConnectRepository({ ...base, url: "git@github.com:acme/web.git", deployKey: KEY });
  assert.equal(ssh.transport, "ssh");
  assert.deepEqual(ssh.credential, { kind: "deploy_key", privateKey: KEY });
});

test("bad input is refused naming its field, never echoing a credential", () => {
  refused("url", { url: "https://ghp_secret123@github.com/acme/web.git" }, "ghp_secret123");
  refused("url", { url: "ftp://example.com/acme/web.git" });
  refused("url", { url: "" });
  refused("provider", { provider: "bitbucket" });
  refused("deploy_key", { deployKey: KEY });
  refused("token", { url: "git@github.com:acme/web.git", token: "ghp_secret456" }, "ghp_secret456");
  refused("deploy_key", { url: "git@github.com:acme/web.git" });
  refused("deploy_key", { url: "git@github.com:acme/web.git", deployKey: "not a key at all" }, "not a key at all");
  refused("token", { token: "has a space" }, "has a space");
  refused("webhook_secret", { webhookSecret: "short" }, "short");
  refused("branches", { branches: [] });
  refused("branches[0]", { branches: ["main"] });
  refused("branches[1]", { branches: ["main=production", "main=staging"] });
  refused("status_api_url", { statusApiUrl: "http://api.example.com" });
});

test("pull requests build previews of a named environment; forks only with one, and only when asked", () => {
  assert.deepEqual(validateConnectRepository(base).pullRequests, { previews: "", buildForks: false });
  assert.deepEqual(validateConnectRepository({ ...base, previews: "staging" }).pullRequests, {
    previews: "staging",
    buildForks: false,
  });
  assert.deepEqual(validateConnectRepository({ ...base, previews: "staging", buildForks: true }).pullRequests, {
    previews: "staging",
    buildForks: true,
  });
  refused("previews", { previews: "Not A Slug" } as Partial<typeof base>);
  refused("build_forks", { buildForks: true } as Partial<typeof base>);
});
