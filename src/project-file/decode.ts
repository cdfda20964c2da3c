// Reading a krane.yaml: YAML text → the message it describes, or every problem with its line and
// column. The YAML is walked against the message's descriptors (the generated code's, the same
// ones ctrl decodes requests with), so an unknown key is found where it is written and named with
// the closest known key ("did you mean …"), a value of the wrong type is named with the type it
// should have, and what passes is handed to protobuf-es's own `fromJson`, which builds the
// message. What the values mean (ranges, names, references) is ctrl's validation, whose
// refusals name a path that `positionOf` finds in the same document. Pure.
import {
  fromJson,
  ScalarType,
  type DescEnum,
  type DescField,
  type DescMessage,
  type MessageShape,
} from "@bufbuild/protobuf";
import type { JsonValue } from "@bufbuild/protobuf";
import { isAlias, isMap, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node, type Pair } from "yaml";
import { formatPath, type Segment } from "./paths.js";
import { shortEnumName } from "./tree.js";

export interface Position {
  /** 1-based. */
  line: number;
  col: number;
}

export interface Problem {
  /** Where in the file's structure ("" for the file as a whole). */
  path: string;
  message: string;
  pos: Position;
}

/** A parsed YAML document with what finds positions in it. */
export interface Source {
  readonly doc: Document.Parsed;
  readonly lines: LineCounter;
}

export type Decoded<D extends DescMessage> =
  { ok: true; message: MessageShape<D>; source: Source } | { ok: false; problems: Problem[] };

/** Edit distance counting a swap of two neighbours as one edit ("prot" → "port"); small strings: keys. */
export function distance(a: string, b: string): number {
  // d[i][j]: the distance between a's first i and b's first j characters.
  const d = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  const at = (i: number, j: number): number => d[i]?.[j] ?? 0;
  for (let i = 1; i <= a.length; i++) {
    const row = d[i] ?? [];
    for (let j = 1; j <= b.length; j++) {
      let v = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, at(i - 2, j - 2) + 1);
      row[j] = v;
    }
  }
  return at(a.length, b.length);
}

/** The known key closest to `key`, when one is close enough to be what was meant. */
export function didYouMean(key: string, fields: readonly DescField[]): string | undefined {
  const lower = key.toLowerCase().replace(/-/g, "_");
  // Another spelling of a field's name: its JSON name (camelCase), another case, dashes.
  const same = fields.find((f) => f.jsonName === key || f.name === lower || f.name.replace(/_/g, "") === lower);
  if (same) return same.name;
  let best: { name: string; d: number } | undefined;
  for (const f of fields) {
    const d = distance(lower, f.name);
    if (best === undefined || d < best.d) best = { name: f.name, d };
  }
  if (best === undefined) return undefined;
  return best.d <= Math.max(1, Math.floor(best.name.length / 3)) ? best.name : undefined;
}

interface ValueType {
  scalar?: ScalarType;
  enum?: DescEnum;
  message?: DescMessage;
}

function typeName(f: ValueType): string {
  if (f.message) return "a mapping";
  if (f.enum) return "one of " + choices(f.enum).join(", ");
  switch (f.scalar) {
    case ScalarType.STRING:
      return "a string";
    case ScalarType.BOOL:
      return "true or false";
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return "a number";
    default:
      return "a whole number";
  }
}

/** "strings", "whole numbers", "mappings", "values (one of …)". */
function plural(f: ValueType): string {
  if (f.enum) return `values (${typeName(f)})`;
  if (f.scalar === ScalarType.BOOL) return "booleans";
  return `${typeName(f).replace(/^a /, "")}s`;
}

function choices(e: DescEnum): string[] {
  return e.values.filter((v) => v.number !== 0).map((v) => shortEnumName(e, v.name));
}

