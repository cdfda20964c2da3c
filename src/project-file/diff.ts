// What a plan shows: the paths where two krane.yaml trees (tree.ts) differ. A mapping present on
// both sides is walked key by key; a key on one side only is one "added" or "removed" change
// carrying its whole value (a job, a region); lists and scalars are compared whole ("set").
// Paths are spelled as paths.ts spells them. Pure.
import { formatPath, type Segment } from "./paths.js";
import type { Tree, TreeObject } from "./tree.js";

export interface Change {
  path: string;
  op: "added" | "removed" | "set";
  before?: Tree;
  after?: Tree;
}

function isObject(v: Tree | undefined): v is TreeObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function same(a: Tree, b: Tree): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function walk(before: Tree | undefined, after: Tree | undefined, at: Segment[], out: Change[]): void {
  if (before === undefined && after === undefined) return;
  if (before === undefined) {
    out.push({ path: formatPath(at), op: "added", after });
    return;
  }
  if (after === undefined) {
    out.push({ path: formatPath(at), op: "removed", before });
    return;
  }
  if (isObject(before) && isObject(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])];
    for (const k of keys) walk(before[k], after[k], [...at, k], out);
    return;
  }
  if (!same(before, after)) out.push({ path: formatPath(at), op: "set", before, after });
}

/** The changes from `before` (null: nothing yet) to `after`, in the order the keys come. */
export function diffTrees(before: TreeObject | null, after: TreeObject | null, prefix: Segment[] = []): Change[] {
  const out: Change[] = [];
  walk(before ?? undefined, after ?? undefined, prefix, out);
  return out;
}

function show(v: Tree | undefined): string {
  return JSON.stringify(v);
}

/** A change as one line: `+ domains: [...]`, `- jobs.cleanup: {...}`, `~ deployment.port: 3000 → 3001`. */
export function changeLine(c: Change): string {
  if (c.op === "added") return `+ ${c.path}: ${show(c.after)}`;
  if (c.op === "removed") return `- ${c.path}: ${show(c.before)}`;
  return `~ ${c.path}: ${show(c.before)} → ${show(c.after)}`;
}
