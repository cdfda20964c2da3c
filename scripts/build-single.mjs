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
// Other platforms: `npm run build -- --cli-platforms all` (or a list such as
// linux-arm64,darwin-arm64; env KRANE_CLI_PLATFORMS) also compiles the file for each of them with
// Bun's --target, for which Bun downloads that platform's runtime from the npm registry once (its
// cache keeps it). Only this machine's file is built by default: the others are downloads the tests
// here cannot run, which a release builds (docs/running-for-real.md, "The CLI as one file").
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";

/** The file name for this platform, as a release names it. */
export function singleFileName(platform = process.platform, arch = process.arch) {
  return `krane-${platform === "win32" ? "windows" : platform}-${arch}${platform === "win32" ? ".exe" : ""}`;
}

/** The platforms a release builds ("<os>-<arch>", as the file names say them) and Bun's target for each. */
export const PLATFORMS = {
  "linux-x64": "bun-linux-x64",
  "linux-arm64": "bun-linux-arm64",
  "darwin-x64": "bun-darwin-x64",
  "darwin-arm64": "bun-darwin-arm64",
  "windows-x64": "bun-windows-x64",
};

/** This machine's platform, as PLATFORMS names it. */
export function hostPlatform() {
  return `${process.platform === "win32" ? "windows" : process.platform}-${process.arch}`;
}

/**
 * The platforms asked for beside this machine's: "all", or a comma-separated list of PLATFORMS'
 * names. Anything else is refused, naming the flag and what it takes.
 */
export function parsePlatforms(text) {
  if (text === undefined || text === "") return [];
  const asked = text === "all" ? Object.keys(PLATFORMS) : text.split(",").map((p) => p.trim());
  for (const p of asked)
    if (!Object.hasOwn(PLATFORMS, p))
      throw new Error(
        `--cli-platforms: "${p}" is not a platform; take "all" or some of ${Object.keys(PLATFORMS).join(", ")}`,
      );
  return asked.filter((p) => p !== hostPlatform());
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
 * commit and date; listing: the text of dist/cli/commands.json; platform: one of PLATFORMS, this
 * machine's by default). Returns its path.
 */
export function buildSingleFile(root, outDir, stamp, listing, platform = hostPlatform()) {
  const bun = bunPath();
  if (!bun) throw new Error("the single-file CLI needs Bun (the devDependency bun): run npm install");
  mkdirSync(outDir, { recursive: true });
  const [os, arch] = platform.split("-");
  const out = join(outDir, singleFileName(os === "windows" ? "win32" : os, arch));
  const target = platform === hostPlatform() ? [] : [`--target=${PLATFORMS[platform]}`];
  const meta = join(outDir, "meta.json");
  execFileSync(
    bun,
    [
      "build",
      "--compile",
      ...target,
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