function describe(v: unknown): string {
  if (v === null) return "nothing";
  if (typeof v === "string") return "a string";
  if (typeof v === "boolean") return v ? "true" : "false";
  if (typeof v === "number") return Number.isInteger(v) ? "a whole number" : "a number";
  return typeof v;
}

const INT32 = { min: -(2 ** 31), max: 2 ** 31 - 1 };
const UINT32 = { min: 0, max: 2 ** 32 - 1 };

/** Field-specific refusals, before the generic walk: what a file must never hold. */
type FieldCheck = (
  node: Node | null,
  path: Segment[],
  report: (node: Node | null, path: Segment[], message: string) => void,
) => boolean;

const SECRET_VALUE =
  "a secret's value never goes in the file (it would be in the repository): list the secret's name here and set its value with `krane secret set`";

/** `secrets` names secrets: a mapping or `NAME=value` there is a value put in the file. */
const secretNames: FieldCheck = (node, path, report) => {
  if (isMap(node)) {
    report(node, path, `expected a list of secret names; ${SECRET_VALUE}`);
    return true;
  }
  if (!isSeq(node)) return false;
  let refused = false;
  node.items.forEach((item, i) => {
    const n = item as Node | null;
    if (isMap(n) || (isScalar(n) && typeof n.value === "string" && n.value.includes("="))) {
      report(n, [...path, i], SECRET_VALUE);
      refused = true;
    }
  });
  return refused;
};

const CHECKS: Record<string, FieldCheck> = {
  "krane.ctrl.v1.EnvironmentFile.secrets": secretNames,
};

class Walker {
  readonly problems: Problem[] = [];

  constructor(private readonly source: Source) {}

  private posOf(node: Node | Pair | null | undefined): Position {
    const range = (node as { range?: [number, number, number] | null } | null | undefined)?.range;
    if (!range) return { line: 1, col: 1 };
    return this.source.lines.linePos(range[0]);
  }

  report(node: Node | Pair | null | undefined, path: Segment[], message: string): void {
    this.problems.push({ path: formatPath(path), message, pos: this.posOf(node) });
  }

  private resolve(node: Node | null | undefined): Node | null {
    if (node === undefined || node === null) return null;
    return isAlias(node) ? ((node.resolve(this.source.doc) as Node | undefined) ?? null) : node;
  }

  private isNull(node: Node | null): boolean {
    return node === null || (isScalar(node) && node.value === null);
  }

  message(desc: DescMessage, raw: Node | null, path: Segment[]): JsonValue | undefined {
    const node = this.resolve(raw);
    // A key written with nothing after it (`sentinel:`) asks for the message with its defaults.
    if (this.isNull(node)) return {};
    if (!isMap(node)) {
      this.report(node, path, `expected a mapping (keys: ${desc.fields.map((f) => f.name).join(", ")})`);
      return undefined;
    }
    const out: { [k: string]: JsonValue } = {};
    const oneofs = new Map<string, string>();
    for (const pair of node.items) {
      const keyNode = this.resolve(pair.key as Node | null);
      if (!isScalar(keyNode) || (typeof keyNode.value !== "string" && typeof keyNode.value !== "number")) {
        this.report(keyNode ?? pair, path, "keys must be plain words");
        continue;
      }
      const key = String(keyNode.value);
      const field = desc.fields.find((f) => f.name === key);
      const at = [...path, key];
      if (!field) {
        const hint = didYouMean(key, desc.fields);
        this.report(
          keyNode,
          at,
          hint !== undefined
            ? `unknown key "${key}" (did you mean "${hint}"?)`
            : `unknown key "${key}" (expected one of: ${desc.fields.map((f) => f.name).join(", ")})`,
        );
        continue;
      }
      if (field.oneof !== undefined) {
        const other = oneofs.get(field.oneof.name);
        if (other !== undefined) {
          this.report(
            keyNode,
            at,
            `"${key}" and "${other}" cannot both be given (one of: ${field.oneof.fields.map((f) => f.name).join(", ")})`,
          );
          continue;
        }
        oneofs.set(field.oneof.name, key);
      }
      const valueNode = this.resolve(pair.value as Node | null);
      const check = CHECKS[`${desc.typeName}.${field.name}`];
      if (check?.(valueNode, at, (n, p, m) => this.report(n ?? keyNode, p, m))) continue;
      const v = this.field(field, valueNode, keyNode, at);
      if (v !== undefined) out[field.name] = v;
    }
    return out;
  }

