// Deleting an environment is generic over the kinds (../domain/deletion.ts): for every
// desired object of the environment, of every kind, it needs the kind's Delete message. A kind
// may say how (`deletePayloadOf`); otherwise the Delete is made from the stored Apply by copying
// the fields both messages have under the same name and type (ids, k8s names and namespaces,
// which is what every Delete carries). The environment an object belongs to is read the same
// way, from the Apply's `environment_id`, for rows stored without it.
import { create, fromBinary, toBinary, type DescMessage } from "@bufbuild/protobuf";
import type { KindPayloads } from "./kind.js";

type Fields = Record<string, unknown>;

function copyShared(from: DescMessage, to: DescMessage, payload: Uint8Array): Uint8Array {
  const apply = fromBinary(from, payload) as unknown as Fields;
  const init: Fields = {};
  for (const f of to.fields) {
    const src = from.fields.find((g) => g.name === f.name);
    if (!src || src.fieldKind !== f.fieldKind) continue;
    if (f.fieldKind === "scalar" && src.fieldKind === "scalar" && f.scalar !== src.scalar) continue;
    if (f.fieldKind === "message" && src.fieldKind === "message" && f.message.typeName !== src.message.typeName)
      continue;
    if (
      f.fieldKind === "list" &&
      src.fieldKind === "list" &&
      (f.listKind !== src.listKind ||
        (f.listKind === "message" && src.listKind === "message" && f.message.typeName !== src.message.typeName))
    )
      continue;
    init[f.localName] = apply[src.localName];
  }
  return toBinary(to, create(to, init as never));
}

/** The Delete payload of a stored Apply payload of `kind`. */
export function deletePayload(kind: KindPayloads, applyPayload: Uint8Array): Uint8Array {
  return kind.deletePayloadOf ? kind.deletePayloadOf(applyPayload) : copyShared(kind.apply, kind.delete, applyPayload);
}

/** The `environment_id` an Apply payload names ("" when its message has none). */
export function environmentOfPayload(kind: KindPayloads, applyPayload: Uint8Array): string {
  const f = kind.apply.fields.find((x) => x.name === "environment_id");
  if (!f) return "";
  const v = (fromBinary(kind.apply, applyPayload) as unknown as Fields)[f.localName];
  return typeof v === "string" ? v : "";
}
