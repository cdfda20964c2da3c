// Unit tests of scripts/check-table-owners.mjs (run by `npm test`) on small trees written to a
// temporary directory: it passes when each table is written by its owner only (Kysely calls and
// SQL text), and fails naming the file and line for a write outside the owner, a table name it
// cannot read, a table with no owner, and an owner file that does not exist. And this
// repository's src/ passes.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, it } from "node:test";
import { checkTableOwners } from "../../../scripts/check-table-owners.mjs";

const SCRIPT = join(process.cwd(), "scripts", "check-table-owners.mjs");
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const SCHEMA = `export interface Database {\n  widgets: { id: string };\n  gadgets: { id: string };\n}\n`;
const README = (rows: string): string =>
  `# ctrl\n\n## Who writes each table\n\n| tables | owner |\n| --- | --- |\n${rows}\n\n## Next\n\n| \`not\` | \`a/row.ts\` |\n`;
const OWNERS = "| `widgets` | `domain/widgets.ts` |\n| `gadgets` | `domain/gadgets.ts`, `db/raw.ts` |";
const WIDGETS = `export async function add(db: any) {\n  await db.insertInto("widgets").values({ id: "1" }).execute();\n  await db.updateTable("widgets as w").set({ id: "2" }).execute();\n}\n`;
const GADGETS = `export async function drop(db: any) {\n  await db.deleteFrom("gadgets").execute();\n}\n`;
const RAW = `const SQL = 'insert into "gadgets" (id) values (?)';\nexport const q = (id: string) => \`UPDATE gadgets SET id = \${id}\`;\n`;

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "krane-owners-"));
  dirs.push(root);
  const tree: Record<string, string> = {
    "src/ctrl/README.md": README(OWNERS),
    "src/ctrl/db/schema.ts": SCHEMA,
    "src/ctrl/domain/widgets.ts": WIDGETS,
    "src/ctrl/domain/gadgets.ts": GADGETS,
    "src/ctrl/db/raw.ts": RAW,
    ...files,
  };
  for (const [path, text] of Object.entries(tree)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

/** The check run in this process (TypeScript's parser loads once for all the cases). */
function check(files: Record<string, string>): { code: number; out: string } {
  const { problems, writes, files: n } = checkTableOwners(tree(files));
  return {
    code: problems.length > 0 ? 1 : 0,
    out: problems.length > 0 ? problems.join("\n") : `table owners: ${writes} writes in ${n} files`,
  };
}

describe("table-owner check", () => {
  it("passes when every write is its table owner's, and reads anywhere are fine", () => {
    const r = check({
      "src/ctrl/api/read.ts": `export const read = (db: any) => db.selectFrom("widgets").selectAll().execute();\n`,
      // Words like "update" in prose are not SQL.
      "src/ctrl/api/words.ts": `export const msg = "update the widgets, then delete from the list";\n`,
      // Migrations are the schema's history, not live writes.
      "src/ctrl/db/migrations/0001_x.ts": `export const up = (db: any) => db.insertInto("widgets").values({}).execute();\n`,
    });
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /table owners: 5 writes in \d+ files/);
  });

  it("fails on a Kysely write outside the owner, naming file, line and owner", () => {
    const r = check({
      "src/ctrl/rollout/sneaky.ts": `export async function f(tx: any) {\n  await tx.trx\n    .updateTable("widgets")\n    .set({ id: "x" })\n    .execute();\n}\n`,
    });
    assert.equal(r.code, 1);
    assert.match(
      r.out,
      /src\/ctrl\/rollout\/sneaky\.ts:2: writes table "widgets" \(updateTable\); only its owner may: domain\/widgets\.ts/,
    );
  });

  it("fails on SQL text writing a table outside its owner", () => {
    const r = check({ "src/ctrl/api/raw.ts": `export const s = "DELETE FROM widgets WHERE id = ?";\n` });
    assert.equal(r.code, 1);
    assert.match(r.out, /src\/ctrl\/api\/raw\.ts:1: writes table "widgets" \(SQL text\)/);
  });

  it("fails on a table name that is not a literal", () => {
    const r = check({
      "src/ctrl/domain/widgets.ts": `${WIDGETS}export const any = (db: any, t: string) => db.deleteFrom(t).execute();\n`,
    });
    assert.equal(r.code, 1);
    assert.match(r.out, /domain\/widgets\.ts:5: deleteFrom with a table name that is not a literal/);
  });

  it("fails on a table without an owner, a write to it, and an owner file that is missing", () => {
    const r = check({
      "src/ctrl/README.md": README("| `widgets` | `domain/widgets.ts` |\n| `gizmos` | `domain/gizmos.ts` |"),
    });
    assert.equal(r.code, 1);
    assert.match(r.out, /schema\.ts: table "gadgets" has no owner/);
    assert.match(r.out, /domain\/gadgets\.ts:2: writes table "gadgets" \(deleteFrom\), which has no owner/);
    assert.match(r.out, /table "gizmos": owner domain\/gizmos\.ts does not exist/);
  });

  it("fails when the README has no owner table", () => {
    const r = check({ "src/ctrl/README.md": "# ctrl\n" });
    assert.equal(r.code, 1);
    assert.match(r.out, /no "## Who writes each table" table/);
  });

  it("as a command: exits 1 on a violation, and passes on this repository", () => {
    const bad = spawnSync(
      process.execPath,
      [SCRIPT, tree({ "src/ctrl/api/raw.ts": `export const s = "DELETE FROM widgets";\n` })],
      {
        encoding: "utf8",
      },
    );
    assert.equal(bad.status, 1);
    assert.match(bad.stderr, /table owners: 1 violation/);
    const res = spawnSync(process.execPath, [SCRIPT], { encoding: "utf8" });
    assert.equal(res.status, 0, `${res.stdout}${res.stderr}`);
    assert.match(res.stdout, /each by the owner of its table/);
  });
});
