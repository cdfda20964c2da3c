// `krane ctrl serve --admin-token-file` as a real process: the admin token comes from a file, so
// it never shows in the process list; a missing file is created with a generated token (0600);
// a revoked token in the file is not registered again; the flag form warns, and --help says why.
import assert from "node:assert/strict";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { generateToken } from "../../../src/ctrl/domain/tokens.js";
import { krane, spawnCtrl } from "./process.js";
import { tempDir } from "./support.js";

describe("krane ctrl serve --admin-token-file", () => {
  const dir = tempDir();
  after(() => dir.remove());

  it("registers the token in the file, which never appears in the process list", async () => {
    const file = join(dir.path, "given-token");
    const token = generateToken("user");
    writeFileSync(file, `${token}\n`, { mode: 0o600 });
    const ctrl = await spawnCtrl(["--database", join(dir.path, "a.db"), "--admin-token-file", file]);
    try {
      const cmdline = readFileSync(`/proc/${ctrl.child.pid}/cmdline`, "utf8");
      assert.ok(!cmdline.includes(token), "the token is in the process list");
      const r = krane(["workspace", "list", "-o", "json"], { KRANE_CTRL_URL: ctrl.url, KRANE_TOKEN: token });
      assert.equal(r.status, 0, r.stderr);
    } finally {
      assert.equal(await ctrl.stop(), 0);
    }
    const stdout = ctrl.stdout();
    assert.ok(!stdout.includes(token), "the token is in the log");
    assert.ok(!/process list/.test(stdout), "no warning about the process list when the token comes from a file");
  });

  it("creates a missing file with a generated token (0600), and reads it back on the next start", async () => {
    const file = join(dir.path, "sub", "made-token");
    const db = join(dir.path, "b.db");
    const first = await spawnCtrl(["--database", db], { KRANE_ADMIN_TOKEN_FILE: file });
    await first.stop();
    const token = readFileSync(file, "utf8").trim();
    assert.match(token, /^krane_user_/);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    // A fresh database with the same file: the file's token is the admin's again.
    const second = await spawnCtrl(["--database", join(dir.path, "c.db"), "--admin-token-file", file]);
    try {
      const r = krane(["workspace", "list"], { KRANE_CTRL_URL: second.url, KRANE_TOKEN: token });
      assert.equal(r.status, 0, r.stderr);
      const revoked = krane(["api-token", "create", "other"], { KRANE_CTRL_URL: second.url, KRANE_TOKEN: token });
      assert.equal(revoked.status, 0, revoked.stderr);
      const other = revoked.stdout.trim();
      const list = krane(["api-token", "list", "-o", "json"], { KRANE_CTRL_URL: second.url, KRANE_TOKEN: other });
      const adminId = (JSON.parse(list.stdout) as { apiTokens: { id: string; name: string }[] }).apiTokens.find(
        (t) => t.name === "admin",
      )?.id;
      assert.ok(adminId);
      assert.equal(
        krane(["api-token", "revoke", adminId], { KRANE_CTRL_URL: second.url, KRANE_TOKEN: other }).status,
        0,
      );
    } finally {
      await second.stop();
    }
    // Revoked stays revoked although the file still holds it.
    const third = await spawnCtrl(["--database", join(dir.path, "c.db"), "--admin-token-file", file]);
    try {
      const r = krane(["workspace", "list"], { KRANE_CTRL_URL: third.url, KRANE_TOKEN: token });
      assert.notEqual(r.status, 0);
      assert.match(r.stderr, /unauthenticated/);
    } finally {
      await third.stop();
    }
    assert.match(third.stdout(), /admin token in this file was revoked/);
  });

  it("the flag form warns that the token shows in the process list; --help says so; both forms together are refused", async () => {
    const token = generateToken("user");
    const ctrl = await spawnCtrl(["--database", join(dir.path, "d.db"), "--admin-token", token]);
    await ctrl.stop();
    assert.match(ctrl.stdout(), /process list/);
    assert.ok(!ctrl.stdout().includes(token));
    const help = krane(["ctrl", "serve", "--help"], {});
    assert.match(
      help.stdout.replace(/\s+/g, " "),
      /--admin-token <token>.*visible to every user of the machine in the process list/,
    );
    const both = krane(
      ["ctrl", "serve", "--database", join(dir.path, "e.db"), "--admin-token", token, "--admin-token-file", "/tmp/x"],
      {},
    );
    assert.notEqual(both.status, 0);
    assert.match(both.stderr, /either --admin-token .* or --admin-token-file/);
  });
});
