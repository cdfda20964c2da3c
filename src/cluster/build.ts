// Builds the local Kubernetes binaries once, from the Go module in tools/kube, into a cache
// outside the repository, and finds them again in a warm cache in well under a second.
//
// The cache key hashes everything that decides the output (go.mod, go.sum, the etcd wrapper,
// the build flags and the Go version), so a changed pin builds a fresh directory. A build is
// written to a temporary directory and renamed into place only after its manifest is written,
// so a partial build is never mistaken for a finished one; a finished one whose files no longer
// match the manifest (sizes) is rebuilt.
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { constants, existsSync } from "node:fs";
import { access, copyFile, mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { isAlive } from "./process.js";

const run = promisify(execFile);

export const KUBE_VERSION = "v1.36.3";
const MIN_GO = [1, 26] as const;

/** tools/kube: the Go wrapper module (go.mod and go.sum pinned). */
export const kubeModuleDir = fileURLToPath(new URL("../../tools/kube/", import.meta.url));

export const BINARIES = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok"] as const;
export type BinaryName = (typeof BINARIES)[number];

const PACKAGES: Record<BinaryName, string> = {
  etcd: "./etcd",
  "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
  "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
  "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
  kubectl: "k8s.io/kubernetes/cmd/kubectl",
  kwok: "sigs.k8s.io/kwok/cmd/kwok",
};

/** KWOK's own stage definitions (from its module) that make nodes Ready and pods Running. */
const KWOK_STAGES = [
  "kustomize/stage/node/fast/node-initialize.yaml",
  "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
  "kustomize/stage/pod/fast/pod-ready.yaml",
  "kustomize/stage/pod/fast/pod-complete.yaml",
  "kustomize/stage/pod/fast/pod-delete.yaml",
];

/** Gateway API CRDs, as the gateway-api module ships them. */
const GATEWAY_CRDS = [
  "gateway.networking.k8s.io_gatewayclasses.yaml",
  "gateway.networking.k8s.io_gateways.yaml",
  "gateway.networking.k8s.io_httproutes.yaml",
  "gateway.networking.k8s.io_referencegrants.yaml",
];

export interface KubeAssets {
  dir: string;
  bin: Record<BinaryName, string>;
  /** Files of KWOK Stage objects (multi-document YAML). */
  kwokStages: string[];
  /** CRD manifests to install (Gateway API). */
  crds: string[];
}

interface Manifest {
  version: string;
  go: string;
  builtAt: string;
  buildSeconds: number;
  files: Record<string, number>;
}

export function cacheRoot(): string {
  if (process.env.KRANE_CACHE_DIR) return process.env.KRANE_CACHE_DIR;
  const base = process.env.XDG_CACHE_HOME || join(homedir(), ".cache");
  return join(base, "krane");
}

function goEnv(): NodeJS.ProcessEnv {
  return { ...process.env, GOTOOLCHAIN: "local", GOWORK: "off", CGO_ENABLED: "0", GOFLAGS: "-mod=readonly -buildvcs=false" };
}

export class GoMissingError extends Error {}

/** The Go toolchain's version, or a message saying what to install. */
export async function goVersion(): Promise<string> {
  let out: string;
  try {
    out = (await run("go", ["env", "GOVERSION"], { env: goEnv() })).stdout.trim();
  } catch {
    throw new GoMissingError(
      "the local Kubernetes is built from Go modules and needs the Go toolchain (1.26 or newer), " +
        "which is not on PATH. Install it from https://go.dev/dl/ (Debian's golang-go is too old), " +
        "or point krane at a cluster of your own with --kubeconfig.",
    );
  }
  const m = /^go(\d+)\.(\d+)/.exec(out);
  if (!m || Number(m[1]) < MIN_GO[0] || (Number(m[1]) === MIN_GO[0] && Number(m[2]) < MIN_GO[1])) {
    throw new GoMissingError(`Go ${MIN_GO.join(".")} or newer is needed to build the local Kubernetes; found ${out}. Install a newer Go from https://go.dev/dl/.`);
  }
  return out;
}

function ldflags(): string {
  const [major, minor] = KUBE_VERSION.slice(1).split(".");
  const v = (pkg: string, key: string, value: string) => `-X ${pkg}.${key}=${value}`;
  return [
    "-s -w",
    v("k8s.io/component-base/version", "gitVersion", KUBE_VERSION),
    v("k8s.io/component-base/version", "gitMajor", major ?? "1"),
    v("k8s.io/component-base/version", "gitMinor", minor ?? "0"),
    v("k8s.io/component-base/version", "gitTreeState", "clean"),
    v("k8s.io/client-go/pkg/version", "gitVersion", KUBE_VERSION),
    v("k8s.io/client-go/pkg/version", "gitMajor", major ?? "1"),
    v("k8s.io/client-go/pkg/version", "gitMinor", minor ?? "0"),
  ].join(" ");
}

async function cacheKey(go: string): Promise<string> {
  const h = createHash("sha256");
  for (const f of ["go.mod", "go.sum", "etcd/main.go"]) h.update(await readFile(join(kubeModuleDir, f)));
  h.update(ldflags()).update(go).update(KWOK_STAGES.join()).update(GATEWAY_CRDS.join());
  return h.digest("hex").slice(0, 12);
}

function assetsIn(dir: string): KubeAssets {
  const bin = Object.fromEntries(BINARIES.map((b) => [b, join(dir, "bin", b)])) as Record<BinaryName, string>;
  return {
    dir,
    bin,
    kwokStages: KWOK_STAGES.map((_, i) => join(dir, "kwok", `stage-${i}.yaml`)),
    crds: GATEWAY_CRDS.map((f) => join(dir, "crds", f)),
  };
}

/** True when every file the manifest lists is present with its recorded size. */
async function verify(dir: string): Promise<boolean> {
  let manifest: Manifest;
  try {
    manifest = JSON.parse(await readFile(join(dir, "manifest.json"), "utf8")) as Manifest;
  } catch {
    return false;
  }
  for (const [rel, size] of Object.entries(manifest.files)) {
    try {
      const s = await stat(join(dir, rel));
      if (s.size !== size) return false;
      if (rel.startsWith("bin/")) await access(join(dir, rel), constants.X_OK);
    } catch {
      return false;
    }
  }
  return Object.keys(manifest.files).length > 0;
}

/** The cache directory of a finished build, if there is one; never builds. */
export async function findKubeAssets(): Promise<KubeAssets | undefined> {
  const go = await goVersion();
  const dir = join(cacheRoot(), `kube-${KUBE_VERSION}-${await cacheKey(go)}`);
  return (await verify(dir)) ? assetsIn(dir) : undefined;
}

async function withLock<T>(lockDir: string, fn: () => Promise<T>, log: (line: string) => void): Promise<T> {
  await mkdir(join(lockDir, ".."), { recursive: true });
  let told = false;
  for (;;) {
    try {
      await mkdir(lockDir);
      await writeFile(join(lockDir, "pid"), String(process.pid));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const holder = Number(await readFile(join(lockDir, "pid"), "utf8").catch(() => "0"));
      if (holder > 0 && !isAlive(holder)) {
        await rm(lockDir, { recursive: true, force: true });
        continue;
      }
      if (!told) log(`waiting for another build of the local Kubernetes (pid ${holder || "?"})`);
      told = true;
      await sleep(1000);
    }
  }
  try {
    return await fn();
  } finally {
    await rm(lockDir, { recursive: true, force: true });
  }
}

/**
 * Returns the binaries and manifests of the local Kubernetes, building them first when the
 * cache does not hold a complete build (a cold build takes several minutes on 2 cores).
 */
export async function ensureKubeAssets(log: (line: string) => void = () => {}): Promise<KubeAssets> {
  const go = await goVersion();
  const dir = join(cacheRoot(), `kube-${KUBE_VERSION}-${await cacheKey(go)}`);
  if (await verify(dir)) return assetsIn(dir);
  return withLock(`${dir}.lock`, async () => {
    if (await verify(dir)) return assetsIn(dir);
    await build(dir, go, log);
    return assetsIn(dir);
  }, log);
}

async function build(dir: string, go: string, log: (line: string) => void): Promise<void> {
  const started = Date.now();
  const tmp = `${dir}.tmp-${process.pid}`;
  await rm(tmp, { recursive: true, force: true });
  if (existsSync(dir)) {
    log(`the cached build in ${dir} is incomplete or damaged; rebuilding`);
    await rm(dir, { recursive: true, force: true });
  }
  await mkdir(join(tmp, "bin"), { recursive: true });
  await mkdir(join(tmp, "kwok"), { recursive: true });
  await mkdir(join(tmp, "crds"), { recursive: true });
  log(`building Kubernetes ${KUBE_VERSION} (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok) with ${go}; a cold build takes several minutes`);
  const env = goEnv();
  const opts = { cwd: kubeModuleDir, env, maxBuffer: 64 * 1024 * 1024 };
  try {
    await run("go", ["mod", "download"], opts);
    await run(
      "go",
      ["build", "-trimpath", "-tags=selinux,notest", "-ldflags", ldflags(), "-o", join(tmp, "bin") + "/", ...BINARIES.map((b) => PACKAGES[b])],
      opts,
    );
    const moduleDir = async (mod: string) => (await run("go", ["list", "-m", "-f", "{{.Dir}}", mod], opts)).stdout.trim();
    const kwokDir = await moduleDir("sigs.k8s.io/kwok");
    const gatewayDir = await moduleDir("sigs.k8s.io/gateway-api");
    for (const [i, rel] of KWOK_STAGES.entries()) await copyFile(join(kwokDir, rel), join(tmp, "kwok", `stage-${i}.yaml`));
    for (const f of GATEWAY_CRDS) await copyFile(join(gatewayDir, "config/crd/standard", f), join(tmp, "crds", f));
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    const e = err as { stderr?: string; message: string };
    throw new Error(`building the local Kubernetes failed: ${(e.stderr || e.message).trim().split("\n").slice(-20).join("\n")}`);
  }
  const files: Record<string, number> = {};
  const assets = assetsIn(tmp);
  for (const path of [...Object.values(assets.bin), ...assets.kwokStages, ...assets.crds]) {
    files[path.slice(tmp.length + 1)] = (await stat(path)).size;
  }
  const buildSeconds = Math.round((Date.now() - started) / 1000);
  const manifest: Manifest = { version: KUBE_VERSION, go, builtAt: new Date().toISOString(), buildSeconds, files };
  await writeFile(join(tmp, "manifest.json"), JSON.stringify(manifest, null, 2));
  await rename(tmp, dir);
  log(`built the local Kubernetes in ${buildSeconds}s into ${dir}`);
}

/** tools/rollout-conformance: the Go harness running the real Deployment controller's sync pass (a test tool). */
export const rolloutHarnessModuleDir = fileURLToPath(new URL("../../tools/rollout-conformance/", import.meta.url));

/**
 * The rollout conformance harness binary (test/support/rollout-conformance), built once from
 * tools/rollout-conformance into the cache next to the Kubernetes binaries, with the same
 * locking and manifest check. Right after the Kubernetes build it takes seconds (it reuses that
 * build's compiled packages from Go's build cache); alone and cold, about 4½ CPU-minutes.
 */
export async function ensureRolloutHarness(log: (line: string) => void = () => {}): Promise<string> {
  const go = await goVersion();
  const h = createHash("sha256").update(go);
  for (const f of ["go.mod", "go.sum", "main.go"]) h.update(await readFile(join(rolloutHarnessModuleDir, f)));
  const dir = join(cacheRoot(), `rollout-conformance-${KUBE_VERSION}-${h.digest("hex").slice(0, 12)}`);
  const bin = join(dir, "bin", "rollout-conformance");
  if (await verify(dir)) return bin;
  return withLock(`${dir}.lock`, async () => {
    if (await verify(dir)) return bin;
    const started = Date.now();
    const tmp = `${dir}.tmp-${process.pid}`;
    await rm(tmp, { recursive: true, force: true });
    await rm(dir, { recursive: true, force: true });
    log(`building the rollout conformance harness (Deployment controller of Kubernetes ${KUBE_VERSION}) with ${go}`);
    await mkdir(join(tmp, "bin"), { recursive: true });
    try {
      const opts = { cwd: rolloutHarnessModuleDir, env: goEnv(), maxBuffer: 64 * 1024 * 1024 };
      // Same flags and tags as the Kubernetes build above (and the same module versions, see its
      // go.mod), so the packages both compile come from Go's build cache.
      await run("go", ["build", "-trimpath", "-tags=selinux,notest", "-o", join(tmp, "bin", "rollout-conformance"), "."], opts);
    } catch (err) {
      await rm(tmp, { recursive: true, force: true });
      const e = err as { stderr?: string; message: string };
      throw new Error(`building the rollout conformance harness failed: ${(e.stderr || e.message).trim().split("\n").slice(-20).join("\n")}`);
    }
    const buildSeconds = Math.round((Date.now() - started) / 1000);
    const files = { "bin/rollout-conformance": (await stat(join(tmp, "bin", "rollout-conformance"))).size };
    const manifest: Manifest = { version: KUBE_VERSION, go, builtAt: new Date().toISOString(), buildSeconds, files };
    await writeFile(join(tmp, "manifest.json"), JSON.stringify(manifest, null, 2));
    await rename(tmp, dir);
    log(`built the rollout conformance harness in ${buildSeconds}s into ${dir}`);
    return bin;
  }, log);
}
