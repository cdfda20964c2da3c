// Every ClusterService kind speaks the same shape (the same
// protocol for every kind, so the runtime needs no per-kind stream code): a `KState{version, oneof apply |
// delete | snapshot_start | snapshot_end | bookmark}` stream, batched point reads answering
// KStates plus the ids not found, and a report call. kstateProtocol turns a kind's generated
// methods into the runtime's CtrlProtocol, so a kind names only its methods, its keys and its
// report messages.
import type { CallOptions, CtrlProtocol, DesiredBatch, PointRead, WatchCall } from "./ctrl-link.js";
import type { StreamEvent } from "./cursor.js";

/** The shape every KState message of the ClusterService has (DeploymentState, SentinelState, …). */
export interface KStateMessage<D, Del> {
  readonly version: bigint;
  readonly state:
    | { readonly case: "apply"; readonly value: D }
    | { readonly case: "delete"; readonly value: Del }
    | { readonly case: "snapshotStart"; readonly value: unknown }
    | { readonly case: "snapshotEnd"; readonly value: { readonly headVersion: bigint } }
    | { readonly case: "bookmark"; readonly value: { readonly keepaliveIntervalMs: number } }
    | { readonly case: undefined; readonly value?: undefined };
}

export interface KeyOf<D, Del> {
  apply(d: D): string;
  delete(ref: Del): string;
}

/** Decodes any KState message; a controller names only how its apply and delete are keyed. */
export function decodeKState<D, Del>(msg: KStateMessage<D, Del>, keyOf: KeyOf<D, Del>): StreamEvent<D, Del> {
  const version = msg.version;
  switch (msg.state.case) {
    case "apply":
      return { type: "apply", version, key: keyOf.apply(msg.state.value), desired: msg.state.value };
    case "delete":
      return { type: "delete", version, key: keyOf.delete(msg.state.value), ref: msg.state.value };
    case "snapshotStart":
      return { type: "snapshot-start", version };
    case "snapshotEnd":
      return { type: "snapshot-end", version, head: msg.state.value.headVersion };
    case "bookmark":
      return { type: "bookmark", version, keepaliveMs: msg.state.value.keepaliveIntervalMs };
    default:
      return { type: "empty", version };
  }
}

export interface KStateBinding<Msg extends KStateMessage<D, Del>, D, Del, R> {
  readonly keyOf: KeyOf<D, Del>;
  /** Opens the kind's Watch stream from `cursor`, with `call` as the call's options. */
  watch(cursor: bigint, call: WatchCall): AsyncIterable<Msg>;
  getDesired(
    keys: string[],
    opts: CallOptions,
  ): Promise<{ readonly states: readonly Msg[]; readonly notFound: readonly string[] }>;
  sendReport(request: R, opts: CallOptions): Promise<unknown>;
  rejectedReport(key: string, subject: { desired: D } | { ref: Del }, reason: string): R;
  deletedReport(key: string, ref: Del): R;
  equal(a: D, b: D): boolean;
}

export function kstateProtocol<Msg extends KStateMessage<D, Del>, D, Del, R>(
  b: KStateBinding<Msg, D, Del, R>,
): CtrlProtocol<Msg, D, Del, R> {
  return {
    watch: (cursor, call) => b.watch(cursor, call),
    decode: (msg) => decodeKState(msg, b.keyOf),
    async getDesired(keys, opts): Promise<DesiredBatch<D, Del>> {
      const res = await b.getDesired(keys, opts);
      const states: PointRead<D, Del>[] = [];
      for (const s of res.states) {
        if (s.state.case === "apply")
          states.push({ key: b.keyOf.apply(s.state.value), type: "apply", desired: s.state.value });
        else if (s.state.case === "delete")
          states.push({ key: b.keyOf.delete(s.state.value), type: "delete", ref: s.state.value });
      }
      return { states, notFound: [...res.notFound] };
    },
    async sendReport(request, opts) {
      await b.sendReport(request, opts);
    },
    rejectedReport: (key, subject, reason) => b.rejectedReport(key, subject, reason),
    deletedReport: (key, ref) => b.deletedReport(key, ref),
    equal: (a, c) => b.equal(a, c),
  };
}
