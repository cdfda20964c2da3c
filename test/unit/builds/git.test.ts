// The pure parts of fetching a repository: which URLs are taken (no credentials in one) and how
// git's errors are worded, never with the secret in them.
import assert from "node:assert/strict";
import { test } from "node:test";
import { fetchFailure, repositoryTransport } from "../../../src/builds/git.js";

test("https and ssh URLs are taken; credentials in a URL, other schemes and junk are not", () => {
  for (const [url, transport] of [
    ["https://github.com/acme/app.git", "https"],
    ["https://gitlab.example.com:8443/group/sub/app", "https"],
    ["git@github.com:acme/app.git", "ssh"],
    ["ssh://git@gitlab.example.com:2222/group/app.git", "ssh"],
  ] as const)
    assert.deepEqual(repositoryTransport(url), { ok: true, transport }, url);
  const refused = (url: string): string => {
    const t = repositoryTransport(url);
    assert.ok(!t.ok, url);
    return t.problem;
  };
  assert.match(refused("https://x-access-token:ghp_secret@github.com/acme/app.git"), /must not hold credentials/);
  assert.match(refused("https://ghp_secret@github.com/acme/app.git"), /must not hold credentials/);
  for (const url of [
    "http://github.com/acme/app.git",
    "file:///etc",
    "ext::sh -c touch% /tmp/pwned",
    "git@github.com:-oProxyCommand",
    "-oProxyCommand@github.com:acme/app",
    "git@-oProxyCommand:acme/app",
    "ssh://-oProxyCommand@host/acme/app",
    "--upload-pack=touch /tmp/x",
    "https://github.com/acme/app.git --upload-pack=x",
    "",
  ])
    assert.match(refused(url), /must be an https URL|credentials/, url);
});

test("git's errors are worded for people, without the secret", () => {
  const url = "https://git.example.com/acme/app.git";
  const sha = "a".repeat(40);
  assert.match(
    fetchFailure(url, sha, "fatal: Authentication failed for 'https://git.example.com/acme/app.git/'\n", "tok"),
    /refused the token \(HTTP 401\/403\)/,
  );
  assert.match(
    fetchFailure(url, sha, `fatal: remote error: upload-pack: not our ref ${sha}\n`, "tok"),
    new RegExp(`commit ${sha} is not in the repository`),
  );
  assert.match(
    fetchFailure(url, sha, "fatal: unable to access '…': Could not resolve host: git.example.com\n", "tok"),
    /is unreachable/,
  );
  assert.match(
    fetchFailure(
      "git@h:a/b.git",
      sha,
      "git@h: Permission denied (publickey).\nfatal: Could not read from remote repository.\n",
      "KEY",
    ),
    /refused the deploy key/,
  );
  const odd = fetchFailure(url, sha, "fatal: something about s3cr3t-token went wrong\n", "s3cr3t-token");
  assert.match(odd, /fetching .* failed: fatal: something about \*\*\* went wrong/);
  assert.ok(!odd.includes("s3cr3t-token"));
});
