// Types of check-table-owners.mjs for the TypeScript tests that import it.
export function parseOwners(markdown: string): Map<string, string[]>;
export function schemaTables(text: string): string[];
export function writesIn(
  fileName: string,
  text: string,
  knownTables: ReadonlySet<string>,
): { table: string | null; line: number; how: string }[];
export function checkTableOwners(root: string): { problems: string[]; tables: number; files: number; writes: number };
