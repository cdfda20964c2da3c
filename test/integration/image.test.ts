// The container image built by scripts/build-image.sh from Debian packages and the npm package
// (no base image pulled): an OCI layout whose config runs `krane` as 65532:65532, of a small
// size, and whose entrypoint works. It is run in a chroot of its unpacked root filesystem
// (podman is not installed here), mounted read-only with a tmpfs on /tmp as a pod with
// readOnlyRootFilesystem would have it: `krane version`, and ctrl on SQLite answering the CLI.
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, describe, it } from "node:test";
import { packWorkingTree, REPO } from "../support/pack.js";

/** Host tools by absolute path: the chrooted command runs with the image's PATH. */
const tools = Object.fromEntries(
  ["mmdebstrap", "umoci", "unshare", "chroot", "mount"].map((t) => [
    t,
    spawnSync("sh", ["-c", `command -v ${t}`], { encoding: "utf8" }).stdout.trim(),
  ]),
);
const missing = Object.entries(tools)
  .filter(([, path]) => !path)
  .map(([t]) => t);
const skip =
  missing.length > 0
    ? `the image build needs ${missing.join(", ")} (Debian: apt-get install mmdebstrap umoci; .ci/run installs them)`
    : process.getuid?.() !== 0
      ? "the image build and the chroot run need root"
      : false;

const pkg = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string };
const dir = mkdtempSync(join(tmpdir(), "krane-image-"));
after(() => rmSync(dir, { recursive: true, force: true }));

interface ImageConfig {
  config: {
    User: string;
    Entrypoint: string[];
    Cmd: string[];
    Env: string[];
    WorkingDir: string;
    Labels: Record<string, string>;
  };
  rootfs: { diff_ids: string[] };
}

const layout = join(dir, "out/krane-oci");
let buildLog = "";
let config: ImageConfig;
let compressedBytes = 0;
let rootfs = "";
/** The commit the image's build was stamped with. */
let commit = "";

function blob(digest: string): string {
  return join(layout, "blobs", ...digest.split(":"));
}

/** Runs the image's entrypoint with `args` in a read-only chroot of its root filesystem. */
function inImage(args: string[]): { command: string; argv: string[]; env: NodeJS.ProcessEnv } {
  const entry = [...config.config.Entrypoint, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(" ");
  const script = [
    `${tools.mount} --bind ${rootfs} ${rootfs}`,
    `${tools.mount} -o remount,bind,ro ${rootfs}`,
    `${tools.mount} -t tmpfs -o size=64m tmpfs ${rootfs}/tmp`,
    `exec ${tools.chroot} --userspec=${config.config.User} ${rootfs} ${entry}`,
  ].join(" && ");
  const env = Object.fromEntries(
    config.config.Env.map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]),
  );
  return {
    command: tools.unshare ?? "unshare",
    argv: ["--mount", "--fork", "--kill-child=SIGTERM", "sh", "-c", script],
    env: { ...env, HOME: "/home/nonroot" },
  };
}

