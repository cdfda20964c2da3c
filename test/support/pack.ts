// `npm pack` of the working tree as it is, done in a copy so that its build (prepack) never
// swaps dist/ under tests running from the checkout. Used by the package and image tests.
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, symlinkSync } from "node:fs";
import { dirname, join } from "node:path";

export const REPO = new URL("../../", import.meta.url).pathname;

/** The checkout's commit as the build stamps it ("unknown" outside git). */
export function repoCommit(): string {
  try {
    return execFileSync("git", ["rev-parse", "--short=12", "HEAD"], { cwd: REPO, encoding: "utf8" }).trim();
  } catch {
    return "unknown";
  }
}

/**
 * Packs the working tree (tracked and new files, not ignored ones) into `out`; returns the
 * tarball's path and the commit its build was stamped with.
 */
export function packWorkingTree(out: string): { tarball: string; commit: string } {
  const commit = repoCommit();
  const tree = join(out, "tree");
  const files = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    cwd: REPO,
    encoding: "utf8",
  })
    .split("\0")
    .filter((f) => f && existsSync(join(REPO, f)));
  for (const f of files) {
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
