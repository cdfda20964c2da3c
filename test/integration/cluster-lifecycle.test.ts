// A local cluster leaves nothing behind: not after stop(), not when its owner is killed, and
// its build cache is trusted only when complete.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { cp, mkdtemp, readdir, rm, truncate } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { ensureKubeAssets, findKubeAssets, GoMissingError, startCluster } from "../../src/cluster/index.js";
import { goVersion } from "../../src/cluster/build.js";
import { isAlive } from "../../src/cluster/process.js";
import { eventually } from "../support/cluster.js";

test("stop() ends every component process and removes the cluster's directory", { timeout: 10 * 60_000 }, async () => {
  const c = await startCluster({ name: "life-stop" });
  const pids = Object.values(c.state.pids);
  assert.equal(pids.length, 5);
  assert.ok(pids.every(isAlive));
  await c.stop();
  assert.deepEqual(pids.filter(isAlive), []);
  assert.equal(existsSync(c.dir), false);
});

test(
  "a cluster whose owning process is killed with SIGKILL is stopped by its reaper",
  { timeout: 10 * 60_000 },
  async () => {
    const script = `
    import { startCluster } from ${JSON.stringify(new URL("../../src/cluster/index.ts", import.meta.url).pathname)};
    const c = await startCluster({ name: "life-orphan" });
    console.log(JSON.stringify({ pids: Object.values(c.state.pids), dir: c.dir }));
    setInterval(() => {}, 1000);
  `;
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const line = await new Promise<string>((resolve, reject) => {
      let buf = "";
      child.stdout.on("data", (d: Buffer) => {
        buf += d.toString();
        const nl = buf.indexOf("\n");
        if (nl >= 0) resolve(buf.slice(0, nl));
      });
      child.once("exit", (code) => reject(new Error(`child exited early (${code})`)));
    });
    const { pids, dir } = JSON.parse(line) as { pids: number[]; dir: string };
    assert.ok(pids.every(isAlive));
    child.kill("SIGKILL");
    await eventually("the reaper to stop every component", async () => (pids.some(isAlive) ? undefined : true), 30_000);
    await eventually("the reaper to remove the directory", async () => (existsSync(dir) ? undefined : true), 10_000);
  },
);

test("a warm build cache is found; a damaged one is not trusted", { timeout: 20 * 60_000 }, async () => {
  const assets = await ensureKubeAssets();
  const copy = await mkdtemp(join(tmpdir(), "krane-cache-"));
  const saved = process.env.KRANE_CACHE_DIR;
  try {
    const dirName = assets.dir.split("/").pop() ?? "";
    await cp(assets.dir, join(copy, dirName), { recursive: true });
    // The local cluster's assets include the Secrets Store CSI CRD, a build of its own.
    const cache = dirname(assets.dir);
    for (const d of await readdir(cache))
      if (d.startsWith("secrets-store-crds-") && !d.includes(".tmp"))
        await cp(join(cache, d), join(copy, d), { recursive: true });
    process.env.KRANE_CACHE_DIR = copy;
    assert.equal((await findKubeAssets())?.dir, join(copy, dirName));
    await truncate(join(copy, dirName, "bin", "kwok"), 1000);
    assert.equal(await findKubeAssets(), undefined, "a truncated binary means the build must be redone");
  } finally {
    if (saved === undefined) delete process.env.KRANE_CACHE_DIR;
    else process.env.KRANE_CACHE_DIR = saved;
    await rm(copy, { recursive: true, force: true });
  }
});

test("without a Go toolchain the error says what to install", async () => {
  const savedPath = process.env.PATH;
  process.env.PATH = "/nonexistent";
  try {
    await assert.rejects(goVersion(), (err: unknown) => {
      assert.ok(err instanceof GoMissingError);
      assert.match(err.message, /Go toolchain \(1\.26 or newer\)/);
      assert.match(err.message, /go\.dev\/dl/);
      return true;
    });
  } finally {
    process.env.PATH = savedPath;
  }
});
