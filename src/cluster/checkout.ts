// The checkout krane runs from, packed as `npm pack` would pack it (tracked and new files, not
// ignored ones), in a copy so that its build (prepack) never swaps dist/ under processes running
// from the checkout. Krane's own image is built from such a package (./images.ts; the package
// and image tests pack the same way).
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, readFileSync, symlinkSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO = fileURLToPath(new URL("../../", import.meta.url));

/** True when krane runs from a git checkout (where its image can be built). */
export function isCheckout(): boolean {
  return existsSync(join(REPO, ".git")) && existsSync(join(REPO, "scripts", "build-image.sh"));
}

/** The checkout's commit as the build stamps it ("unknown" outside git). */
export function repoCommit(): string {
  try {
    return execFileSync("git", ["rev-parse", "--short=12", "HEAD"], { cwd: REPO, encoding: "utf8" }).trim();
  } catch {
    return "unknown";
  }
}

/** The files `npm pack` of the working tree starts from. */
function workingTreeFiles(): string[] {
  return execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    cwd: REPO,
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  })
    .split("\0")
    .filter((f) => f && existsSync(join(REPO, f)));
}

/**
 * Whether a file of the working tree decides what `npm pack` and the image build produce: the
 * package's `files` (dist/ is built from src/), its manifest and lockfile, and the build scripts.
 */
function packedInput(file: string, files: readonly string[]): boolean {
  if (["package.json", "package-lock.json", "tsconfig.json"].includes(file) || file.startsWith("scripts/")) return true;
  return files.some((entry) => {
    const e = entry === "dist/" ? "src/" : entry;
    return e.endsWith("/") ? file.startsWith(e) : file === e;
  });
}

/** A digest of what the package is made of (names and contents): equal inputs pack alike. */
export function workingTreeDigest(): string {
  const pkg = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { files?: string[] };
  const h = createHash("sha256");
  for (const f of workingTreeFiles()
    .filter((x) => packedInput(x, pkg.files ?? []))
    .sort()) {
    h.update(f).update("\0");
    h.update(readFileSync(join(REPO, f))).update("\0");
  }
  return h.digest("hex");
}

/**
 * Packs the working tree into `out`; returns the tarball's path and the commit its build was
 * stamped with.
 */
export function packWorkingTree(out: string): { tarball: string; commit: string } {
  const commit = repoCommit();
  const tree = join(out, "tree");
  for (const f of workingTreeFiles()) {
    mkdirSync(dirname(join(tree, f)), { recursive: true });
    copyFileSync(join(REPO, f), join(tree, f));
  }
  symlinkSync(join(REPO, "node_modules"), join(tree, "node_modules"));
  const name = execFileSync("npm", ["pack", "--pack-destination", out, "--silent"], {
    cwd: tree,
    encoding: "utf8",
    env: { ...process.env, KRANE_BUILD_COMMIT: commit },
    stdio: ["ignore", "pipe", "pipe"],
  })
    .trim()
    .split("\n")
    .pop();
  if (!name) throw new Error("npm pack printed no file name");
  return { tarball: join(out, name), commit };
}
