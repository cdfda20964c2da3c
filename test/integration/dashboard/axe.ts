// axe-core (the npm package, version pinned in package.json) run inside a page: its source is
// evaluated through the browser's debugging protocol, which the page's Content-Security-Policy
// does not apply to (a <script> tag would be refused, as it should be).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Page } from "playwright-core";

const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/** The page's WCAG 2.1 A/AA violations, one line each ("rule: what (where)"); empty when none. */
export async function axeViolations(page: Page): Promise<string[]> {
  await page.evaluate(AXE);
  return (await page.evaluate(`
    axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] } })
      .then((r) => r.violations.map((v) => v.id + ": " + v.help + " (" + v.nodes.map((n) => n.target.join(" ")).slice(0, 3).join(", ") + ")"))
  `)) as string[];
}
