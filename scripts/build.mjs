// `npm run build`: compiles src/ to dist/ (same layout, one ES module per file) and stamps the
// build (version, git commit, date) into dist/build-stamp.json for src/build-info.ts.
//
// esbuild transpiles each file on its own (the tsconfig's isolatedModules and
// verbatimModuleSyntax make that exact) in well under a second, where tsc takes 10–20 s here;
// type checking stays with `npm run typecheck`. Two modules of the CLI are bundled instead:
// src/cli/user-client.ts, the half of the user commands that loads when one runs (ctrl client,
// generated API, tables, status views). Per file it pulls in ~150 modules of Connect and
// protobuf; bundled it is one file, which cut `krane status`'s CPU time by about a third
// (measured with the client in the same run). It is split with the generated API modules a
// command loads when it runs (dist/cli/gen/, dist/cli/chunks/), so they share its one copy of
// protobuf-es. And src/cli/main.ts, the entry every `krane` run
// loads, with the command definitions and commander (its dynamic imports stay modules of their
// own), and src/cli/status-table.ts, `krane status`'s table form, with cli-table3. Everything
// else stays one file per module, so paths built from import.meta.url (deploy/, tools/) keep
// working; the build refuses to bundle a module that uses
// import.meta.url into user-client.js and keeps such modules out of main.js. better-sqlite3 and
// pino never get bundled. The build also writes dist/cli/commands.json, the top-level command
// listing src/cli/main.ts reads. The hello app
// (src/cluster/workload/hello-main.ts) is bundled too, into dist/cluster/workload/hello.js: it
// runs alone in the test workload image. Last, the single-file CLI: the user commands and Bun's
// runtime in one executable, dist/single-file/krane-<os>-<arch> (scripts/build-single.mjs; about
// 1.5 s of the build), which the npm package leaves out.
//
//   node scripts/build.mjs              build
//   node scripts/build.mjs --if-stale   build only when dist/ is older than src/
//
// SOURCE_DATE_EPOCH (seconds) fixes the build date for reproducible builds; KRANE_BUILD_COMMIT
// names the commit when there is no .git (a source archive).
import { execFileSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { buildSingleFile, parsePlatforms } from "./build-single.mjs";
import { buildIsFresh } from "./freshness.mjs";

const root = fileURLToPath(new URL("../", import.meta.url));
/**
 * The public API's generated modules. A user command that loads one (`await import(…)`) gets
 * dist/cli/gen/…, built together with user-client.js: loading the per-file dist/gen/… copy
 * instead would load protobuf-es a second time, as ~40 modules, and decode its descriptors again.
 */
const CLI_GEN = "src/gen/krane/ctrl/v1";

function sources(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    // The dashboard is browser code, bundled on its own below.
    if (e.isDirectory() && p === join(root, "src", "dashboard")) return [];
    if (e.isDirectory()) return sources(p);
    return p.endsWith(".ts") && !p.endsWith(".d.ts") ? [p] : [];
  });
}

