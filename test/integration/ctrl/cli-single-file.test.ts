// The single-file CLI (dist/single-file/krane-<os>-<arch>, built by `npm run build`:
// scripts/build-single.mjs) where there is no Node.js: it names its build, lists and runs the user
// commands, says where the servers run, and passes the CLI's integration tests, which this file
// runs again with KRANE_TEST_CLI naming it (test/support/cli.ts gives it a PATH without node).
import assert from "node:assert/strict";
import { spawn, spawnSync, type SpawnSyncReturns } from "node:child_process";
import { existsSync, readFileSync, realpathSync } from "node:fs";
import { delimiter, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { singleFileName } from "../../../scripts/build-single.mjs";
import { SERVER_COMMANDS } from "../../../src/cli/program.js";
import { pathWithoutNode } from "../../support/cli.js";
import { spawnCtrl, type CtrlProcess } from "./process.js";
import { tempDir } from "./support.js";

const root = new URL("../../../", import.meta.url).pathname;
const binary = join(root, "dist/single-file", singleFileName());
/** The CLI's integration tests: real `krane` processes against a real ctrl. */
const CLI_TESTS = [
  "test/integration/ctrl/cli.test.ts",
  "test/integration/ctrl/cli-admin.test.ts",
  "test/integration/ctrl/cli-outage.test.ts",
  "test/integration/ctrl/audit-verify-file.test.ts",
  "test/integration/rollout/cli.test.ts",
];

/** Every `node` this machine has on its PATH, and the one running this test. */
function nodes(): string[] {
  const onPath = (process.env.PATH ?? "")
    .split(delimiter)
    .map((d) => join(d, "node"))
    .filter((f) => existsSync(f));
  return [...new Set([...onPath, process.execPath].map((f) => realpathSync(f)))];
}

/** The absolute path of a command on this process's PATH. */
function which(name: string): string {
  const found = (process.env.PATH ?? "")
    .split(delimiter)
    .map((d) => join(d, name))
    .find((f) => existsSync(f));
  if (found === undefined) throw new Error(`${name} is not on the PATH`);
  return found;
}

/** Runs the single file with only PATH (without node) and `env` in its environment. */
function single(args: string[], env: NodeJS.ProcessEnv = {}): SpawnSyncReturns<string> {
  return spawnSync(binary, args, { env: { PATH: pathWithoutNode(), ...env }, encoding: "utf8", timeout: 60_000 });
}

describe("the single-file CLI", () => {
  const dir = tempDir();
  let ctrl: CtrlProcess;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    assert.ok(existsSync(binary), `${binary} is missing: npm run build makes it`);
    ctrl = await spawnCtrl(["--database", join(dir.path, "ctrl.db")]);
    env = { KRANE_CTRL_URL: ctrl.url, KRANE_TOKEN: readFileSync(join(dir.path, "admin-token"), "utf8").trim() };
  });
  after(async () => {
    assert.equal(await ctrl.stop(), 0);
    dir.remove();
  });

  it("runs with no node on its PATH and names its build", () => {
    const noNode = spawnSync("/bin/sh", ["-c", "command -v node"], { env: { PATH: pathWithoutNode() } });
    assert.notEqual(noNode.status, 0, "node is not found on the PATH the single file gets");
    const r = single(["version"]);
    assert.equal(r.status, 0, r.stderr);
    const stamp = JSON.parse(readFileSync(join(root, "dist/build-stamp.json"), "utf8")) as Record<string, string>;
    assert.match(r.stdout, new RegExp(`^krane\\s+${stamp.version}$`, "m"));
    assert.match(r.stdout, new RegExp(`^commit\\s+${stamp.commit}$`, "m"));
    assert.match(r.stdout, new RegExp(`^built\\s+${stamp.date}$`, "m"));
    assert.match(r.stdout, /^build\s+single file for \w+-\w+ \(bun \d+\.\d+\.\d+ built in; user commands only\)$/m);
    assert.doesNotMatch(r.stdout, /^node/m);
    const json = single(["version", "-o", "json"]);
    assert.equal(json.status, 0, json.stderr);
    assert.deepEqual(
      { ...(JSON.parse(json.stdout) as Record<string, unknown>), runtime: "" },
      { ...stamp, build: "single-file", runtime: "" },
    );
    const line = single(["--version"]);
    assert.match(line.stdout, /^krane \S+ \(commit \S+, built \S+, single file\)\n$/);
    const list = single(["workspace", "list", "-o", "json"], env);
    assert.equal(list.status, 0, list.stderr);
    assert.deepEqual(JSON.parse(list.stdout), { workspaces: [], nextPageToken: "" });
  });

  it(
    "runs where every node is unexecutable (a mount namespace with /dev/null over each)",
    { skip: process.getuid?.() !== 0 ? "needs root (a mount namespace)" : false },
    () => {
      // sh masks each node, checks that it no longer runs, then runs the single file.
      const script = `for n in "$@"; do ${JSON.stringify(which("mount"))} --bind /dev/null "$n" || exit 90; "$n" -e 0 2>/dev/null && exit 91; done; exec ${JSON.stringify(binary)} status shop/prod`;
      // Found on the full PATH: the one the single file gets has none of /usr/bin, which holds a node.
      const r = spawnSync(
        which("unshare"),
        ["--mount", "--propagation", "private", "/bin/sh", "-c", script, "sh", ...nodes()],
        {
          env: { PATH: pathWithoutNode(), ...env },
          encoding: "utf8",
          timeout: 60_000,
        },
      );
      assert.notEqual(r.status, 90, `masking node failed: ${r.stderr}`);
      assert.notEqual(r.status, 91, "node still ran");
      // No workspace yet: the status command ran, asked ctrl and got its answer.
      assert.equal(r.status, 1, r.stderr);
      assert.match(r.stderr, /no workspace/i);
    },
  );

  it("lists no server command and says where they run", () => {
    const help = single(["--help"]);
    assert.equal(help.status, 0, help.stderr);
    const listed = [...help.stdout.matchAll(/^ {2}([a-z][a-z-]*)(?: |$)/gm)].map((m) => m[1]);
    assert.ok(listed.includes("deploy") && listed.includes("status"), listed.join(", "));
    for (const name of SERVER_COMMANDS) {
      assert.ok(!listed.includes(name), `--help lists ${name}`);
      const r = single([name, "--help"]);
      assert.equal(r.status, 1);
      assert.match(
        r.stderr,
        new RegExp(`^krane: ${name} is not in this single-file krane .*npm install -g krane.*container image`),
      );
    }
    assert.match(help.stdout, /run from the npm package or the container image/);
  });

  it("passes the CLI's integration tests", async (t) => {
    // One file at a time: this test already runs beside another file of the suite. Without
    // NODE_TEST_CONTEXT, which would make the inner runner skip its files as a nested run.
    const { NODE_TEST_CONTEXT: _nested, ...outer } = process.env;
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "--test", "--test-concurrency=1", "--test-reporter=spec", ...CLI_TESTS],
      { cwd: root, env: { ...outer, KRANE_TEST_CLI: binary }, stdio: ["ignore", "pipe", "pipe"] },
    );
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
    assert.equal(code, 0, `the CLI's tests against ${binary}:\n${out.slice(-20_000)}`);
    assert.match(out, /ℹ fail 0/);
    assert.doesNotMatch(out, /ℹ pass 0\b/);
    t.diagnostic(`the CLI's tests against the single file: ${/ℹ pass (\d+)/.exec(out)?.[1] ?? "?"} passed`);
  });
});
