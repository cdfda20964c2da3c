// A Go tool build killed halfway leaves its lock (a directory holding the dead pid) and its
// half-built `<dir>.tmp-<pid>`: the next ensureGoBuild takes the lock over and builds, and
// removes the dead build's directory rather than leaving it in the cache for good. Uses the Go
// toolchain on a two-line module (seconds, from Go's build cache after the first time).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { ensureGoBuild, type GoBuildSpec } from "../../../src/cluster/build.js";

const root = mkdtempSync(join(tmpdir(), "krane-go-lock-"));
after(() => rmSync(root, { recursive: true, force: true }));

/** A pid that certainly is not running: a child that has exited and been reaped. */
async function deadPid(): Promise<number> {
  const child = spawn("true");
  await once(child, "exit");
  return child.pid ?? 0;
}

it("a dead builder's lock is taken over and its half-built directory removed", async () => {
  const mod = join(root, "mod");
  mkdirSync(mod);
  writeFileSync(join(mod, "go.mod"), "module krane.local/locktest\n\ngo 1.22\n");
  writeFileSync(join(mod, "main.go"), "package main\n\nfunc main() {}\n");
  const spec: GoBuildSpec = {
    name: "locktest",
    title: "the lock test",
    moduleDir: mod,
    binaries: [["locktest", "."]],
    tags: "",
    ldflags: "-s -w",
    keyFiles: ["go.mod", "main.go"],
    keyExtras: [],
    coldEstimate: "seconds",
  };
  const cache = join(root, "cache");
  const old = process.env.KRANE_CACHE_DIR;
  process.env.KRANE_CACHE_DIR = cache;
  try {
    // Where the build will go: learn its name from a first build, then fake a crash into it.
    const dir = await ensureGoBuild(spec);
    rmSync(dir, { recursive: true, force: true });
    const dead = await deadPid();
    mkdirSync(`${dir}.lock`);
    writeFileSync(join(`${dir}.lock`, "pid"), String(dead));
    mkdirSync(join(`${dir}.tmp-${dead}`, "bin"), { recursive: true });
    // Another process's temporary directory that is not a Go build's (images use random names).
    mkdirSync(`${dir}.tmp-a1b2c3`);

    assert.equal(await ensureGoBuild(spec), dir);
    assert.ok(existsSync(join(dir, "bin", "locktest")), "built");
    assert.ok(!existsSync(`${dir}.lock`), "the lock is released");
    assert.deepEqual(
      readdirSync(cache)
        .filter((n) => n.includes(".tmp-"))
        .sort(),
      [`${dir.split("/").pop() ?? ""}.tmp-a1b2c3`],
      "the dead build's directory is gone; what is not a pid-named build is left alone",
    );
  } finally {
    if (old === undefined) delete process.env.KRANE_CACHE_DIR;
    else process.env.KRANE_CACHE_DIR = old;
  }
});