  private field(f: DescField, node: Node | null, keyNode: Node, path: Segment[]): JsonValue | undefined {
    switch (f.fieldKind) {
      case "scalar":
        return this.isNull(node) ? undefined : this.scalar(f.scalar, node, path);
      case "enum":
        return this.isNull(node) ? undefined : this.enumValue(f.enum, node, path);
      case "message":
        return this.message(f.message, node, path);
      case "list": {
        if (this.isNull(node)) return undefined;
        if (!isSeq(node)) {
          this.report(node ?? keyNode, path, `expected a list of ${plural(f)}`);
          return undefined;
        }
        const items: JsonValue[] = [];
        node.items.forEach((raw, i) => {
          const item = this.resolve(raw as Node | null);
          const v = this.item(f.listKind, f, item, [...path, i]);
          if (v !== undefined) items.push(v);
        });
        return items;
      }
      case "map": {
        if (this.isNull(node)) return undefined;
        if (!isMap(node)) {
          this.report(node ?? keyNode, path, `expected a mapping of names to ${plural(f)}`);
          return undefined;
        }
        const out: { [k: string]: JsonValue } = {};
        for (const pair of node.items) {
          const k = this.resolve(pair.key as Node | null);
          if (!isScalar(k) || (typeof k.value !== "string" && typeof k.value !== "number")) {
            this.report(k ?? pair, path, "keys must be plain words");
            continue;
          }
          const key = String(k.value);
          const value = this.resolve(pair.value as Node | null);
          // A name written with nothing after it (`eu:`) is the message with its defaults.
          const v =
            f.mapKind === "message" && this.isNull(value) ? {} : this.item(f.mapKind, f, value ?? k, [...path, key]);
          if (v !== undefined) out[key] = v;
        }
        return out;
      }
    }
  }

  private item(
    kind: "scalar" | "enum" | "message",
    f: ValueType,
    node: Node | null,
    path: Segment[],
  ): JsonValue | undefined {
    if (kind === "message" && f.message) return this.message(f.message, node, path);
    if (this.isNull(node)) {
      this.report(node, path, `expected ${typeName(f)}, got nothing`);
      return undefined;
    }
    if (kind === "enum" && f.enum) return this.enumValue(f.enum, node, path);
    return this.scalar(f.scalar ?? ScalarType.STRING, node, path);
  }

  private scalar(type: ScalarType, node: Node | null, path: Segment[]): JsonValue | undefined {
    if (!isScalar(node)) {
      this.report(node, path, `expected ${typeName({ scalar: type })}, got ${isSeq(node) ? "a list" : "a mapping"}`);
      return undefined;
    }
    const v = node.value;
    const wrong = (hint = ""): undefined => {
      this.report(node, path, `expected ${typeName({ scalar: type })}, got ${describe(v)}${hint}`);
      return undefined;
    };
    switch (type) {
      case ScalarType.STRING:
        // `1.10` or `yes` written bare are a number and a boolean in YAML, not the text.
        if (typeof v !== "string") return wrong(node.source !== undefined ? ` (quote it: "${node.source}")` : "");
        return v;
      case ScalarType.BOOL:
        return typeof v === "boolean" ? v : wrong();
      case ScalarType.DOUBLE:
      case ScalarType.FLOAT:
        return typeof v === "number" ? v : wrong();
      case ScalarType.BYTES:
        return typeof v === "string" ? v : wrong();
      default: {
        if (typeof v !== "number" || !Number.isInteger(v)) return wrong();
        const range =
          type === ScalarType.INT32 || type === ScalarType.SINT32 || type === ScalarType.SFIXED32
            ? INT32
            : type === ScalarType.UINT32 || type === ScalarType.FIXED32
              ? UINT32
              : { min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER };
        if (v < range.min || v > range.max) {
          this.report(node, path, `must be between ${range.min} and ${range.max}`);
          return undefined;
        }
        return v;
      }
    }
  }

