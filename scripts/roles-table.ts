// Writes the table of what each role may call (src/ctrl/auth/roles-table.ts) into
// docs/running-for-real.md from the protos' policies; `--check` only says whether it is current
// (test/unit/docs/roles-table.test.ts checks the same in `npm test`).
//
//   npm run roles-table [-- --check]
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { API_SERVICES } from "../src/client/services.js";
import { renderTable, tableBlock } from "../src/ctrl/auth/roles-table.js";

const DOC = join(import.meta.dirname, "..", "docs", "running-for-real.md");
const doc = readFileSync(DOC, "utf8");
const block = tableBlock(doc);
if (block === undefined) {
  console.error(`${DOC}: no roles table markers`);
  process.exit(1);
}
const table = renderTable(Object.values(API_SERVICES));
if (block === table) {
  console.log("roles table: current");
} else if (process.argv.includes("--check")) {
  console.error("roles table: out of date (npm run roles-table)");
  process.exit(1);
} else {
  writeFileSync(DOC, doc.replace(block, table));
  console.log(`roles table: written to ${DOC}`);
}
