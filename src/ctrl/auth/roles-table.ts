// The table of what each role may call, rendered from the methods' declared policies
// (./policy.ts) into docs/running-for-real.md ("Members and roles") by scripts/roles-table.mts,
// and read back by the tests that hold the code to it (the table is the declarations, so the
// documentation cannot drift from what ctrl enforces). Pure.
import type { DescService } from "@bufbuild/protobuf";
import { ROLE_NAMES, roleOfRank, type RoleName } from "../../contracts/roles.js";
import { policyOf, Scope } from "./policy.js";

export const TABLE_BEGIN = "<!-- roles-table: generated from the protos' policies by `npm run roles-table` -->";
export const TABLE_END = "<!-- /roles-table -->";

/** What a method needs: a role of the workspace, or an installation token. */
export type Need = RoleName | "installation";

export const NEED_COLUMNS: readonly Need[] = [...ROLE_NAMES, "installation"];

/** Each public method's need, by "Service/Method" (agents' methods left out). */
export function needs(services: readonly DescService[]): Map<string, Need> {
  const out = new Map<string, Need>();
  for (const s of services)
    for (const m of s.methods) {
      const p = policyOf(m);
      if (!p) throw new Error(`${s.name}/${m.name} declares no policy`);
      if (p.scope === Scope.AGENT) continue;
      const role = roleOfRank(p.role);
      const need: Need | undefined = p.scope === Scope.INSTALLATION ? "installation" : role;
      if (need === undefined) throw new Error(`${s.name}/${m.name} declares no role`);
      out.set(`${s.name}/${m.name}`, need);
    }
  return out;
}

/**
 * One row per service, one column per role (the methods that need that role at least: each role
 * may call its own column's and those to its left), and a last column for installation tokens.
 */
export function renderTable(services: readonly DescService[]): string {
  const need = needs(services);
  const head = `| service | ${NEED_COLUMNS.map((n) => (n === "installation" ? "installation tokens only" : n)).join(" | ")} |`;
  const rule = `| ${["---", ...NEED_COLUMNS.map(() => "---")].join(" | ")} |`;
  const rows = [...services]
    .filter((s) => s.methods.some((m) => need.has(`${s.name}/${m.name}`)))
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((s) => {
      const cells = NEED_COLUMNS.map((n) =>
        s.methods
          .filter((m) => need.get(`${s.name}/${m.name}`) === n)
          .map((m) => m.name)
          .join(", "),
      );
      return `| ${s.name} | ${cells.join(" | ")} |`;
    });
  return [TABLE_BEGIN, "", head, rule, ...rows, "", TABLE_END].join("\n");
}

/** The table block of a document (begin to end marker), or undefined when it has none. */
export function tableBlock(doc: string): string | undefined {
  const a = doc.indexOf(TABLE_BEGIN);
  const b = doc.indexOf(TABLE_END);
  if (a < 0 || b < a) return undefined;
  return doc.slice(a, b + TABLE_END.length);
}

/** The needs a rendered table states, by "Service/Method": what the role matrix test checks. */
export function parseTable(block: string): Map<string, Need> {
  const out = new Map<string, Need>();
  for (const line of block.split("\n")) {
    const cells = line.split("|").map((c) => c.trim());
    // "| a | b |" splits into ["", "a", "b", ""].
    if (cells.length !== NEED_COLUMNS.length + 3) continue;
    const service = cells[1] ?? "";
    if (!/^[A-Z]\w*Service$/.test(service)) continue;
    NEED_COLUMNS.forEach((n, i) => {
      for (const m of (cells[i + 2] ?? "").split(",")) {
        const name = m.trim();
        if (name !== "") out.set(`${service}/${name}`, n);
      }
    });
  }
  return out;
}
