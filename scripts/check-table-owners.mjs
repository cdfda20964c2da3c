// Table-owner check, run by `npm test`: every table of ctrl's database is written by its owner
// only. The owners are the table "Who writes each table" in src/ctrl/README.md (table names in
// the first column, the owning files — relative to src/ctrl — in the second); this script holds
// the code to it:
//   - every table of `Database` in src/ctrl/db/schema.ts has an owner, and every owner file exists;
//   - every Kysely write (`insertInto`, `updateTable`, `deleteFrom`, `replaceInto`, `mergeInto`)
//     in src/ names its table as a string literal (so it can be checked) and stands in the
//     table's owner;
//   - so does every write spelled out as SQL text (INSERT INTO t, UPDATE t SET, DELETE FROM t) in a
//     string or template literal, for the tables listed.
// Migrations (src/ctrl/db/migrations) are left out: they are the schema's history, not live writes.
//
//   node scripts/check-table-owners.mjs [root]     (root defaults to the current directory)
//
// Sources are parsed with TypeScript's own parser. Prints each violation as file:line and exits 1
// when there is any; prints a one-line summary and exits 0 otherwise.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve, sep } from "node:path";
import { pathToFileURL } from "node:url";
import ts from "typescript";

const WRITES = new Set(["insertInto", "updateTable", "deleteFrom", "replaceInto", "mergeInto"]);
const SQL_WRITE = /\b(?:insert\s+into|delete\s+from|update)\s+"?([a-z_][a-z0-9_]*)"?(\s+set\b)?/gi;
const SECTION = "## Who writes each table";

const posix = (p) => p.split(sep).join("/");

function sourceFiles(dir, skip) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      if (!skip.includes(path) && name !== "node_modules") out.push(...sourceFiles(path, skip));
    } else if (/\.(ts|mts|cts)$/.test(name) && !/\.d\.[cm]?ts$/.test(name)) {
      out.push(path);
    }
  }
  return out;
}

/** The owner map of the README's section: table → owner files (relative to src/ctrl). */
export function parseOwners(markdown) {
  const owners = new Map();
  const start = markdown.indexOf(SECTION);
  if (start < 0) return owners;
  const rest = markdown.slice(start + SECTION.length);
  const end = rest.search(/\n#{1,2} /);
  for (const line of (end < 0 ? rest : rest.slice(0, end)).split("\n")) {
    const cells = line.split("|").map((c) => c.trim());
    if (cells.length < 4 || !cells[1].includes("`")) continue;
    const ticked = (cell) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
    const files = ticked(cells[2]);
    for (const table of ticked(cells[1])) owners.set(table, files);
  }
  return owners;
}

/** The table names of `interface Database` in schema.ts. */
export function schemaTables(text) {
  const sf = ts.createSourceFile("schema.ts", text, ts.ScriptTarget.Latest, true);
  const tables = [];
  sf.forEachChild((n) => {
    if (ts.isInterfaceDeclaration(n) && n.name.text === "Database")
      for (const m of n.members) if (m.name && ts.isIdentifier(m.name)) tables.push(m.name.text);
  });
  return tables;
}

/** Every write in one source file: { table | null (not a literal), line, how }. */
export function writesIn(fileName, text, knownTables) {
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const out = [];
  const lineOf = (node) => sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
  const sqlText = (node, s) => {
    for (const m of s.matchAll(SQL_WRITE)) {
      const table = m[1].toLowerCase();
      const isUpdate = /^update/i.test(m[0]);
      if (isUpdate && !m[2]) continue;
      if (knownTables.has(table)) out.push({ table, line: lineOf(node), how: "SQL text" });
    }
  };
  const visit = (node) => {
    if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression)) {
      const name = node.expression.name.text;
      if (WRITES.has(name)) {
        const arg = node.arguments[0];
        const table =
          arg && (ts.isStringLiteral(arg) || ts.isNoSubstitutionTemplateLiteral(arg))
            ? arg.text.split(/\s+as\s+/i)[0].trim()
            : null;
        out.push({ table, line: lineOf(node), how: name });
      }
    }
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) sqlText(node, node.text);
    else if (ts.isTemplateExpression(node))
      sqlText(node, [node.head.text, ...node.templateSpans.map((s) => s.literal.text)].join(" ? "));
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

/** The violations of a tree (an empty list when every table is written by its owner only). */
export function checkTableOwners(root) {
  const src = join(root, "src");
  const ctrl = join(src, "ctrl");
  const problems = [];
  const readme = join(ctrl, "README.md");
  const owners = existsSync(readme) ? parseOwners(readFileSync(readme, "utf8")) : new Map();
  if (owners.size === 0) problems.push(`src/ctrl/README.md: no "${SECTION}" table`);
  const schema = join(ctrl, "db", "schema.ts");
  const tables = existsSync(schema) ? schemaTables(readFileSync(schema, "utf8")) : [];
  for (const t of tables) if (!owners.has(t)) problems.push(`src/ctrl/db/schema.ts: table "${t}" has no owner`);
  for (const [t, files] of owners) {
    if (files.length === 0) problems.push(`src/ctrl/README.md: table "${t}" names no owner file`);
    for (const f of files)
      if (!existsSync(join(ctrl, f))) problems.push(`src/ctrl/README.md: table "${t}": owner ${f} does not exist`);
  }
  const known = new Set([...tables, ...owners.keys()]);
  const files = existsSync(src) ? sourceFiles(src, [join(src, "gen"), join(ctrl, "db", "migrations")]) : [];
  let writes = 0;
  for (const file of files) {
    const where = posix(relative(root, file));
    const asOwner = posix(relative(ctrl, file));
    for (const w of writesIn(file, readFileSync(file, "utf8"), known)) {
      writes++;
      if (w.table === null) {
        problems.push(
          `${where}:${w.line}: ${w.how} with a table name that is not a literal (write it out, so its owner can be checked)`,
        );
        continue;
      }
      const allowed = owners.get(w.table);
      if (allowed === undefined)
        problems.push(`${where}:${w.line}: writes table "${w.table}" (${w.how}), which has no owner`);
      else if (!allowed.includes(asOwner))
        problems.push(
          `${where}:${w.line}: writes table "${w.table}" (${w.how}); only its owner may: ${allowed.join(", ")}`,
        );
    }
  }
  return { problems, tables: known.size, files: files.length, writes };
}

if (import.meta.url === pathToFileURL(resolve(process.argv[1] ?? "")).href) {
  const { problems, tables, files, writes } = checkTableOwners(resolve(process.argv[2] ?? "."));
  for (const p of problems) console.error(p);
  if (problems.length > 0) {
    console.error(`table owners: ${problems.length} violation(s)`);
    process.exit(1);
  }
  console.log(
    `table owners: ${writes} writes in ${files} files of src/, each by the owner of its table (${tables} tables)`,
  );
}
