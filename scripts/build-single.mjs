// The single-file CLI: src/cli/single.ts (the user commands) and everything it loads, compiled
// with Bun's runtime into one executable that needs no Node.js, for this machine's platform:
// dist/single-file/krane-<os>-<arch> (e.g. krane-linux-x64). scripts/build.mjs calls it; why Bun
// rather than Node's single executable applications: docs/scaling.md, "The single-file CLI".
//
// --bytecode stores JavaScriptCore's bytecode beside the source, so a run parses nothing (about
// 60 ms of `krane --help` otherwise); --splitting keeps what a command imports when it runs
// (`await import(…)`: the ctrl client, `krane status`'s tables) in chunks of their own, which a
// run loads only when it needs them (about a fifth of `krane --help`'s and `krane status`'s time).
// The top-level command listing (dist/cli/commands.json) goes into the code too
// (KRANE_SINGLE_FILE_LISTING, read by src/cli/single.ts), so a run defines only its command's group. The stamp (version, commit, date) goes into the code
// (src/build-info.ts reads KRANE_SINGLE_FILE_STAMP): the executable has no files beside it. Bun
// would read .env and bunfig.toml from the working directory at start: off, so a .env in a user's
// project never sets KRANE_TOKEN behind their back.
//
// Other platforms: Bun compiles for another target (--target bun-darwin-arm64, …) only with
// that platform's Bun runtime, which it downloads, or which --compile-executable-path names (the
// binary of the npm package @oven/bun-<os>-<arch> of the same version); a release builds each
// platform's file on a machine of that platform, or passes that path (docs/running-for-real.md).
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";

/** The file name for this platform, as a release names it. */
export function singleFileName(platform = process.platform, arch = process.arch) {
  return `krane-${platform === "win32" ? "windows" : platform}-${arch}${platform === "win32" ? ".exe" : ""}`;
}

/** Bun's executable from its npm package (a devDependency), or undefined when it is not installed. */
export function bunPath() {
  try {
    const bin = join(dirname(createRequire(import.meta.url).resolve("bun/package.json")), "bin", "bun.exe");
    return existsSync(bin) ? bin : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether a module can work from inside one executable: not a native module, and not one that
 * reads files next to itself (src/build-info.ts reads its stamp from the code there).
 */
function fits(file) {
  if (/\/node_modules\/better-sqlite3\//.test(file) || file.endsWith(".node")) return false;
  if (file.endsWith("/src/build-info.ts") || !/\.(ts|js|mjs|cjs)$/.test(file)) return true;
  return !readFileSync(file, "utf8").includes("import.meta.url");
}

/**
 * Compiles the single-file CLI into `outDir` (root: the checkout; stamp: the build's version,
 * commit and date; listing: the text of dist/cli/commands.json). Returns its path.
 */
export function buildSingleFile(root, outDir, stamp, listing) {
  const bun = bunPath();
  if (!bun) throw new Error("the single-file CLI needs Bun (the devDependency bun): run npm install");
  mkdirSync(outDir, { recursive: true });
  const out = join(outDir, singleFileName());
  const meta = join(outDir, "meta.json");
  execFileSync(
    bun,
    [
      "build",
      "--compile",
      "--bytecode",
      "--splitting",
      "--format=esm",
      "--minify-syntax",
      "--minify-whitespace",
      "--no-compile-autoload-dotenv",
      "--no-compile-autoload-bunfig",
      `--define=KRANE_SINGLE_FILE_STAMP=${JSON.stringify(JSON.stringify(stamp))}`,
      `--define=KRANE_SINGLE_FILE_LISTING=${JSON.stringify(JSON.stringify(JSON.parse(listing)))}`,
      `--metafile=${meta}`,
      `--outfile=${out}`,
      join(root, "src", "cli", "single.ts"),
    ],
    { cwd: root, stdio: ["ignore", "ignore", "inherit"] },
  );
  const inputs = Object.keys(JSON.parse(readFileSync(meta, "utf8")).inputs);
  rmSync(meta);
  const unfit = inputs.filter((i) => !fits(resolve(root, i)));
  if (unfit.length > 0) {
    rmSync(out, { force: true });
    throw new Error(
      `the single-file CLI cannot hold ${unfit.join(", ")}: a native module, or a module that finds files next to itself (import.meta.url); load it only from commands of the npm package (src/cli/main.ts), not from src/cli/program.ts's user commands`,
    );
  }
  return out;
}
