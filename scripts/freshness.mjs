// Whether dist/ (the compiled build) still matches src/ in a source checkout: the build stamp
// must be newer than every source file and folder (a folder's time changes when a file in it is
// added, removed or renamed) and than package.json. bin/krane.js asks before running dist/, and
// `npm run build -- --if-stale` before building. Walks ~200 entries: a few milliseconds.
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The newest modification time (ms) under `dir`, folders included. Paths are joined with "/"
 * rather than path.join, whose normalising was two thirds of the walk's time (it runs on every
 * `krane` command in a checkout).
 */
export function newestMtime(dir) {
  let newest = statSync(dir).mtimeMs;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = `${dir}/${e.name}`;
    const t = e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs;
    if (t > newest) newest = t;
  }
  return newest;
}

/** True when `root`/dist holds a build at least as new as `root`/src and package.json. */
export function buildIsFresh(root) {
  const dir = typeof root === "string" ? root : fileURLToPath(root);
  let stamped;
  try {
    stamped = statSync(join(dir, "dist", "build-stamp.json")).mtimeMs;
  } catch {
    return false;
  }
  return stamped >= Math.max(newestMtime(join(dir, "src")), statSync(join(dir, "package.json")).mtimeMs);
}