  private enumValue(e: DescEnum, node: Node | null, path: Segment[]): JsonValue | undefined {
    const v = isScalar(node) ? node.value : undefined;
    const value =
      typeof v === "string"
        ? e.values.find(
            (x) => x.name === v || (e.sharedPrefix !== undefined && x.name === `${e.sharedPrefix.toUpperCase()}${v}`),
          )
        : undefined;
    if (value === undefined) {
      this.report(node, path, `expected one of ${choices(e).join(", ")}`);
      return undefined;
    }
    return value.name;
  }
}

/** Parses YAML text (one document) into a document with line positions; YAML's own errors as problems. */
export function parseSource(text: string): { source: Source; problems: Problem[] } {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true, prettyErrors: true });
  const problems = [...doc.errors, ...doc.warnings].map((e) => {
    const at = e.linePos?.[0];
    // The message's first line; the rest is yaml's excerpt of the source, which the CLI's line:column replaces.
    return {
      path: "",
      message: (e.message.split("\n")[0] ?? e.message).replace(/ at line \d+, column \d+:?$/, ""),
      pos: at ? { line: at.line, col: at.col } : { line: 1, col: 1 },
    };
  });
  return { source: { doc, lines }, problems };
}

/** Decodes YAML text as the message `desc`: the message, or every problem found. */
export function decodeYaml<D extends DescMessage>(desc: D, text: string): Decoded<D> {
  const { source, problems } = parseSource(text);
  if (problems.length > 0) return { ok: false, problems };
  const root = source.doc.contents as Node | null;
  if (root === null || (isScalar(root) && root.value === null))
    return { ok: false, problems: [{ path: "", message: "the file is empty", pos: { line: 1, col: 1 } }] };
  const walker = new Walker(source);
  const json = walker.message(desc, root, []);
  if (walker.problems.length > 0 || json === undefined) return { ok: false, problems: walker.problems };
  try {
    return { ok: true, message: fromJson(desc, json), source };
  } catch (err) {
    // The walk checks everything fromJson does; this would be a gap in it, said plainly.
    return {
      ok: false,
      problems: [{ path: "", message: err instanceof Error ? err.message : String(err), pos: { line: 1, col: 1 } }],
    };
  }
}

/**
 * Where `path` is written in the document: the deepest node of it that exists (the value when
 * it is there, else its key; a path that ends in something not written points at its parent).
 */
export function positionOf(source: Source, path: readonly Segment[]): Position {
  let node: Node | null = source.doc.contents as Node | null;
  let at: Node | Pair | null = node;
  for (const seg of path) {
    if (node !== null && isAlias(node)) node = (node.resolve(source.doc) as Node | undefined) ?? null;
    if (typeof seg === "number" && isSeq(node)) {
      const item = node.items[seg] as Node | undefined;
      if (item === undefined) break;
      node = item;
      at = item;
      continue;
    }
    if (typeof seg === "string" && isMap(node)) {
      const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === seg);
      if (!pair) break;
      const value = pair.value as Node | null;
      node = value;
      // A key with nothing after it (`us:`) is pointed at by its key.
      const empty =
        value === null || (isScalar(value) && value.value === null) || !(value as { range?: unknown }).range;
      at = empty ? (pair.key as Node) : value;
      continue;
    }
    break;
  }
  const range = (at as { range?: [number, number, number] | null } | null)?.range;
  return range ? source.lines.linePos(range[0]) : { line: 1, col: 1 };
}
