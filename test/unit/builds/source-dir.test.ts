// A directory as a source: git's ignore rules (in a repository and outside one), .kraneignore on
// top (tracked files too), deterministic archives, and the size bound naming the limit.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { packSourceDir, SourceDirError, sourcePaths } from "../../../src/builds/source-dir.js";
import { readTar } from "../../../src/builds/tar.js";

const LIMITS = { maxBytes: 1 << 20, maxArchiveBytes: 1 << 20 };

function project(): string {
  const dir = mkdtempSync(join(tmpdir(), "krane-src-"));
  mkdirSync(join(dir, "node_modules", "x"), { recursive: true });
  mkdirSync(join(dir, "src"));
  mkdirSync(join(dir, "logs"));
  writeFileSync(join(dir, "package.json"), '{"scripts":{"start":"node src/a.js"}}');
  writeFileSync(join(dir, "src", "a.js"), "1");
  writeFileSync(join(dir, "src", ".gitignore"), "*.tmp\n");
  writeFileSync(join(dir, "src", "b.tmp"), "x");
  writeFileSync(join(dir, "node_modules", "x", "i.js"), "x");
  writeFileSync(join(dir, "logs", "today.log"), "x");
  writeFileSync(join(dir, ".gitignore"), "node_modules/\n");
  writeFileSync(join(dir, ".kraneignore"), "logs/\nsecret.txt\n");
  writeFileSync(join(dir, "secret.txt"), "x");
  symlinkSync("src/a.js", join(dir, "main.js"));
  return dir;
}

const WANT = [".gitignore", ".kraneignore", "main.js", "package.json", "src/.gitignore", "src/a.js"];

test("outside a repository: every directory's .gitignore and the root's .kraneignore", async () => {
  assert.deepEqual(await sourcePaths(project()), WANT);
});

test("in a repository: the same rules, and .kraneignore also leaves out tracked files", async () => {
  const dir = project();
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.email=t@t", "-c", "user.name=t", ...args], { cwd: dir, stdio: "pipe" });
  git("init", "--quiet");
  git("add", "-f", "secret.txt", "package.json");
  git("commit", "--quiet", "-m", "x");
  assert.deepEqual(await sourcePaths(dir), WANT);
  // Deleted but still tracked: not part of the source.
  rmSync(join(dir, "package.json"));
  const packed = await packSourceDir(dir, LIMITS);
  assert.deepEqual(
    readTar(packed.archive, { maxBytes: 1 << 20, maxEntries: 100 }).map((e) => e.path),
    WANT.filter((p) => p !== "package.json"),
  );
});

test("equal contents give the same digest; a change gives another", async () => {
  const a = await packSourceDir(project(), LIMITS);
  const b = await packSourceDir(project(), LIMITS);
  assert.equal(a.digest, b.digest);
  assert.match(a.digest, /^sha256:[0-9a-f]{64}$/);
  const dir = project();
  writeFileSync(join(dir, "src", "a.js"), "2");
  assert.notEqual((await packSourceDir(dir, LIMITS)).digest, a.digest);
});

test("over the size limit, or nothing to upload, is an error that says so", async () => {
  const dir = project();
  writeFileSync(join(dir, "big.bin"), Buffer.alloc(3000));
  await assert.rejects(
    packSourceDir(dir, { maxBytes: 2000, maxArchiveBytes: 1 << 20 }),
    (err: unknown) =>
      err instanceof SourceDirError && /more than 2 KiB of files to upload \(big.bin crossed it\)/.test(err.message),
  );
  const empty = mkdtempSync(join(tmpdir(), "krane-src-"));
  writeFileSync(join(empty, ".kraneignore"), "*\n");
  await assert.rejects(packSourceDir(empty, LIMITS), /has no files to upload/);
  await assert.rejects(packSourceDir(join(empty, "nope"), LIMITS), /is not a directory/);
});
