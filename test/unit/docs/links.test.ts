// Every link in README.md, docs/ and the folder READMEs resolves: a relative link names a file or
// folder of this repository, and a #fragment into a markdown file names one of its headings (as
// GitHub makes their anchors). Repository paths written in backticks (`src/…`, `bench/…`) must
// exist too, since the docs name files that way. External links are not fetched.
import assert from "node:assert/strict";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve, sep } from "node:path";
import { after, describe, it } from "node:test";

/** Folders whose markdown is checked, besides README.md at the root. */
const ROOTS = ["docs", "src", "deploy", "tools", "bench", "test", "scripts"];
/** First segments of the repository paths checked when written in backticks. */
const PATH_HEADS = ["src", "test", "deploy", "tools", "bench", "scripts", "proto", "docs", "bin"];

/** The markdown files checked under `root`, relative to it. */
function markdownFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(join(root, dir)).sort()) {
      if (name.startsWith(".") || name === "node_modules") continue;
      const rel = dir === "" ? name : join(dir, name);
      if (statSync(join(root, rel)).isDirectory()) walk(rel);
      else if (name.endsWith(".md")) out.push(rel);
    }
  };
  if (existsSync(join(root, "README.md"))) out.push("README.md");
  for (const r of ROOTS) if (existsSync(join(root, r))) walk(r);
  return out;
}

