// Import-cycle check, run by `npm test` before anything else: fails when the hand-written
// TypeScript files of src/ (src/gen is generated and left out) import each other in a cycle, or
// when their folders do (folder A imports from folder B and B, directly or not, from A; a file's
// folder is the directory it is in). Type-only imports, re-exports and dynamic import() count:
// a cycle of types is still two modules that cannot be understood apart.
//
//   node scripts/check-import-cycles.mjs [root]     (root defaults to the current directory)
//
// Imports are read with TypeScript's own pre-processor (the same scan tsc does), and only
// relative specifiers are followed (`./x.js` is the file `./x.ts` or `./x.tsx`, as TypeScript
// resolves it; `./x` also x.tsx and x/index.tsx). Prints each cycle as a path and exits 1 when
// there is any; prints a one-line summary and exits 0 otherwise.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import ts from "typescript";

const root = resolve(process.argv[2] ?? ".");
const src = join(root, "src");
const generated = join(src, "gen");

function sourceFiles(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      if (path !== generated && name !== "node_modules") out.push(...sourceFiles(path));
    } else if (/\.(ts|mts|cts|tsx)$/.test(name) && !/\.d\.[cm]?ts$/.test(name)) {
      out.push(path);
    }
  }
  return out;
}

/** The file a relative specifier names, or undefined when it is not one of ours. */
function resolveSpecifier(from, spec, known) {
  const base = resolve(dirname(from), spec);
  const candidates = [
    base.replace(/\.js$/, ".ts"),
    base.replace(/\.js$/, ".tsx"),
    base.replace(/\.mjs$/, ".mts"),
    base.replace(/\.cjs$/, ".cts"),
    base.replace(/\.jsx$/, ".tsx"),
    base,
    `${base}.ts`,
    `${base}.tsx`,
    join(base, "index.ts"),
    join(base, "index.tsx"),
  ];
  return candidates.find((c) => known.has(c));
}

/** Strongly connected components with more than one node, or a node that imports itself (Tarjan). */
function cycles(graph) {
  let index = 0;
  const idx = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const out = [];
  const visit = (v) => {
    idx.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v), idx.get(w)));
      }
    }
    if (low.get(v) === idx.get(v)) {
      const comp = [];
      let w;
      do {
        w = stack.pop();
        onStack.delete(w);
        comp.push(w);
      } while (w !== v);
      if (comp.length > 1 || (graph.get(v) ?? new Set()).has(v)) out.push(comp);
    }
  };
  for (const v of [...graph.keys()].sort()) if (!idx.has(v)) visit(v);
  return out;
}

/** One concrete cycle through the component's smallest node, as a path that ends where it starts. */
function pathThrough(graph, component) {
  const members = new Set(component);
  const start = [...component].sort()[0];
  const prev = new Map([[start, null]]);
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift();
    for (const w of [...(graph.get(v) ?? [])].sort()) {
      if (w === start) {
        const path = [start];
        for (let u = v; u !== start; u = prev.get(u)) path.splice(1, 0, u);
        return [...path, start];
      }
      if (members.has(w) && !prev.has(w)) {
        prev.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start, start];
}

const files = existsSync(src) ? sourceFiles(src) : [];
const known = new Set(files);
const fileGraph = new Map();
const folderGraph = new Map();
for (const file of files) {
  const deps = new Set();
  const { importedFiles } = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
  for (const { fileName } of importedFiles) {
    if (!fileName.startsWith(".")) continue;
    const target = resolveSpecifier(file, fileName, known);
    if (target !== undefined) deps.add(target);
  }
  fileGraph.set(file, deps);
  const folder = dirname(file);
  if (!folderGraph.has(folder)) folderGraph.set(folder, new Set());
  for (const d of deps) if (dirname(d) !== folder) folderGraph.get(folder).add(dirname(d));
}

const show = (p) => relative(root, p).split(sep).join("/") || ".";
const fileCycles = cycles(fileGraph);
const folderCycles = cycles(folderGraph);
const report = (what, graph, c) => {
  const path = pathThrough(graph, c);
  const among = path.length - 1 < c.length ? ` (one of the cycles among ${[...c].sort().map(show).join(", ")})` : "";
  console.error(`${what} cycle: ${path.map(show).join(" -> ")}${among}`);
};
for (const c of fileCycles) report("file", fileGraph, c);
for (const c of folderCycles) report("folder", folderGraph, c);
if (fileCycles.length + folderCycles.length > 0) {
  console.error(
    `import cycles: ${fileCycles.length} among files, ${folderCycles.length} among folders (${files.length} files checked)`,
  );
  process.exit(1);
}
console.log(`import cycles: none among ${files.length} files in ${folderGraph.size} folders of src/`);
