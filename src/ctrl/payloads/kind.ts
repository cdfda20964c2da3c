// What ctrl's payload layer knows of a kind of object streamed to agents: its name (the outbox and
// stream kind, stored in every row: never renamed) and its Apply / Delete messages. The domain
// writes desired state with these; the kind's descriptor in ../kinds adds its stream message,
// report handling and ClusterService methods on top.
import type { DescMessage } from "@bufbuild/protobuf";
import type { KindName } from "../db/schema.js";

export interface KindPayloads {
  readonly name: KindName;
  readonly apply: DescMessage;
  readonly delete: DescMessage;
  /**
   * The Delete payload of a desired object from its stored Apply payload, so deleting an
   * environment removes every kind's objects through the registry. Absent: ./delete-payload.ts
   * copies the fields Apply and Delete share by name.
   */
  deletePayloadOf?(applyPayload: Uint8Array): Uint8Array;
}
