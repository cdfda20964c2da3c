// A krane.yaml message as the plain tree the file holds: proto field names, 64-bit integers as
// numbers, enum values without their type's prefix (`RECREATE`), and — like protobuf's JSON —
// nothing for a field left at its zero value, an empty list or an empty map. A message field
// that is set is always there, empty or not (`sentinel: {}` means krane's own sentinel). What
// `krane export` writes and what plans compare and show. Pure.
import { ScalarType, type DescEnum, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { FeatureSet_FieldPresence } from "@bufbuild/protobuf/wkt";

export type Tree = null | boolean | number | string | Tree[] | { [key: string]: Tree };
export type TreeObject = { [key: string]: Tree };

/** An enum value's name as the file writes it (without the prefix its type's values share). */
export function shortEnumName(e: DescEnum, name: string): string {
  const prefix = e.sharedPrefix;
  return prefix !== undefined && name.toLowerCase().startsWith(prefix) ? name.slice(prefix.length) : name;
}

function isZero(v: unknown): boolean {
  return v === 0 || v === 0n || v === "" || v === false;
}

function scalarTree(type: ScalarType, v: unknown): Tree {
  if (typeof v === "bigint")
    return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : String(v);
  if (v instanceof Uint8Array) return Buffer.from(v).toString("base64");
  if (type === ScalarType.DOUBLE || type === ScalarType.FLOAT) return Number(v);
  return v as Tree;
}

function enumTree(e: DescEnum, v: number): Tree {
  const value = e.value[v];
  return value === undefined ? v : shortEnumName(e, value.name);
}

function valueTree(
  kind: "scalar" | "enum" | "message",
  f: { scalar?: ScalarType; enum?: DescEnum; message?: DescMessage },
  v: unknown,
): Tree {
  if (kind === "message" && f.message) return messageTree(f.message, v as Record<string, unknown>);
  if (kind === "enum" && f.enum) return enumTree(f.enum, v as number);
  return scalarTree(f.scalar ?? ScalarType.STRING, v);
}

function fieldTree(f: DescField, v: unknown): Tree | undefined {
  switch (f.fieldKind) {
    case "scalar":
    case "enum": {
      if (v === undefined) return undefined;
      // Implicit presence (a plain proto3 field): its zero value is "not set".
      if (f.presence === FeatureSet_FieldPresence.IMPLICIT && f.oneof === undefined && isZero(v)) return undefined;
      return f.fieldKind === "enum" ? enumTree(f.enum, v as number) : scalarTree(f.scalar, v);
    }
    case "message":
      return v === undefined ? undefined : messageTree(f.message, v as Record<string, unknown>);
    case "list": {
      const items = v as unknown[];
      if (items.length === 0) return undefined;
      return items.map((x) => valueTree(f.listKind, f, x));
    }
    case "map": {
      const entries = Object.entries(v as Record<string, unknown>);
      if (entries.length === 0) return undefined;
      const out: TreeObject = {};
      for (const [k, x] of entries) out[k] = valueTree(f.mapKind, f, x);
      return out;
    }
  }
}

/** The tree of a message (protobuf-es's object of `desc`), in field order. */
export function messageTree(desc: DescMessage, msg: Record<string, unknown>): TreeObject {
  const out: TreeObject = {};
  for (const f of desc.fields) {
    let v: unknown;
    if (f.oneof !== undefined) {
      const o = msg[f.oneof.localName] as { case?: string; value?: unknown } | undefined;
      if (o?.case !== f.localName) continue;
      v = o.value;
    } else v = msg[f.localName];
    const t = fieldTree(f, v);
    if (t !== undefined) out[f.name] = t;
  }
  return out;
}
