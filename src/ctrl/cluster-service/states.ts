// The DeploymentState / SentinelState messages that watch streams send, built from outbox rows.
//
// The outbox already holds each change as an encoded ApplyX / DeleteX message. For watchers
// that speak binary protobuf (agents: gRPC, or Connect with proto), a state carries those bytes
// as-is, as an unknown field with the number of its oneof case: on the wire this is exactly the
// message the typed field would produce, and nothing is decoded or re-encoded per change or
// per watcher. A JSON watcher cannot carry raw bytes, so it gets the decoded, typed message.
// Either form of a change is built once per process and shared by the stream's watchers (they
// share the feed's row objects).
import { create, fromBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import {
  ApplyDeploymentSchema,
  ApplySentinelSchema,
  DeleteDeploymentSchema,
  DeleteSentinelSchema,
  DeploymentStateSchema,
  SentinelStateSchema,
  SnapshotEndSchema,
  SnapshotStartSchema,
  type DeploymentState,
  type SentinelState,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { ChangeOp } from "../store/schema.js";
import type { WatchEvent } from "../stream/watch.js";

export type WireEncoding = "binary" | "json";

/** The encoding a request's responses are written in, from its content type. */
export function encodingOf(contentType: string | null): WireEncoding {
  return contentType !== null && /json/i.test(contentType) ? "json" : "binary";
}

interface KindSchemas<S extends DescMessage> {
  state: S;
  apply: DescMessage;
  delete: DescMessage;
}

const deploymentSchemas: KindSchemas<typeof DeploymentStateSchema> = { state: DeploymentStateSchema, apply: ApplyDeploymentSchema, delete: DeleteDeploymentSchema };
const sentinelSchemas: KindSchemas<typeof SentinelStateSchema> = { state: SentinelStateSchema, apply: ApplySentinelSchema, delete: DeleteSentinelSchema };

/** Field numbers of the `state` oneof cases, the same in both state messages. */
const APPLY_FIELD = 2;
const DELETE_FIELD = 3;

function lengthDelimited(payload: Uint8Array): Uint8Array {
  return new BinaryWriter().bytes(payload).finish();
}

function build<S extends DescMessage>(k: KindSchemas<S>, version: number, op: ChangeOp, payload: Uint8Array, encoding: WireEncoding): MessageShape<S> {
  if (encoding === "binary") {
    const msg = create(k.state, { version: BigInt(version) } as never);
    msg.$unknown = [{ no: op === "apply" ? APPLY_FIELD : DELETE_FIELD, wireType: WireType.LengthDelimited, data: lengthDelimited(payload) }];
    return msg;
  }
  const value = fromBinary(op === "apply" ? k.apply : k.delete, payload);
  return create(k.state, { version: BigInt(version), state: { case: op, value } } as never);
}

function marker<S extends DescMessage>(k: KindSchemas<S>, ev: Extract<WatchEvent, { type: "snapshot_start" | "snapshot_end" }>): MessageShape<S> {
  const state =
    ev.type === "snapshot_start"
      ? { case: "snapshotStart", value: create(SnapshotStartSchema) }
      : { case: "snapshotEnd", value: create(SnapshotEndSchema, { headVersion: BigInt(ev.head) }) };
  return create(k.state, { version: 0n, state } as never);
}

type Cache<T> = WeakMap<object, Partial<Record<WireEncoding, T>>>;

function stateOf<S extends DescMessage>(k: KindSchemas<S>, cache: Cache<MessageShape<S>>, ev: WatchEvent, encoding: WireEncoding): MessageShape<S> {
  switch (ev.type) {
    case "snapshot_start":
    case "snapshot_end":
      return marker(k, ev);
    case "snapshot_object":
      return build(k, 0, "apply", ev.payload, encoding);
    case "change": {
      let forms = cache.get(ev.change);
      if (forms === undefined) {
        forms = {};
        cache.set(ev.change, forms);
      }
      return (forms[encoding] ??= build(k, ev.change.version, ev.change.op, ev.change.payload, encoding));
    }
  }
}

const deploymentCache: Cache<DeploymentState> = new WeakMap();
const sentinelCache: Cache<SentinelState> = new WeakMap();

export function deploymentState(ev: WatchEvent, encoding: WireEncoding): DeploymentState {
  return stateOf(deploymentSchemas, deploymentCache, ev, encoding);
}

export function sentinelState(ev: WatchEvent, encoding: WireEncoding): SentinelState {
  return stateOf(sentinelSchemas, sentinelCache, ev, encoding);
}

/** A desired object as a typed state (unary answers, which are few and small). */
export function desiredDeploymentState(payload: Uint8Array): DeploymentState {
  return create(DeploymentStateSchema, { version: 0n, state: { case: "apply", value: fromBinary(ApplyDeploymentSchema, payload) } });
}

export function desiredSentinelState(payload: Uint8Array): SentinelState {
  return create(SentinelStateSchema, { version: 0n, state: { case: "apply", value: fromBinary(ApplySentinelSchema, payload) } });
}
