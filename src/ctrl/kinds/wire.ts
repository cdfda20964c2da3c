// The state messages that watch streams and point reads send (DeploymentState, SentinelState,
// …), built from outbox rows and desired payloads for any kind, from its descriptor's schemas.
//
// The outbox already holds each change as an encoded ApplyX / DeleteX message. For watchers
// that speak binary protobuf (agents: gRPC, or Connect with proto), a state carries those bytes
// as-is, as an unknown field with the number of its oneof case: on the wire this is exactly the
// message the typed field would produce, and nothing is decoded or re-encoded per change or
// per watcher. A JSON watcher cannot carry raw bytes, so it gets the decoded, typed message.
// Either form of a change is built once per process and shared by the stream's watchers (they
// share the feed's row objects).
import { create, fromBinary, toBinary, type DescMessage, type Message, type MessageShape } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import { BookmarkSchema, SnapshotEndSchema, SnapshotStartSchema } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { ChangeOp } from "../db/schema.js";
import type { WatchEvent } from "../stream/watch.js";
import type { KindWire } from "./kind.js";

export type WireEncoding = "binary" | "json";

/** The encoding a request's responses are written in, from its content type. */
export function encodingOf(contentType: string | null): WireEncoding {
  return contentType !== null && /json/i.test(contentType) ? "json" : "binary";
}

/** Field numbers of the `state` oneof cases, the same in every kind's state message. */
const APPLY_FIELD = 2;
const DELETE_FIELD = 3;

function lengthDelimited(payload: Uint8Array): Uint8Array {
  return new BinaryWriter().bytes(payload).finish();
}

function build<S extends DescMessage>(
  k: KindWire<S>,
  version: number,
  op: ChangeOp,
  payload: Uint8Array,
  encoding: WireEncoding,
): MessageShape<S> {
  if (encoding === "binary") {
    const msg = create(k.state, { version: BigInt(version) } as never);
    msg.$unknown = [
      {
        no: op === "apply" ? APPLY_FIELD : DELETE_FIELD,
        wireType: WireType.LengthDelimited,
        data: lengthDelimited(payload),
      },
    ];
    return msg;
  }
  const value = fromBinary(op === "apply" ? k.apply : k.delete, payload);
  return create(k.state, { version: BigInt(version), state: { case: op, value } } as never);
}

function marker<S extends DescMessage>(
  k: KindWire<S>,
  ev: Extract<WatchEvent, { type: "snapshot_start" | "snapshot_end" | "bookmark" }>,
): MessageShape<S> {
  switch (ev.type) {
    case "snapshot_start":
      return create(k.state, {
        version: 0n,
        state: { case: "snapshotStart", value: create(SnapshotStartSchema) },
      } as never);
    case "snapshot_end":
      return create(k.state, {
        version: 0n,
        state: { case: "snapshotEnd", value: create(SnapshotEndSchema, { headVersion: BigInt(ev.head) }) },
      } as never);
    case "bookmark":
      return create(k.state, {
        version: BigInt(ev.version),
        state: { case: "bookmark", value: create(BookmarkSchema, { keepaliveIntervalMs: ev.keepaliveMs }) },
      } as never);
  }
}

/**
 * What has been built of each change row (a change row belongs to one kind): its message per
 * encoding, and its enveloped frame (streamFrame).
 */
const built = new WeakMap<object, Partial<Record<WireEncoding, Message>> & { frame?: Uint8Array }>();

function builtOf(row: object): Partial<Record<WireEncoding, Message>> & { frame?: Uint8Array } {
  let forms = built.get(row);
  if (forms === undefined) {
    forms = {};
    built.set(row, forms);
  }
  return forms;
}

/** The stream message of one watch event. */
export function streamState<S extends DescMessage>(
  k: KindWire<S>,
  ev: WatchEvent,
  encoding: WireEncoding,
): MessageShape<S> {
  switch (ev.type) {
    case "snapshot_start":
    case "snapshot_end":
    case "bookmark":
      return marker(k, ev);
    case "snapshot_object":
      return build(k, 0, "apply", ev.payload, encoding);
    case "change":
      return (builtOf(ev.change)[encoding] ??= build(
        k,
        ev.change.version,
        ev.change.op,
        ev.change.payload,
        encoding,
      )) as MessageShape<S>;
  }
}

/**
 * A binary state message written out field by field: the version (field 1, absent when 0, as
 * proto3 writes it), then the Apply or Delete payload as its oneof field — the same bytes
 * `toBinary` gives for streamState's binary form, without building a message first.
 */
function stateBytes(version: number, op: ChangeOp, payload: Uint8Array): Uint8Array {
  const w = new BinaryWriter();
  if (version !== 0) w.tag(1, WireType.Varint).uint64(version);
  return w
    .tag(op === "apply" ? APPLY_FIELD : DELETE_FIELD, WireType.LengthDelimited)
    .bytes(payload)
    .finish();
}

/**
 * The enveloped binary frame (flags 0, length, message) of one watch event, as the stream's
 * writer puts it on the wire (../cluster-service/frame-sink.ts). A change's frame is built once
 * per process and shared by every watcher of its stream.
 */
export function streamFrame<S extends DescMessage>(k: KindWire<S>, ev: WatchEvent): Uint8Array {
  switch (ev.type) {
    case "snapshot_start":
    case "snapshot_end":
    case "bookmark":
      return encodeEnvelope(0, toBinary(k.state, marker(k, ev)));
    case "snapshot_object":
      return encodeEnvelope(0, stateBytes(0, "apply", ev.payload));
    case "change":
      return (builtOf(ev.change).frame ??= encodeEnvelope(
        0,
        stateBytes(ev.change.version, ev.change.op, ev.change.payload),
      ));
  }
}

/** A desired object as a typed state (unary answers, which are few and small). */
export function desiredState<S extends DescMessage>(k: KindWire<S>, payload: Uint8Array): MessageShape<S> {
  return create(k.state, { version: 0n, state: { case: "apply", value: fromBinary(k.apply, payload) } } as never);
}