describe("container image", { skip }, () => {
  before(
    () => {
      const packed = packWorkingTree(dir);
      const tarball = packed.tarball;
      commit = packed.commit;
      buildLog = execFileSync(
        "bash",
        [join(REPO, "scripts/build-image.sh"), "--package", tarball, "--out", join(dir, "out"), "--native-from", REPO],
        { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 25 * 60_000 },
      );
      const index = JSON.parse(readFileSync(join(layout, "index.json"), "utf8")) as {
        manifests: { digest: string; annotations?: Record<string, string> }[];
      };
      const entry = index.manifests.find((m) => m.annotations?.["org.opencontainers.image.ref.name"] === pkg.version);
      assert.ok(entry, `the layout tags ${pkg.version}`);
      const manifest = JSON.parse(readFileSync(blob(entry.digest), "utf8")) as {
        config: { digest: string; size: number };
        layers: { digest: string; size: number; mediaType: string }[];
      };
      config = JSON.parse(readFileSync(blob(manifest.config.digest), "utf8")) as ImageConfig;
      compressedBytes = manifest.config.size + manifest.layers.reduce((n, l) => n + l.size, 0);
      execFileSync("umoci", ["unpack", "--image", `${layout}:${pkg.version}`, join(dir, "bundle")], {
        stdio: "ignore",
      });
      rootfs = join(dir, "bundle/rootfs");
    },
    { timeout: 30 * 60_000 },
  );

  it("is an OCI image that runs krane as a numeric non-root user", () => {
    assert.equal(config.config.User, "65532:65532");
    assert.deepEqual(config.config.Entrypoint, ["/usr/local/bin/node", "/app/bin/krane.js"]);
    assert.equal(config.config.Labels["org.opencontainers.image.version"], pkg.version);
    assert.equal(config.config.Labels["org.opencontainers.image.revision"], commit);
    assert.equal(config.rootfs.diff_ids.length, 3, "layers: Debian libraries, Node.js, krane");
    // Reported, and bounded so that a regression (a dev dependency, an unpruned tree) shows.
    const mib = compressedBytes / 1024 / 1024;
    console.log(`image size: ${mib.toFixed(1)} MiB compressed; ${buildLog.trim().split("\n").pop()}`);
    assert.ok(mib < 80, `${mib.toFixed(1)} MiB`);
  });

  it("holds no shell, no package manager, nothing setuid and nothing the user may change", () => {
    for (const absent of [
      "bin/sh",
      "usr/bin/apt",
      "usr/bin/dpkg",
      "app/node_modules/typescript",
      "app/node_modules/tsx",
      "app/src",
    ]) {
      assert.equal(spawnSync("test", ["-e", join(rootfs, absent)]).status, 1, `${absent} is not in the image`);
    }
    const find = (args: string[]): string => execFileSync("find", args, { encoding: "utf8" }).trim();
    assert.equal(find([rootfs, "-perm", "/6000", "-type", "f"]), "", "setuid/setgid files");
    assert.equal(
      find([rootfs, "-path", join(rootfs, "tmp"), "-prune", "-o", "-perm", "-o+w", "-not", "-type", "l", "-print"]),
      "",
      "world-writable files",
    );
    assert.equal(
      find([join(rootfs, "app"), "-perm", "/022", "-not", "-type", "l"]),
      "",
      "group- or world-writable files in /app",
    );
    assert.equal(find([join(rootfs, "app"), "-not", "-user", "0"]), "", "/app belongs to root");
    const packages = readFileSync(join(rootfs, "var/lib/dpkg/status.d/libc6"), "utf8");
    assert.match(packages, /^Package: libc6$/m);
  });

  it("runs its entrypoint read-only as 65532: krane version", () => {
    const run = inImage(["version"]);
    const r = spawnSync(run.command, run.argv, { env: run.env, encoding: "utf8", timeout: 60_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^krane\\s+${pkg.version.replace(/\./g, "\\.")}$`, "m"));
    assert.match(r.stdout, new RegExp(`^commit\\s+${commit}$`, "m"));
    assert.equal(r.stderr, "");
  });

  it("serves ctrl from the image on SQLite in /tmp, and the CLI talks to it", async () => {
    const token = "krane_user_imagetestimagetestimagetestimage0000";
    const run = inImage([
      "ctrl",
      "serve",
      "--database",
      "/tmp/ctrl.db",
      "--listen",
      "127.0.0.1:0",
      "--ops-listen",
      "off",
      "--admin-token",
      token,
    ]);
    const ctrl = spawn(run.command, run.argv, { env: run.env, stdio: ["ignore", "pipe", "pipe"] });
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
      const out = execFileSync(process.execPath, [join(REPO, "bin/krane.js"), "version", "--ctrl"], {
        env: { ...process.env, KRANE_CTRL_URL: url, KRANE_TOKEN: token },
        encoding: "utf8",
        timeout: 60_000,
      });
      assert.match(out, new RegExp(`^ctrl\\s+${pkg.version.replace(/\./g, "\\.")}\\+${commit}$`, "m"));
    } finally {
      // chroot --userspec changes the user, which clears unshare's --kill-child signal: stop
      // krane itself (unshare's child: sh and chroot exec'd it), and unshare exits with it.
      if (ctrl.exitCode === null && ctrl.signalCode === null) {
        const exited = once(ctrl, "exit");
        const pid = ctrl.pid ?? 0;
        const children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
          .trim()
          .split(/\s+/)
          .filter(Boolean)
          .map(Number);
        for (const c of children) process.kill(c, "SIGTERM");
        if (children.length === 0) ctrl.kill("SIGTERM");
        await exited;
      }
    }
  });
});
