// The `krane` CLI in an outage, all real processes: `krane ctrl serve` on PostgreSQL, PostgreSQL
// stopped. A read retries for --retry-for with progress on stderr and then exits 69 saying the
// database is down; a deploy still retrying under its Idempotency-Key when PostgreSQL comes back
// succeeds, once; a read still retrying when PostgreSQL comes back succeeds; ctrl itself gone is
// named as such.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { generateToken } from "../../../src/ctrl/domain/tokens.js";
import { EXIT_UNAVAILABLE } from "../../../src/cli/user-client.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { krane, spawnCtrl, spawnKrane, type CtrlProcess } from "./process.js";
import { tempDir } from "./support.js";

describe("the CLI while ctrl's database is down", () => {
  const dir = tempDir();
  const admin = generateToken("user");
  let postgres: TestPostgres;
  let ctrl: CtrlProcess;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    postgres = await startPostgres();
    const tokenFile = join(dir.path, "admin-token");
    writeFileSync(tokenFile, `${admin}\n`, { mode: 0o600 });
    ctrl = await spawnCtrl(["--database", await postgres.newDatabase(), "--admin-token-file", tokenFile]);
    env = { KRANE_CTRL_URL: ctrl.url, KRANE_TOKEN: admin };
    for (const args of [
      ["workspace", "create", "acme"],
      ["region", "create", "local"],
      ["project", "create", "web"],
      ["env", "create", "web/prod", "--region", "local=1"],
    ]) {
      const r = krane(args, env);
      assert.equal(r.status, 0, `krane ${args.join(" ")}: ${r.stderr}`);
    }
    await postgres.halt();
  });

  after(async () => {
    await ctrl?.stop();
    await postgres?.stop();
    dir.remove();
  });

  it(`a read retries for --retry-for with progress on stderr, then exits ${EXIT_UNAVAILABLE} naming the database`, () => {
    const started = Date.now();
    const r = krane(["workspace", "list", "--retry-for", "2s"], env);
    const elapsed = Date.now() - started;
    assert.equal(r.status, EXIT_UNAVAILABLE, r.stderr);
    const lines = r.stderr.trim().split("\n");
    const retries = lines.filter((l) => /retrying ListWorkspaces in/.test(l));
    assert.ok(retries.length >= 2, r.stderr);
    assert.match(
      lines.at(-1) ?? "",
      /^krane: unavailable: ctrl's database \(PostgreSQL\) is unavailable: connection refused; the request was not applied, try again later \(retried for 2 s\)$/,
    );
    assert.ok(elapsed >= 2000, `gave up after ${elapsed} ms`);
  });

  it(`krane status (its own JSON client) retries the same way, then exits ${EXIT_UNAVAILABLE} naming the database`, () => {
    const r = krane(["status", "web/prod", "--retry-for", "1s"], env);
    assert.equal(r.status, EXIT_UNAVAILABLE, r.stderr);
    const lines = r.stderr.trim().split("\n");
    assert.ok(lines.filter((l) => /retrying ListWorkspaces in/.test(l)).length >= 1, r.stderr);
    assert.match(
      lines.at(-1) ?? "",
      /^krane: unavailable: ctrl's database \(PostgreSQL\) is unavailable: connection refused; the request was not applied, try again later \(retried for 1 s\)$/,
    );
  });

  it("a deploy retries under its Idempotency-Key and, once PostgreSQL is back, makes exactly one revision", async () => {
    const child = spawnKrane(
      ["deploy", "web/prod", "-w", "acme", "--image", "registry.example.com/web:1", "-o", "json", "--retry-for", "60s"],
      env,
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    const retrying = new Promise<void>((resolve) => {
      child.stderr.on("data", (d: Buffer) => {
        stderr += d.toString();
        if (/retrying CreateDeployment/.test(stderr)) resolve();
      });
    });
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    await retrying;
    await postgres.resume();
    assert.equal(await exited, 0, stderr);
    assert.equal((JSON.parse(stdout) as { revision: string }).revision, "1");
    const list = krane(["deployments", "list", "web/prod", "-w", "acme", "-o", "json"], env);
    assert.equal(list.status, 0, list.stderr);
    assert.equal((JSON.parse(list.stdout) as { deployments: unknown[] }).deployments.length, 1);
    await postgres.halt();
  });

  it("a read still retrying when PostgreSQL comes back succeeds", async () => {
    const child = spawnKrane(["workspace", "list", "-o", "json", "--retry-for", "60s"], env);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    const retrying = new Promise<void>((resolve) => {
      child.stderr.on("data", (d: Buffer) => {
        stderr += d.toString();
        if (/retrying ListWorkspaces/.test(stderr)) resolve();
      });
    });
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    await retrying;
    await postgres.resume();
    assert.equal(await exited, 0, stderr);
    assert.deepEqual(
      (JSON.parse(stdout) as { workspaces: { slug: string }[] }).workspaces.map((w) => w.slug),
      ["acme"],
    );
  });

  it(`ctrl itself not running: exits ${EXIT_UNAVAILABLE} saying ctrl is not reachable`, async () => {
    const port = await new Promise<number>((resolve) => {
      const s = createServer();
      s.listen(0, "127.0.0.1", () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const r = krane(["workspace", "list", "--retry-for", "500ms"], {
      ...env,
      KRANE_CTRL_URL: `http://127.0.0.1:${port}`,
    });
    assert.equal(r.status, EXIT_UNAVAILABLE, r.stderr);
    assert.match(
      r.stderr,
      new RegExp(
        `ctrl is not reachable at http://127\\.0\\.0\\.1:${port} \\(.*\\): is it running\\? \\(retried for 0\\.5 s\\)`,
      ),
    );
    const s = krane(["status", "web/prod", "-w", "acme", "--retry-for", "0"], {
      ...env,
      KRANE_CTRL_URL: `http://127.0.0.1:${port}`,
    });
    assert.equal(s.status, EXIT_UNAVAILABLE, s.stderr);
    assert.equal(
      s.stderr.trim(),
      `krane: unavailable: ctrl is not reachable at http://127.0.0.1:${port} (connect ECONNREFUSED 127.0.0.1:${port}): is it running?`,
    );
  });
});
