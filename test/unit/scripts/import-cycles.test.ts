// Unit tests of scripts/check-import-cycles.mjs (the first step of `npm test`) on small source
// trees written to a temporary directory: it passes a tree without cycles (and ignores src/gen),
// and fails naming the path for a cycle among files — through type-only imports, re-exports and
// dynamic import() too, and among .tsx files imported as "./x.js" — and for a cycle among folders that no file cycle explains. And this
// repository's src/ has none.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, it } from "node:test";

const SCRIPT = join(process.cwd(), "scripts", "check-import-cycles.mjs");
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function check(files: Record<string, string>): { code: number; out: string } {
  const root = mkdtempSync(join(tmpdir(), "krane-cycles-"));
  dirs.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  const res = spawnSync(process.execPath, [SCRIPT, root], { encoding: "utf8" });
  return { code: res.status ?? -1, out: `${res.stdout}${res.stderr}` };
}

describe("import-cycle check", () => {
  it("passes a tree whose files and folders import one way; ignores src/gen and packages", () => {
    const r = check({
      "src/a/one.ts":
        'import { two } from "./two.js";\nimport { x } from "../b/x.js";\nimport pg from "pg";\nexport const one = two + x + String(pg);\n',
      "src/a/two.ts": "export const two = 2;\n",
      "src/b/x.ts": 'export const x = 1;\nimport "node:fs";\n',
      "src/gen/p.ts": 'import { q } from "./q.js";\nexport const p = q;\n',
      "src/gen/q.ts": 'import { p } from "./p.js";\nexport const q = p;\n',
    });
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /none among 3 files in 2 folders/);
  });

  it("fails on a cycle among files, also through type-only imports, naming its path", () => {
    const r = check({
      "src/a.ts": 'import type { B } from "./b.js";\nexport type A = { b?: B };\n',
      "src/b.ts": 'import type { A } from "./a.js";\nexport type B = { a?: A };\n',
      "src/c.ts": 'import type { A } from "./a.js";\nexport type C = A;\n',
    });
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /file cycle: src\/a\.ts -> src\/b\.ts -> src\/a\.ts/);
    assert.match(r.out, /1 among files, 0 among folders/);
  });

  it("follows re-exports, dynamic import() and index files", () => {
    const r = check({
      "src/a.ts": 'export * from "./lib/index.js";\n',
      "src/lib/index.ts": 'export async function load() { return import("../c.js"); }\n',
      "src/c.ts": 'import { load } from "./a.js";\nexport const c = load;\n',
    });
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /file cycle: src\/a\.ts -> src\/lib\/index\.ts -> src\/c\.ts -> src\/a\.ts/);
    assert.match(r.out, /folder cycle: src -> src\/lib -> src/);
  });

  it("resolves a .js specifier to a .tsx file too (the dashboard's JSX files)", () => {
    const r = check({
      "src/ui/page.tsx":
        'import { Tab } from "./tab.js";\nexport type Ref = { id: string };\nexport const page = Tab;\n',
      "src/ui/tab.tsx": 'import type { Ref } from "./page.js";\nexport const Tab = (r: Ref) => r.id;\n',
      "src/ui/widgets/index.tsx": 'import { page } from "../page";\nexport const w = page;\n',
      "src/ui/use.tsx": 'import { w } from "./widgets";\nexport const u = w;\n',
    });
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /file cycle: src\/ui\/page\.tsx -> src\/ui\/tab\.tsx -> src\/ui\/page\.tsx/);
    // An extensionless specifier names x.tsx or x/index.tsx: the folder's back edge is seen.
    const folders = check({
      "src/ui/use.tsx": 'import { w } from "./widgets";\nexport const u = w;\n',
      "src/ui/widgets/index.tsx": 'import { x } from "../x";\nexport const w = x;\n',
      "src/ui/x.tsx": "export const x = 1;\n",
    });
    assert.equal(folders.code, 1, folders.out);
    assert.match(folders.out, /folder cycle: src\/ui -> src\/ui\/widgets -> src\/ui/);
  });

  it("fails on a cycle among folders that no file cycle explains", () => {
    const r = check({
      "src/x/a.ts": 'import { b } from "../y/b.js";\nexport const a = b;\n',
      "src/y/b.ts": "export const b = 1;\n",
      "src/y/c.ts": 'import { d } from "../x/d.js";\nexport const c = d;\n',
      "src/x/d.ts": "export const d = 1;\n",
    });
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /folder cycle: src\/x -> src\/y -> src\/x/);
    assert.match(r.out, /0 among files, 1 among folders/);
  });

  it("finds none in this repository's src/", () => {
    const res = spawnSync(process.execPath, [SCRIPT], { encoding: "utf8" });
    assert.equal(res.status, 0, `${res.stdout}${res.stderr}`);
  });
});
