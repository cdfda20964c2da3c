// Fetching one commit for a build, from a real git server on this machine (`git http-backend`
// behind HTTPS with Basic authentication, test/support/git-server.ts): the token reaches git
// through GIT_ASKPASS, the commit asked for is what is checked out (an older one too), and a
// wrong token, a missing commit or no token at all each fail with a reason that names it and
// never holds the token. (SSH with a deploy key is not tested here: this machine has no sshd.)
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fetchCommit, GitFetchFailed } from "../../../src/builds/git.js";
import { packSourceDir } from "../../../src/builds/source-dir.js";
import { startGitServer, type GitServer } from "../../support/git-server.js";
import { tempDir } from "../ctrl/support.js";

const TOKEN = "glpat-right-token-0123456789";

describe("fetching a commit from a git server", () => {
  const dir = tempDir("krane-git-fetch-");
  let server: GitServer;
  let url = "";
  let first = "";
  let second = "";
  let n = 0;
  const out = (): string => join(dir.path, `out-${n++}`);

  before(async () => {
    server = await startGitServer(dir.path, { "x-access-token": TOKEN });
    url = await server.createRepository("acme/app.git");
    first = await server.commit("acme/app.git", "main", { "server.js": "// one\n", ".gitignore": "tmp/\n" });
    second = await server.commit("acme/app.git", "main", { "server.js": "// two\n", "lib/a.js": "a\n" });
  });
  after(async () => {
    await server?.close();
    dir.remove();
  });

  async function failure(p: Promise<void>): Promise<string> {
    try {
      await p;
    } catch (err) {
      assert.ok(err instanceof GitFetchFailed, String(err));
      assert.ok(!err.message.includes(TOKEN), "the token is not in the reason");
      return err.message;
    }
    assert.fail("the fetch succeeded");
  }

  it("checks out the commit asked for with the token, the branch's tip or an older one", async () => {
    const tip = out();
    await fetchCommit({
      url,
      commit: second,
      credential: { kind: "token", token: TOKEN },
      dir: tip,
      caFile: server.caFile,
    });
    assert.equal(readFileSync(join(tip, "server.js"), "utf8"), "// two\n");
    assert.equal(readFileSync(join(tip, "lib/a.js"), "utf8"), "a\n");
    const packed = await packSourceDir(tip, { maxBytes: 1 << 20, maxArchiveBytes: 1 << 20 });
    assert.equal(packed.files, 3, "the commit's files, not .git");

    const old = out();
    await fetchCommit({
      url,
      commit: first,
      credential: { kind: "token", token: TOKEN },
      dir: old,
      caFile: server.caFile,
    });
    assert.equal(readFileSync(join(old, "server.js"), "utf8"), "// one\n");
    assert.equal(existsSync(join(old, "lib/a.js")), false);
  });

  it("a wrong token, no token, a commit the repository lacks: each a clear reason", async () => {
    const before = server.refused();
    assert.match(
      await failure(
        fetchCommit({
          url,
          commit: second,
          credential: { kind: "token", token: "wrong-token" },
          dir: out(),
          caFile: server.caFile,
        }),
      ),
      new RegExp(`the repository ${url.replace(/[.]/g, "\\.")} refused the token \\(HTTP 401/403\\)`),
    );
    assert.ok(server.refused() > before, "the server saw the wrong token and refused it");
    assert.match(
      await failure(fetchCommit({ url, commit: second, dir: out(), caFile: server.caFile })),
      /refused the token/,
    );
    assert.match(
      await failure(
        fetchCommit({
          url,
          commit: "0".repeat(40),
          credential: { kind: "token", token: TOKEN },
          dir: out(),
          caFile: server.caFile,
        }),
      ),
      /commit 0{40} is not in the repository/,
    );
    assert.match(
      await failure(
        fetchCommit({
          url: `${server.url}/acme/none.git`,
          commit: second,
          credential: { kind: "token", token: TOKEN },
          dir: out(),
          caFile: server.caFile,
        }),
      ),
      /no repository at|fetching .* failed/,
    );
  });

  it("the token is on no command line git runs with (git's arguments recorded by a wrapper that runs the real git)", async () => {
    const bin = join(dir.path, "record-bin");
    const log = join(dir.path, "argv.log");
    mkdirSync(bin, { recursive: true });
    const real = execFileSync("sh", ["-c", "command -v git"], { encoding: "utf8" }).trim();
    writeFileSync(join(bin, "git"), `#!/bin/sh\nprintf '%s\\n' "$*" >> ${log}\nexec ${real} "$@"\n`, { mode: 0o755 });
    const path = process.env.PATH;
    process.env.PATH = `${bin}:${path ?? ""}`;
    try {
      await fetchCommit({
        url,
        commit: second,
        credential: { kind: "token", token: TOKEN },
        dir: out(),
        caFile: server.caFile,
      });
    } finally {
      process.env.PATH = path;
    }
    const argv = readFileSync(log, "utf8");
    assert.match(
      argv,
      /fetch .* -- https:\/\/127\.0\.0\.1:\d+\/acme\/app\.git [0-9a-f]{40}/,
      "the wrapper saw the fetch",
    );
    assert.ok(!argv.includes(TOKEN), argv);
  });

  it("an https URL with credentials in it is refused before git runs", async () => {
    const bad = url.replace("https://", `https://x:${TOKEN}@`);
    const msg = await failure(fetchCommit({ url: bad, commit: second, dir: out() }));
    assert.match(msg, /url: must not hold credentials/);
  });
});
