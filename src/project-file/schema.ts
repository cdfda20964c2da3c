// The JSON Schema (draft 2020-12) of a message as a krane.yaml holds it, generated from the
// message's descriptors: the keys are the proto field names, enum values may leave out their
// type's prefix, a message field may be written empty (`sentinel:`), unknown keys are refused,
// and each key is described by the comment above it in the .proto. `npm run generate` writes it
// from descriptors that carry their comments (scripts/generate-schema.ts); `krane schema` prints
// that. What the schema cannot say (ranges, names that must exist) is ctrl's validation. Pure.
import { ScalarType, type DescEnum, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { shortEnumName } from "./tree.js";

export type JsonSchema = { [key: string]: unknown };

/** The comment above a descriptor in its .proto, when the descriptors carry them. */
export type CommentOf = (desc: DescMessage | DescField | DescEnum) => string | undefined;

/**
 * The leading comment of a message, field or enum from its file's source code info (present when
 * the descriptors come from `buf build`, absent from generated code).
 */
export function sourceComments(desc: DescMessage | DescField | DescEnum): string | undefined {
  const path = descriptorPath(desc);
  if (path === undefined) return undefined;
  const file = desc.kind === "field" ? desc.parent.file : desc.file;
  const loc = file.proto.sourceCodeInfo?.location.find(
    (l) => l.path.length === path.length && l.path.every((x, i) => x === path[i]),
  );
  const text = loc?.leadingComments?.trim();
  if (!text) return undefined;
  // Hard-wrapped lines become one paragraph; list items and blank lines keep their breaks.
  let out = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (out === "") out = line;
    else if (line === "" || /^[-*] /.test(line) || out.endsWith("\n")) out += `\n${line}`;
    else out += ` ${line}`;
  }
  return out;
}

/** The path of a descriptor in its FileDescriptorProto (field numbers of messageType, field …). */
function descriptorPath(desc: DescMessage | DescField | DescEnum): number[] | undefined {
  if (desc.kind === "field") {
    const parent = descriptorPath(desc.parent);
    const i = desc.parent.proto.field.indexOf(desc.proto);
    return parent === undefined || i < 0 ? undefined : [...parent, 2, i];
  }
  if (desc.parent === undefined) {
    const list = desc.kind === "message" ? desc.file.proto.messageType : desc.file.proto.enumType;
    const i = (list as unknown[]).indexOf(desc.proto);
    return i < 0 ? undefined : [desc.kind === "message" ? 4 : 5, i];
  }
  const parent = descriptorPath(desc.parent);
  const list = desc.kind === "message" ? desc.parent.proto.nestedType : desc.parent.proto.enumType;
  const i = (list as unknown[]).indexOf(desc.proto);
  return parent === undefined || i < 0 ? undefined : [...parent, desc.kind === "message" ? 3 : 4, i];
}

const INT32 = { minimum: -(2 ** 31), maximum: 2 ** 31 - 1 };

function scalarSchema(t: ScalarType): JsonSchema {
  switch (t) {
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return { type: "string" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return { type: "number" };
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return { type: "integer", ...INT32 };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { type: "integer", minimum: 0, maximum: 2 ** 32 - 1 };
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return { type: "integer", minimum: 0 };
    default:
      return { type: "integer" };
  }
}

export function jsonSchema(
  root: DescMessage,
  opts: { id?: string; title?: string; comments?: CommentOf } = {},
): JsonSchema {
  const comments = opts.comments ?? (() => undefined);
  const defs: Record<string, JsonSchema> = {};
  const withDescription = (s: JsonSchema, d: DescMessage | DescField | DescEnum): JsonSchema => {
    const text = comments(d);
    return text === undefined ? s : { ...s, description: text };
  };

  const enumSchema = (e: DescEnum): JsonSchema => {
    const names = e.values.map((v) => v.name);
    const short = e.values.filter((v) => v.number !== 0).map((v) => shortEnumName(e, v.name));
    return withDescription({ type: "string", enum: [...new Set([...short, ...names])] }, e);
  };

  const ref = (m: DescMessage): JsonSchema => {
    define(m);
    return { $ref: `#/$defs/${m.typeName}` };
  };

  const valueSchema = (kind: "scalar" | "enum" | "message", f: DescField): JsonSchema => {
    if (kind === "message" && f.message) return ref(f.message);
    if (kind === "enum" && f.enum) return enumSchema(f.enum);
    return scalarSchema(f.scalar ?? ScalarType.STRING);
  };

  const fieldSchema = (f: DescField): JsonSchema => {
    switch (f.fieldKind) {
      case "scalar":
        return scalarSchema(f.scalar);
      case "enum":
        return enumSchema(f.enum);
      case "message":
        // `key:` with nothing after it is the message with its defaults.
        return { anyOf: [ref(f.message), { type: "null" }] };
      case "list":
        return { type: "array", items: valueSchema(f.listKind, f) };
      case "map":
        return {
          type: "object",
          additionalProperties:
            f.mapKind === "message"
              ? { anyOf: [valueSchema("message", f), { type: "null" }] }
              : valueSchema(f.mapKind, f),
        };
    }
  };

  function define(m: DescMessage): void {
    if (defs[m.typeName] !== undefined) return;
    const def: JsonSchema = { type: "object" };
    defs[m.typeName] = def;
    const properties: Record<string, JsonSchema> = {};
    for (const f of m.fields) properties[f.name] = withDescription(fieldSchema(f), f);
    def.properties = properties;
    def.additionalProperties = false;
    // A oneof's fields exclude each other.
    const dependent: Record<string, JsonSchema> = {};
    for (const o of m.oneofs) {
      if (o.fields.length < 2) continue;
      for (const f of o.fields)
        dependent[f.name] = {
          properties: Object.fromEntries(o.fields.filter((x) => x !== f).map((x) => [x.name, false])),
        };
    }
    if (Object.keys(dependent).length > 0) def.dependentSchemas = dependent;
    const text = comments(m);
    if (text !== undefined) def.description = text;
  }

  define(root);
  const rootDef = defs[root.typeName] ?? {};
  return {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    ...(opts.id !== undefined ? { $id: opts.id } : {}),
    ...(opts.title !== undefined ? { title: opts.title } : {}),
    ...rootDef,
    $defs: Object.fromEntries(Object.entries(defs).filter(([k]) => k !== root.typeName)),
  };
}
