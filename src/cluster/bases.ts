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
import { withLock } from "./build.js";
import { REPO } from "./checkout.js";
import { imagesDir } from "./images.js";

const run = promisify(execFile);

/** What the bases are made of: the script and what it installs from the checkout. */
const INPUTS = ["scripts/build-bases.sh", "scripts/debian-rootfs.sh", "scripts/bases/static-server.mjs"];

async function basesKey(): Promise<string> {
  const h = createHash("sha256");
  for (const f of INPUTS)
    h.update(f)
      .update("\0")
      .update(await readFile(join(REPO, f)))
      .update("\0");
  return h.digest("hex").slice(0, 12);
}

/** The OCI layout of the base images (one tag each), built on first use; needs root and the mirrors. */
export async function ensureBases(log: (line: string) => void = () => {}): Promise<string> {
  const dir = join(imagesDir(), `bases-${await basesKey()}`);
  const layout = join(dir, "bases");
  if (existsSync(join(layout, "index.json"))) return layout;
  await mkdir(imagesDir(), { recursive: true });
  await withLock(
    `${dir}.lock`,
    async () => {
      if (existsSync(join(layout, "index.json"))) return;
      const tmp = await mkdtemp(`${dir}.tmp-`);
      try {
        log(
          "building the base images of source builds from Debian packages (scripts/build-bases.sh, about 10 minutes)",
        );
        await run("bash", [join(REPO, "scripts/build-bases.sh"), "--out", tmp], { maxBuffer: 64 * 1024 * 1024 });
        await rm(dir, { recursive: true, force: true });
        await rename(tmp, dir);
        log(`built the base images into ${layout}`);
      } catch (err) {
        const e = err as { stderr?: string; message: string };
        throw new Error(
          `building the base images failed: ${(e.stderr || e.message).trim().split("\n").slice(-15).join("\n")}`,
        );
      } finally {
        await rm(tmp, { recursive: true, force: true });
      }
    },
    log,
  );
  return layout;
}
