// Images real nodes run without pulling (nothing outside the package registries is reachable
// here); nodes import OCI archives with `ctr images import` (nodes/nodes.ts):
//  - the pod sandbox image, built from Kubernetes' own pause.c (compiled by the kube-node build)
//    into a one-layer OCI image with umoci;
//  - krane's image and the test workload image (the hello app), built from the checkout by
//    scripts/build-image.sh (the same script as `npm run image`) and cached by the digest of
//    what the package is made of: equal sources give the same images without a rebuild, and the
//    Debian and Node.js layers are kept between builds (--layer-cache), so a changed source costs
//    a pack and the app layer, not a new root filesystem. Only the newest few builds are kept.
// All are cached next to the Go builds ($cache/images).
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { copyFile, mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { cacheRoot, ensureGoBuild, KUBE_NODE_BUILD, KUBE_VERSION, withLock } from "./build.js";
import type { NodeImage } from "./nodes/nodes.js";
import { isCheckout, packWorkingTree, REPO, workingTreeDigest } from "./checkout.js";

const run = promisify(execFile);

export const SANDBOX_REPOSITORY = "krane.local/pause";
export const SANDBOX_TAG = KUBE_VERSION;

/** Where built images are kept: $cache/images/<name>-<key>/. */
export function imagesDir(): string {
  return join(cacheRoot(), "images");
}

/** tar's flags for an archive that depends only on its files: sorted, owned by root, dated at the epoch. */
const REPRODUCIBLE_TAR: readonly string[] = ["--sort=name", "--mtime=@0", "--owner=0", "--group=0", "--numeric-owner"];

/** A reproducible tar of `files` (relative to `dir`). */
async function layerTar(dir: string, files: string[], out: string): Promise<void> {
  await run("tar", [
    ...REPRODUCIBLE_TAR,
    "--format=posix",
    "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
    "-C",
    dir,
    "-cf",
    out,
    ...files,
  ]);
}

/** The sandbox image as an OCI archive (built on first use), and the name nodes know it by. */
export async function sandboxImage(log: (line: string) => void = () => {}): Promise<NodeImage & { name: string }> {
  const pause = join(await ensureGoBuild(KUBE_NODE_BUILD, log), "bin", "pause");
  const key = createHash("sha256")
    .update(await readFile(pause))
    .update(SANDBOX_TAG)
    .digest("hex")
    .slice(0, 12);
  const dir = join(imagesDir(), `pause-${key}`);
  const archive = join(dir, "pause.oci.tar");
  const image = { archive, repository: SANDBOX_REPOSITORY, name: `${SANDBOX_REPOSITORY}:${SANDBOX_TAG}` };
  if (existsSync(archive)) return image;
  await mkdir(imagesDir(), { recursive: true });
  await withLock(
    `${dir}.lock`,
    async () => {
      if (existsSync(archive)) return;
      const tmp = await mkdtemp(`${dir}.tmp-`);
      try {
        await mkdir(join(tmp, "root"));
        await copyFile(pause, join(tmp, "root", "pause"));
        await layerTar(join(tmp, "root"), ["pause"], join(tmp, "layer.tar"));
        const layout = join(tmp, "layout");
        const ref = `${layout}:${SANDBOX_TAG}`;
        await run("umoci", ["init", "--layout", layout]);
        await run("umoci", ["new", "--image", ref]);
        await run("umoci", ["raw", "add-layer", "--image", ref, join(tmp, "layer.tar")]);
        await run("umoci", [
          "config",
          "--image",
          ref,
          "--created=1970-01-01T00:00:00Z",
          "--config.entrypoint=/pause",
          "--config.user=65535:65535",
          `--config.label=org.opencontainers.image.title=pause (Kubernetes ${KUBE_VERSION} build/pause/linux/pause.c)`,
        ]);
        await run("umoci", ["gc", "--layout", layout]);
        await run("tar", [...REPRODUCIBLE_TAR, "-C", layout, "-cf", join(tmp, "pause.oci.tar"), "."]);
        await rm(join(tmp, "root"), { recursive: true, force: true });
        await rm(layout, { recursive: true, force: true });
        await rm(join(tmp, "layer.tar"), { force: true });
        await writeFile(join(tmp, "built"), new Date().toISOString());
        await rm(dir, { recursive: true, force: true });
        await rename(tmp, dir);
        log(`built the pod sandbox image ${image.name} into ${dir}`);
      } finally {
        await rm(tmp, { recursive: true, force: true });
      }
    },
    log,
  );
  return image;
}

export const KRANE_LOCAL_REPOSITORY = "krane.local/krane";
export const HELLO_REPOSITORY = "krane.local/hello";
/** The hello image's tags: the same app, reporting different image names (a new image to roll out). */
export const HELLO_TAGS = ["v1", "v2"] as const;

/** How many builds of the workload images the cache keeps. */
const KEEP = 3;

export interface WorkloadImages {
  /** krane's image (ctrl, the agent, the sentinel) as nodes know it, e.g. krane.local/krane:0.1.0-ab12cd34ef56. */
  readonly krane: NodeImage & { readonly name: string; readonly tag: string };
  /** The hello app: krane.local/hello:v1 and :v2. */
  readonly hello: NodeImage & { readonly names: readonly string[] };
  /** Seconds the build took (0 when it came from the cache). */
  readonly buildSeconds: number;
}

async function prune(keep: string): Promise<void> {
  const dirs: { path: string; mtime: number }[] = [];
  for (const name of await readdir(imagesDir()).catch(() => [] as string[])) {
    if (!/^workloads-[0-9a-f]+$/.test(name)) continue;
    const path = join(imagesDir(), name);
    if (path === keep) continue;
    dirs.push({ path, mtime: (await stat(path)).mtimeMs });
  }
  dirs.sort((a, b) => b.mtime - a.mtime);
  for (const d of dirs.slice(KEEP - 1)) await rm(d.path, { recursive: true, force: true });
}

/** Builds (or finds) krane's image and the hello image for the checkout as it is now. */
export async function workloadImages(log: (line: string) => void = () => {}): Promise<WorkloadImages> {
  if (!isCheckout())
    throw new Error(
      "krane's image for real nodes is built from a checkout (scripts/build-image.sh); this krane runs from a package",
    );
  const key = workingTreeDigest().slice(0, 12);
  const dir = join(imagesDir(), `workloads-${key}`);
  const version = (JSON.parse(await readFile(join(REPO, "package.json"), "utf8")) as { version: string }).version;
  const tag = `${version}-${key}`;
  const images = (buildSeconds: number): WorkloadImages => ({
    krane: {
      archive: join(dir, `krane-${tag}.oci.tar`),
      repository: KRANE_LOCAL_REPOSITORY,
      name: `${KRANE_LOCAL_REPOSITORY}:${tag}`,
      tag,
    },
    hello: {
      archive: join(dir, "hello.oci.tar"),
      repository: HELLO_REPOSITORY,
      names: HELLO_TAGS.map((t) => `${HELLO_REPOSITORY}:${t}`),
    },
    buildSeconds,
  });
  if (existsSync(join(dir, "built"))) return images(0);
  await mkdir(imagesDir(), { recursive: true });
  let seconds = 0;
  await withLock(
    `${dir}.lock`,
    async () => {
      if (existsSync(join(dir, "built"))) return;
      const started = Date.now();
      log(
        `building krane's image and the hello image from the checkout (${key}); later runs of the same sources reuse them`,
      );
      const tmp = await mkdtemp(`${dir}.tmp-`);
      try {
        const { tarball } = packWorkingTree(tmp);
        await run(
          "bash",
          [
            join(REPO, "scripts", "build-image.sh"),
            "--package",
            tarball,
            "--out",
            join(tmp, "out"),
            "--tag",
            tag,
            "--native-from",
            REPO,
            "--layer-cache",
            join(imagesDir(), "layers"),
            "--hello",
          ],
          { maxBuffer: 64 * 1024 * 1024, timeout: 30 * 60_000 },
        ).catch((err: unknown) => {
          const e = err as { stderr?: string; message: string };
          throw new Error(
            `building the images failed: ${(e.stderr || e.message).trim().split("\n").slice(-15).join("\n")}`,
          );
        });
        await mkdir(join(tmp, "images"));
        await rename(join(tmp, "out", `krane-${tag}.oci.tar`), join(tmp, "images", `krane-${tag}.oci.tar`));
        await rename(join(tmp, "out", "hello.oci.tar"), join(tmp, "images", "hello.oci.tar"));
        seconds = Math.round((Date.now() - started) / 1000);
        await writeFile(join(tmp, "images", "built"), JSON.stringify({ at: new Date().toISOString(), seconds }));
        await rm(dir, { recursive: true, force: true });
        await rename(join(tmp, "images"), dir);
        log(`built krane's image (${tag}) and the hello image in ${seconds}s into ${dir}`);
      } finally {
        await rm(tmp, { recursive: true, force: true });
      }
    },
    log,
  );
  await prune(dir);
  return images(seconds);
}
