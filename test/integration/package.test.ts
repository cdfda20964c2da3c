// The npm package: `npm pack` holds the build, the protos, the RBAC manifest, the Helm chart and
// the pinned dependency tree (npm-shrinkwrap.json), and no sources or tests; installed from the
// tarball into an empty directory (dependencies compiled as a user's install would), `krane`
// runs from it without tsx: its version, a pure command, and ctrl on SQLite answering the CLI.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, describe, it } from "node:test";
import { packWorkingTree } from "../support/pack.js";
import { deployment, input, rev } from "../unit/rollout/helpers.js";

const dir = mkdtempSync(join(tmpdir(), "krane-pack-"));
after(() => rmSync(dir, { recursive: true, force: true }));
let tarball = "";
/** The commit the package's build was stamped with. */
let commit = "";
let entries: string[] = [];
const inst = join(dir, "inst");
const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };

before(
  () => {
    ({ tarball, commit } = packWorkingTree(dir));
    entries = execFileSync("tar", ["tzf", tarball], { encoding: "utf8" })
      .split("\n")
      .filter(Boolean)
      .map((e) => e.replace(/^package\//, ""));
  },
  { timeout: 5 * 60_000 },
);

function krane(args: string[], env: NodeJS.ProcessEnv = {}): string {
  return execFileSync(join(inst, "node_modules/.bin/krane"), args, {
    cwd: inst,
    encoding: "utf8",
    env: { ...process.env, ...env },
    timeout: 60_000,
  });
}

describe("npm package", () => {
  it("contains the build, protos, manifests and chart, and no sources or tests", () => {
    for (const required of [
      "package.json",
      "README.md",
      // README.md links into docs/.
      "docs/using.md",
      "docs/running-for-real.md",
      "bin/krane.js",
      "dist/cli/main.js",
      "dist/cli/user-client.js",
      "dist/build-stamp.json",
      "dist/ctrl/server/server.js",
      "dist/agent/agent.js",
      "proto/krane/ctrl/v1/api.proto",
      "proto/krane/ctrl/v1/cluster.proto",
      "deploy/rbac/agent.yaml",
      "deploy/helm/krane/Chart.yaml",
      "deploy/helm/krane/values.schema.json",
      "deploy/helm/krane/files/agent-rbac.yaml",
      "tools/kube/go.mod",
      "npm-shrinkwrap.json",
    ]) {
      assert.ok(entries.includes(required), `the package has ${required}`);
    }
    const forbidden = entries.filter(
      // The single-file CLI (dist/single-file/, about 110 MiB) is a download of its own.
      (e) =>
        /^(src|test|bench|scripts|\.ci|node_modules|\.scratch|dist\/single-file)\//.test(e) ||
        /\.ts$/.test(e) ||
        e.endsWith(".tgz"),
    );
    assert.deepEqual(forbidden, []);
    const stamp = JSON.parse(
      execFileSync("tar", ["xzOf", tarball, "package/dist/build-stamp.json"], { encoding: "utf8" }),
    ) as { version: string; commit: string };
    assert.equal(stamp.version, pkg.version);
    assert.equal(stamp.commit, commit);
  });

  it("installs from the tarball and runs without tsx", () => {
    mkdirSync(inst, { recursive: true });
    writeFileSync(join(inst, "package.json"), JSON.stringify({ name: "krane-install-test", private: true }));
    execFileSync("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", tarball], {
      cwd: inst,
      stdio: ["ignore", "ignore", "pipe"],
      timeout: 15 * 60_000,
    });
    for (const devOnly of ["tsx", "typescript", "esbuild", "eslint"])
      assert.equal(existsSync(join(inst, "node_modules", devOnly)), false, `${devOnly} is not installed`);
    const version = krane(["version"]);
    assert.match(version, new RegExp(`^krane\\s+${pkg.version.replace(/\./g, "\\.")}$`, "m"));
    assert.match(version, new RegExp(`^commit\\s+${commit}$`, "m"));
    const npx = execFileSync("npx", ["--no-install", "krane", "--version"], {
      cwd: inst,
      encoding: "utf8",
      timeout: 60_000,
    });
    assert.match(npx, new RegExp(`^krane ${pkg.version.replace(/\./g, "\\.")} \\(commit ${commit}, built `));
    // A pure command end to end.
    const example = input(
      deployment("v2", { status: { replicas: 10, updatedReplicas: 0, readyReplicas: 10, availableReplicas: 10 } }),
      [rev("v1", 1, 10, { desired: 10, max: 13 }), rev("v2", 2, 0)],
    );
    writeFileSync(join(dir, "plan.json"), JSON.stringify(example));
    const plan = JSON.parse(krane(["rollout", "plan", "--input", join(dir, "plan.json")])) as {
      target: string;
      revisions: { replicas: number }[];
    };
    assert.equal(plan.target, "v2");
    assert.deepEqual(
      plan.revisions.map((r) => r.replicas),
      [10, 3],
    );
  });

  it("serves ctrl on SQLite from the installed package, and its CLI talks to it", async () => {
    const token = "krane_user_packagetestpackagetestpackagetest00";
    const ctrl = spawn(
      join(inst, "node_modules/.bin/krane"),
      [
        "ctrl",
        "serve",
        "--database",
        join(dir, "ctrl.db"),
        "--listen",
        "127.0.0.1:0",
        "--ops-listen",
        "off",
        "--admin-token",
        token,
      ],
      {
        cwd: inst,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stderr = "";
    ctrl.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`ctrl did not start: ${stderr}`)), 60_000);
        ctrl.once("exit", (code) => reject(new Error(`ctrl exited with ${code}: ${stderr}`)));
        createInterface({ input: ctrl.stdout! }).on("line", (line) => {
          const rec = JSON.parse(line) as { msg?: string; url?: string };
          if (rec.msg === "ctrl listening" && rec.url) {
            clearTimeout(timer);
            resolve(rec.url);
          }
        });
      });
      const env = { KRANE_CTRL_URL: url, KRANE_TOKEN: token };
      assert.match(
        krane(["version", "--ctrl"], env),
        new RegExp(`^ctrl\\s+${pkg.version.replace(/\./g, "\\.")}\\+${commit}$`, "m"),
      );
      krane(["workspace", "create", "acme"], env);
      const list = JSON.parse(krane(["workspace", "list", "-o", "json"], env)) as { workspaces: { slug: string }[] };
      assert.deepEqual(
        list.workspaces.map((w) => w.slug),
        ["acme"],
      );
    } finally {
      if (ctrl.exitCode === null && ctrl.signalCode === null) {
        const exited = once(ctrl, "exit");
        ctrl.kill("SIGTERM");
        await exited;
      }
    }
  });
});