/** The text with fenced code blocks blanked (their lines kept, so line numbers stay right). */
function withoutFences(text: string): string {
  let fence: string | undefined;
  return text
    .split("\n")
    .map((line) => {
      const m = /^\s*(`{3,}|~{3,})/.exec(line);
      if (fence === undefined) {
        if (m?.[1]) fence = m[1];
        return m ? "" : line;
      }
      if (m?.[1] && m[1][0] === fence[0] && m[1].length >= fence.length) fence = undefined;
      return "";
    })
    .join("\n");
}

/** GitHub's anchor for a heading: its text lowercased, punctuation dropped, spaces to '-'. */
function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1") // a link or image: its text
    .replace(/`([^`]*)`/g, "$1")
    .replace(/<[^>]+>/g, "")
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "").replace(/ /g, "-");
}

/** Every anchor a markdown file offers: its headings' (a repeated one gets -1, -2 …) and HTML ids. */
function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of withoutFences(text).split("\n")) {
    const h = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(line);
    if (h?.[1] !== undefined) {
      const base = slug(h[1]);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      anchors.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of line.matchAll(/<a\s[^>]*(?:name|id)="([^"]+)"/g)) if (m[1]) anchors.add(m[1]);
  }
  return anchors;
}

interface Link {
  line: number;
  target: string;
}

/** The link targets of a markdown text: inline links and images, reference definitions, HTML href/src. */
function linksOf(text: string): Link[] {
  const out: Link[] = [];
  withoutFences(text)
    .split("\n")
    .forEach((raw, i) => {
      const line = raw.replace(/`[^`]*`/g, "``"); // a code span is not a link, but may be a link's text
      for (const m of line.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g))
        if (m[1]) out.push({ line: i + 1, target: m[1] });
      const def = /^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(line);
      if (def?.[1]) out.push({ line: i + 1, target: def[1] });
      for (const m of line.matchAll(/\s(?:href|src)="([^"]+)"/g)) if (m[1]) out.push({ line: i + 1, target: m[1] });
    });
  return out;
}

/** Repository paths written in backticks (`src/ctrl/db/store.ts`, `bench/`), with their lines. */
function codePathsOf(text: string): Link[] {
  const out: Link[] = [];
  const heads = PATH_HEADS.join("|");
  const pathRe = new RegExp(`(?:^|[\\s(=])((?:${heads})/[A-Za-z0-9_./-]*)`, "g");
  withoutFences(text)
    .split("\n")
    .forEach((line, i) => {
      for (const span of line.matchAll(/`([^`]+)`/g)) {
        const code = span[1] ?? "";
        if (/[<*{$…]/.test(code)) continue; // a pattern or placeholder, not a path
        for (const m of ` ${code}`.matchAll(pathRe)) {
          const path = (m[1] ?? "").replace(/[.,:;)]+$/, "");
          out.push({ line: i + 1, target: path });
        }
      }
    });
  return out;
}

/** Every broken link and missing backticked path under `root`, as "file:line: what". */
function checkLinks(root: string): string[] {
  const problems: string[] = [];
  const anchorCache = new Map<string, Set<string>>();
  const anchors = (abs: string): Set<string> => {
    let a = anchorCache.get(abs);
    if (!a) {
      a = anchorsOf(readFileSync(abs, "utf8"));
      anchorCache.set(abs, a);
    }
    return a;
  };
  const absRoot = resolve(root);
  for (const file of markdownFiles(root)) {
    const abs = join(absRoot, file);
    const text = readFileSync(abs, "utf8");
    for (const { line, target } of linksOf(text)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto: … are not fetched
      const hash = target.indexOf("#");
      const pathPart = decodeURI(hash < 0 ? target : target.slice(0, hash));
      const fragment = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
      const dest =
        pathPart === "" ? abs : pathPart.startsWith("/") ? join(absRoot, pathPart) : resolve(dirname(abs), pathPart);
      const where = `${file}:${line}`;
      if (dest !== absRoot && !dest.startsWith(absRoot + sep)) {
        problems.push(`${where}: ${target} leaves the repository`);
        continue;
      }
      if (!existsSync(dest)) {
        problems.push(`${where}: ${target}: no such file (${relative(absRoot, dest)})`);
        continue;
      }
      if (fragment !== undefined && dest.endsWith(".md") && !anchors(dest).has(fragment))
        problems.push(`${where}: ${target}: no heading with anchor #${fragment} in ${relative(absRoot, dest)}`);
    }
    for (const { line, target } of codePathsOf(text)) {
      if (!existsSync(join(absRoot, target)) && !existsSync(join(dirname(abs), target)))
        problems.push(`${file}:${line}: \`${target}\`: no such file or folder`);
    }
  }
  return problems;
}

describe("GitHub's heading anchors", () => {
  it("lowercase the text, drop punctuation, turn spaces into dashes", () => {
    assert.equal(slug("Delivery against the database's own limit"), "delivery-against-the-databases-own-limit");
    assert.equal(slug("Gateways and HTTP/2"), "gateways-and-http2");
    assert.equal(slug("`krane status` with its own JSON client"), "krane-status-with-its-own-json-client");
    assert.equal(slug("Local traffic (a test and dev harness)"), "local-traffic-a-test-and-dev-harness");
    assert.equal(slug("Real nodes: how fast a new container serves"), "real-nodes-how-fast-a-new-container-serves");
    assert.equal(slug("a_b — c"), "a_b--c");
  });
});

describe("the link check", () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  function tree(files: Record<string, string>): string {
    const root = mkdtempSync(join(tmpdir(), "krane-links-"));
    dirs.push(root);
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), text);
    }
    return root;
  }

  it("passes links to files, folders and headings, and skips external links and code", () => {
    const root = tree({
      "README.md": [
        "# krane",
        "[use](docs/using.md#the-cli) [again](docs/using.md#the-cli-1) [here](#krane) [src](src/) [web](https://example.com/x)",
        "![shot](docs/dashboard/a.png) `src/a.ts` and `src/<name>.ts`",
        "```sh",
        "[not a link](nowhere.md) `bench/nowhere.ts`",
        "```",
        "`[nor this](nowhere.md)`",
      ].join("\n"),
      "docs/using.md": "# Using\n\n## The CLI\n\n## The CLI\n\n[back](../README.md#krane)\n",
      "docs/dashboard/a.png": "",
      "src/a.ts": "",
    });
    assert.deepEqual(checkLinks(root), []);
  });

  it("names each broken link, anchor and backticked path with its file and line", () => {
    const root = tree({
      "README.md": "# krane\n\n[gone](docs/gone.md) [anchor](docs/using.md#nope)\n[self](#nope) `bench/gone.ts`\n",
      "docs/using.md": "# Using\n[up](../../outside.md)\n",
    });
    assert.deepEqual(checkLinks(root), [
      "README.md:3: docs/gone.md: no such file (docs/gone.md)",
      "README.md:3: docs/using.md#nope: no heading with anchor #nope in docs/using.md",
      "README.md:4: #nope: no heading with anchor #nope in README.md",
      "README.md:4: `bench/gone.ts`: no such file or folder",
      "docs/using.md:2: ../../outside.md leaves the repository",
    ]);
  });
});

describe("this repository's docs", () => {
  it("has every link in README.md, docs/ and the folder READMEs resolving", () => {
    const files = markdownFiles(".");
    assert.ok(files.includes("README.md") && files.some((f) => f.startsWith(`docs${sep}`)), "no docs found");
    assert.deepEqual(checkLinks("."), []);
  });

  it("keeps README.md under 25 KB", () => {
    const size = statSync("README.md").size;
    assert.ok(size < 25 * 1024, `README.md is ${size} bytes`);
  });
});