function git(args) {
  try {
    return execFileSync("git", args, { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return "";
  }
}

/** The short commit, "-dirty" when tracked files differ from it; "unknown" outside git. */
function commit() {
  // A build from a source archive (no .git) can be told its commit.
  if (process.env.KRANE_BUILD_COMMIT) return process.env.KRANE_BUILD_COMMIT;
  const head = git(["rev-parse", "--short=12", "HEAD"]);
  if (!head) return "unknown";
  return git(["status", "--porcelain", "--untracked-files=no"]) ? `${head}-dirty` : head;
}

/**
 * esbuild plugin for a bundle written where its entry's per-file module goes: dynamic imports,
 * and sources other than the entry that use import.meta.url, stay imports of their per-file
 * modules (the path from the entry's folder, .ts → .js).
 */
function separateModules(entry, entryDir) {
  return {
    name: "separate-modules",
    setup(b) {
      b.onResolve({ filter: /.*/ }, (args) => {
        if (args.kind !== "dynamic-import") return undefined;
        // A generated API module a command loads: the CLI's own split copy (see CLI_GEN).
        const file = join(args.resolveDir, args.path);
        if (file.startsWith(join(root, CLI_GEN, "/")) && file.endsWith("_pb.js")) {
          return { path: `./${relative(join(root, "src"), file)}`, external: true };
        }
        return { path: args.path, external: true };
      });
      b.onResolve({ filter: /^\./ }, (args) => {
        const file = join(args.resolveDir, args.path).replace(/\.js$/, ".ts");
        if (file === entry || !file.startsWith(join(root, "src")) || !existsSync(file)) return undefined;
        if (!readFileSync(file, "utf8").includes("import.meta.url")) return undefined;
        const rel = relative(entryDir, file).replace(/\.ts$/, ".js");
        return { path: rel.startsWith(".") ? rel : `./${rel}`, external: true };
      });
    },
  };
}

/**
 * The web dashboard (src/dashboard, browser code: Preact and the Connect-Web clients of the
 * generated API) as one minified module and one stylesheet, with its page, into `out` (ctrl
 * serves dist/dashboard at /). Returns the bytes of the initial load.
 */
async function buildDashboard(out) {
  const src = join(root, "src", "dashboard");
  mkdirSync(join(out, "assets"), { recursive: true });
  await build({
    entryPoints: { main: join(src, "app", "main.tsx") },
    outdir: join(out, "assets"),
    bundle: true,
    minify: true,
    format: "esm",
    platform: "browser",
    target: ["chrome109", "firefox115", "safari16"],
    jsx: "automatic",
    jsxImportSource: "preact",
    tsconfig: join(src, "tsconfig.json"),
    legalComments: "none",
    logLevel: "warning",
  });
  await build({
    entryPoints: { main: join(src, "styles.css") },
    outdir: join(out, "assets"),
    bundle: true,
    minify: true,
    logLevel: "warning",
  });
  copyFileSync(join(src, "index.html"), join(out, "index.html"));
}

if (process.argv.includes("--if-stale") && buildIsFresh(root)) process.exit(0);
/** The single-file CLI's platforms beside this machine's (--cli-platforms all|<list>, env KRANE_CLI_PLATFORMS). */
const platformsFlag = process.argv.indexOf("--cli-platforms");
const otherPlatforms = parsePlatforms(
  platformsFlag >= 0 ? (process.argv[platformsFlag + 1] ?? "") : (process.env.KRANE_CLI_PLATFORMS ?? ""),
);

const started = performance.now();
const out = join(root, "dist");
const tmp = join(root, `dist.tmp-${process.pid}`);
rmSync(tmp, { recursive: true, force: true });
try {
  await build({
    entryPoints: sources(join(root, "src")),
    outdir: tmp,
    outbase: join(root, "src"),
    format: "esm",
    platform: "node",
    target: "node20.19",
    logLevel: "warning",
  });
  // The user commands' client half, bundled over its per-file copy, split with the API's
  // generated modules a command loads when it runs (dist/cli/gen/…, see CLI_GEN): they share
  // one copy of protobuf-es and of the generated files they import (in dist/cli/chunks/).
  const bundled = await build({
    entryPoints: {
      "user-client": join(root, "src", "cli", "user-client.ts"),
      ...Object.fromEntries(
        readdirSync(join(root, CLI_GEN))
          .filter((f) => f.endsWith("_pb.ts"))
          .map((f) => [`gen/krane/ctrl/v1/${f.replace(/\.ts$/, "")}`, join(root, CLI_GEN, f)]),
      ),
    },
    outdir: join(tmp, "cli"),
    allowOverwrite: true,
    splitting: true,
    chunkNames: "chunks/[name]-[hash]",
    bundle: true,
    // Whitespace, comments and syntax only (names stay, for stack traces): less to parse on
    // every run (measured: about 6 ms of CPU off `krane status`, 2 ms off `krane --help`).
    minifyWhitespace: true,
    minifySyntax: true,
    format: "esm",
    platform: "node",
    target: "node20.19",
    metafile: true,
    // cli-table3 is CommonJS; its require() calls need a real require in an ES module.
    banner: {
      js: 'import { createRequire as __kraneRequire } from "node:module"; const require = __kraneRequire(import.meta.url);',
    },
    logLevel: "warning",
  });
  // The hello app (the test workload image's one file, scripts/build-image.sh --hello): bundled
  // with ws, since the image holds no node_modules.
  await build({
    entryPoints: [join(root, "src", "cluster", "workload", "hello-main.ts")],
    outfile: join(tmp, "cluster", "workload", "hello.js"),
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20.19",
    external: ["bufferutil", "utf-8-validate"],
    banner: {
      js: 'import { createRequire as __kraneRequire } from "node:module"; const require = __kraneRequire(import.meta.url);',
    },
    logLevel: "warning",
  });
  await buildDashboard(join(tmp, "dashboard"));
  for (const input of Object.keys(bundled.metafile.inputs)) {
    if (!input.startsWith("src/")) continue;
    if (readFileSync(join(root, input), "utf8").includes("import.meta.url")) {
      throw new Error(
        `${input} uses import.meta.url, which would point at dist/cli/ once bundled into user-client.js; load it lazily or keep it out of src/cli/user-client.ts's imports`,
      );
    }
  }
  // The command line's entry, bundled over its per-file copy with what it imports statically
  // (the command definitions and commander): one module to load instead of ~35 for every
  // `krane` run. What a command loads when it runs stays a module of its own (dynamic imports),
  // and so does a module that finds files next to itself through import.meta.url. `krane
  // status`'s table form (src/cli/status-table.ts, loaded when it runs) is bundled the same way,
  // with its JSON client, its views and cli-table3, which it otherwise loads as CommonJS modules
  // one by one (measured: `krane status` 120–125 → 115–117 ms).
  for (const name of ["main", "status-table"]) {
    const entry = join(root, "src", "cli", `${name}.ts`);
    await build({
      entryPoints: [entry],
      outfile: join(tmp, "cli", `${name}.js`),
      allowOverwrite: true,
      bundle: true,
      format: "esm",
      platform: "node",
      target: "node20.19",
      plugins: [separateModules(entry, join(root, "src", "cli"))],
      minifyWhitespace: true,
      minifySyntax: true,
      // commander and cli-table3 are CommonJS; their require() calls need a real require in an
      // ES module.
      banner: {
        js: 'import { createRequire as __kraneRequire } from "node:module"; const require = __kraneRequire(import.meta.url);',
      },
      logLevel: "warning",
    });
  }
  // The top-level command listing (src/cli/main.ts): a run then defines in full only the group
  // of the command it runs.
  execFileSync(process.execPath, [join(tmp, "cli", "main.js")], {
    env: { ...process.env, KRANE_CLI_WRITE_LISTING: join(tmp, "cli", "commands.json") },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  const epoch = process.env.SOURCE_DATE_EPOCH;
  const date = (epoch && /^\d+$/.test(epoch) ? new Date(Number(epoch) * 1000) : new Date())
    .toISOString()
    .replace(/\.\d+Z$/, "Z");
  const stamp = { version: pkg.version, commit: commit(), date };
  // The single-file CLI (scripts/build-single.mjs): dist/single-file/krane-<os>-<arch>.
  const single = performance.now();
  const listing = readFileSync(join(tmp, "cli", "commands.json"), "utf8");
  buildSingleFile(root, join(tmp, "single-file"), stamp, listing);
  for (const platform of otherPlatforms) buildSingleFile(root, join(tmp, "single-file"), stamp, listing, platform);
  const singleMs = Math.round(performance.now() - single);
  // Written last: its time is what "fresh" is measured against.
  writeFileSync(join(tmp, "build-stamp.json"), `${JSON.stringify(stamp, null, 2)}\n`);
  rmSync(out, { recursive: true, force: true });
  renameSync(tmp, out);
  console.error(
    `built dist/ (krane ${stamp.version}, commit ${stamp.commit}) in ${Math.round(performance.now() - started)} ms (the single-file CLI ${singleMs} ms of it)`,
  );
} catch (err) {
  rmSync(tmp, { recursive: true, force: true });
  console.error(`build failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
}
