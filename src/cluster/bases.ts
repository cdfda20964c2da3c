// The base images of source builds (src/contracts/builds.ts), built on this machine by
// scripts/build-bases.sh from Debian packages and the npm and Go module registries, into one OCI
// layout cached as $cache/images/bases-<key>. The key is the digest of the script and the files it
// copies in, so a changed script rebuilds and an unchanged one is built once per machine (a cold
// build is mostly downloads: about 10 minutes here, a minute of CPU).
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { GATE_MODULES, LOCAL_BUILDER_IMAGE } from "../contracts/builds.js";
import { ensureBuildkit, withLock } from "./build.js";
import { REPO } from "./checkout.js";
import { imagesDir } from "./images.js";
import type { NodeImage } from "./nodes/nodes.js";

const run = promisify(execFile);

/** What the bases are made of: the script and what it installs from the checkout. */
const INPUTS = ["scripts/build-bases.sh", "scripts/debian-rootfs.sh", "scripts/bases/static-server.mjs"];
/** And the builder image's: its script, its entry point, the gate's modules (and BuildKit's daemon). */
const BUILDER_INPUTS = [
  "scripts/build-builder.sh",
  "scripts/debian-rootfs.sh",
  "scripts/bases/builder-entry.sh",
  ...GATE_MODULES.map((m) => `dist/${m}`),
];

async function inputsKey(files: readonly string[], extra: Uint8Array = new Uint8Array()): Promise<string> {
  const h = createHash("sha256");
  for (const f of files)
    h.update(f)
      .update("\0")
      .update(await readFile(join(REPO, f)))
      .update("\0");
  return h.update(extra).digest("hex").slice(0, 12);
}

/**
 * `<script> --out <dir> ...args` once per key: its output kept in $cache/images/<dir>, built
 * under a lock (another process building it waits).
 */
async function ensureBuilt(
  script: string,
  dir: string,
  output: string,
  args: readonly string[],
  what: string,
  log: (line: string) => void,
): Promise<void> {
  if (existsSync(output)) return;
  await mkdir(imagesDir(), { recursive: true });
  await withLock(
    `${dir}.lock`,
    async () => {
      if (existsSync(output)) return;
      const tmp = await mkdtemp(`${dir}.tmp-`);
      try {
        log(`building ${what} (${script})`);
        await run("bash", [join(REPO, script), "--out", tmp, ...args], {
          maxBuffer: 64 * 1024 * 1024,
        });
        await rm(dir, { recursive: true, force: true });
        await rename(tmp, dir);
        log(`built ${what} into ${dir}`);
      } catch (err) {
        const e = err as { stderr?: string; message: string };
        throw new Error(`building ${what} failed: ${(e.stderr || e.message).trim().split("\n").slice(-15).join("\n")}`);
      } finally {
        await rm(tmp, { recursive: true, force: true });
      }
    },
    log,
  );
}

/** The OCI layout of the base images (one tag each), built on first use; needs root and the mirrors. */
export async function ensureBases(log: (line: string) => void = () => {}): Promise<string> {
  const dir = join(imagesDir(), `bases-${await inputsKey(INPUTS)}`);
  const layout = join(dir, "bases");
  await ensureBuilt(
    "scripts/build-bases.sh",
    dir,
    join(layout, "index.json"),
    [],
    "the base images of source builds from Debian packages (about 10 minutes)",
    log,
  );
  return layout;
}

/**
 * The builder image (tag `builder`: Debian's runc, util-linux and BuildKit's daemon from
 * tools/buildkit, Node.js and the gate compiled in dist/, so `npm run build` first), as an
 * archive real nodes import under krane.local/builder; about 2 minutes the first time.
 */
export async function ensureBuilderImage(log: (line: string) => void = () => {}): Promise<NodeImage> {
  const { buildkitd } = await ensureBuildkit(log);
  const dir = join(imagesDir(), `builder-${await inputsKey(BUILDER_INPUTS, await readFile(buildkitd))}`);
  const archive = join(dir, "builder.oci.tar");
  await ensureBuilt(
    "scripts/build-builder.sh",
    dir,
    archive,
    ["--buildkitd", buildkitd, "--dist", join(REPO, "dist")],
    "the builder image",
    log,
  );
  return { archive, repository: LOCAL_BUILDER_IMAGE.slice(0, LOCAL_BUILDER_IMAGE.lastIndexOf(":")) };
}
