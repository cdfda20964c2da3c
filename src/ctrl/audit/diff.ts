// Field-level before/after diffs of what an accepted change changed. Pure.
//
// A view (./views.ts) reads what a call is about into a plain tree — objects, lists, scalars —
// where a secret or a token is a `Sensitive` leaf: a version (when it changed, where it comes
// from), never its value. The diff flattens both trees to dotted paths (`config.LOG_LEVEL`,
// `regions.eu-west`, `rollout.max_surge`) and lists the paths that differ: lists are compared whole;
// an object is a map whose keys are walked. A sensitive path is reported as added, removed or
// changed and nothing else, so no value of it (or anything derived from one) reaches the log.
import type { AuditChange, JsonValue } from "../../contracts/audit.js";

/** A secret or credential in a view: compared by `version`, shown never. */
export class Sensitive {
  constructor(readonly version: string) {}
}

export type ViewValue = JsonValue | Sensitive | ViewTree | ViewValue[];
export interface ViewTree {
  [key: string]: ViewValue | undefined;
}

type Leaf = { sensitive: false; value: JsonValue } | { sensitive: true; version: string };

function isTree(v: ViewValue): v is ViewTree {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Sensitive);
}

function toJson(v: ViewValue): JsonValue {
  if (v instanceof Sensitive) return "(sensitive)";
  if (Array.isArray(v)) return v.map(toJson);
  if (isTree(v)) {
    const out: Record<string, JsonValue> = {};
    for (const [k, x] of Object.entries(v)) if (x !== undefined) out[k] = toJson(x);
    return out;
  }
  return v;
}

function holdsSensitive(v: ViewValue): boolean {
  if (v instanceof Sensitive) return true;
  if (Array.isArray(v)) return v.some(holdsSensitive);
  if (isTree(v)) return Object.values(v).some((x) => x !== undefined && holdsSensitive(x));
  return false;
}

/** What a sensitive list is compared by: its shape with each secret's version in place of it. */
function versions(v: ViewValue): JsonValue {
  if (v instanceof Sensitive) return { version: v.version };
  if (Array.isArray(v)) return v.map(versions);
  if (isTree(v)) {
    const out: Record<string, JsonValue> = {};
    for (const [k, x] of Object.entries(v)) if (x !== undefined) out[k] = versions(x);
    return out;
  }
  return v;
}

/** Escapes a key so that a dot inside one (a hostname, an image) cannot be read as a level. */
function segment(key: string): string {
  return /^[A-Za-z0-9_-]+$/.test(key) ? key : JSON.stringify(key);
}

function flatten(tree: ViewValue | null, prefix: string, out: Map<string, Leaf>): void {
  if (tree === null) return;
  if (tree instanceof Sensitive) {
    out.set(prefix, { sensitive: true, version: tree.version });
    return;
  }
  if (isTree(tree)) {
    // An empty map has no paths: its first key shows up as added.
    const keys = Object.keys(tree).filter((k) => tree[k] !== undefined);
    for (const k of keys) flatten(tree[k] as ViewValue, prefix === "" ? segment(k) : `${prefix}.${segment(k)}`, out);
    return;
  }
  // A list holding a sensitive value is sensitive as a whole.
  if (holdsSensitive(tree)) {
    out.set(prefix, { sensitive: true, version: JSON.stringify(versions(tree)) });
    return;
  }
  out.set(prefix, { sensitive: false, value: toJson(tree) });
}

function same(a: JsonValue, b: JsonValue): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * What differs between two views of the same thing (null: it did not exist), in path order.
 * `prefix` names the thing in the paths (`environment`, `deployment`).
 */
export function diffViews(before: ViewTree | null, after: ViewTree | null, prefix = ""): AuditChange[] {
  const a = new Map<string, Leaf>();
  const b = new Map<string, Leaf>();
  flatten(before, prefix, a);
  flatten(after, prefix, b);
  const paths = [...new Set([...a.keys(), ...b.keys()])].sort();
  const out: AuditChange[] = [];
  for (const field of paths) {
    const x = a.get(field);
    const y = b.get(field);
    if (x?.sensitive || y?.sensitive) {
      if (x === undefined) out.push({ field, op: "added" });
      else if (y === undefined) out.push({ field, op: "removed" });
      else if (!x.sensitive || !y.sensitive || x.version !== y.version) out.push({ field, op: "changed" });
      continue;
    }
    if (x === undefined && y !== undefined) out.push({ field, op: "added", after: y.value });
    else if (y === undefined && x !== undefined) out.push({ field, op: "removed", before: x.value });
    else if (x !== undefined && y !== undefined && !same(x.value, y.value))
      out.push({ field, op: "set", before: x.value, after: y.value });
  }
  return out;
}
