// Every ClusterService kind speaks the same shape (the same
// protocol for every kind, so the runtime needs no per-kind stream code): a `KState{version, oneof apply |
// delete | snapshot_start | snapshot_end | bookmark}` stream, batched point reads answering
// KStates plus the ids not found, and a report call. kstateProtocol turns a kind's generated
// methods into the runtime's CtrlProtocol, so a kind names only its methods, its keys and its
// report messages.
import { create, equals, type DescService, type Message, type MessageInitShape } from "@bufbuild/protobuf";
import type { GenMessage } from "@bufbuild/protobuf/codegenv2";
import { ClusterService } from "../../gen/krane/ctrl/v1/cluster_pb.js";
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

/** The value of a KState message's `apply` case (ApplyDeployment for DeploymentState, …). */
export type ApplyOf<S> = S extends { readonly state: infer U }
  ? U extends { case: "apply"; value: infer V }
    ? V
    : never
  : never;
/** The value of a KState message's `delete` case. */
export type DeleteOf<S> = S extends { readonly state: infer U }
  ? U extends { case: "delete"; value: infer V }
    ? V
    : never
  : never;
/** The fields of a message that hold a string (a kind's key field is one in its Apply and Delete). */
type StringField<T> = { [K in keyof T]: T[K] extends string ? K : never }[keyof T] & string;

/** How a kind speaks with ctrl, named by its messages; everything else follows from them. */
export interface ServiceKind<S, R extends Message> {
  /** The kind's KState message (DeploymentState, …): the stream's and the point reads' message. */
  readonly state: GenMessage<S & Message>;
  /** The kind's report request (ReportDeploymentStatusRequest, …): `region` and a `change` oneof. */
  readonly report: GenMessage<R>;
  /** The key field, in the Apply and Delete messages and in every report's change. */
  readonly key: StringField<ApplyOf<S>> & StringField<DeleteOf<S>>;
}

type Rpc = (request: unknown, options: unknown) => unknown;

/**
 * A kind's protocol from its messages alone: the service's methods are found by their messages
 * (the server-streaming method answering `state` is the watch, the one answering a list of
 * `state` the point read, the one taking `report` the report), requests are filled by field
 * (`region`, `versionLastSeen`, the point read's one repeated string), and the rejected and
 * deleted reports carry the key, the reason and — when the report has the field — the object's
 * `k8sName` from its desired state or reference. Any service of this shape works: ClusterService
 * for the product's kinds (`clusterProtocol`), another for a test's.
 */
export function serviceProtocol<S extends KStateMessage<ApplyOf<S>, DeleteOf<S>>, R extends Message>(
  service: DescService,
  client: object,
  region: string,
  kind: ServiceKind<S, R>,
): CtrlProtocol<S, ApplyOf<S>, DeleteOf<S>, R> {
  type D = ApplyOf<S>;
  type Del = DeleteOf<S>;
  const stateName = kind.state.typeName;
  const what = `${stateName} in ${service.typeName}`;
  const methods = service.methods;
  const watchM = methods.find((m) => m.methodKind === "server_streaming" && m.output.typeName === stateName);
  const readM = methods.find(
    (m) =>
      m.methodKind === "unary" &&
      m.output.fields.some(
        (f) => f.fieldKind === "list" && f.listKind === "message" && f.message.typeName === stateName,
      ),
  );
  const reportM = methods.find((m) => m.methodKind === "unary" && m.input.typeName === kind.report.typeName);
  const keysField = readM?.input.fields.find((f) => f.fieldKind === "list" && f.listKind === "scalar");
  const change = kind.report.oneofs.find((o) => o.localName === "change");
  const applyField = kind.state.fields.find((f) => f.localName === "apply");
  if (!watchM || !readM || !reportM || !keysField || !change || applyField?.fieldKind !== "message")
    throw new Error(`${what}: a kind needs a watch, a point read of a list of states, a report with a change oneof`);
  const applySchema = applyField.message;
  const caseFields = (c: string): Set<string> => {
    const f = change.fields.find((x) => x.localName === c);
    if (f?.fieldKind !== "message") throw new Error(`${what}: the report's change has no "${c}" message`);
    return new Set(f.message.fields.map((x) => x.localName));
  };
  const rejectedFields = caseFields("rejected");
  const deletedFields = caseFields("delete");
  const rpc = (name: string): Rpc => {
    const fn = (client as Record<string, unknown>)[name];
    if (typeof fn !== "function") throw new Error(`${what}: the client has no method ${name}`);
    return (request, options) => (fn as Rpc).call(client, request, options);
  };
  const watch = rpc(watchM.localName);
  const read = rpc(readM.localName);
  const send = rpc(reportM.localName);
  const keyOf = {
    apply: (d: D): string => (d as Record<string, unknown>)[kind.key] as string,
    delete: (ref: Del): string => (ref as Record<string, unknown>)[kind.key] as string,
  };
  const nameOf = (x: unknown): string | undefined => {
    const v = (x as Record<string, unknown>)["k8sName"];
    return typeof v === "string" ? v : undefined;
  };
  const report = (c: string, fields: Set<string>, key: string, extra: Record<string, unknown>): R => {
    const value: Record<string, unknown> = { [kind.key]: key };
    for (const [k, v] of Object.entries(extra)) if (fields.has(k) && v !== undefined) value[k] = v;
    return create(kind.report, { region, change: { case: c, value } } as unknown as MessageInitShape<GenMessage<R>>);
  };
  return kstateProtocol<S, D, Del, R>({
    keyOf,
    watch: (cursor, call) => watch({ region, versionLastSeen: cursor }, call) as AsyncIterable<S>,
    getDesired: (keys, o) =>
      read({ region, [keysField.localName]: keys }, o) as Promise<{
        states: readonly S[];
        notFound: readonly string[];
      }>,
    sendReport: (req, o) => send(req, o) as Promise<unknown>,
    rejectedReport: (key, subject, reason) =>
      report("rejected", rejectedFields, key, {
        reason,
        k8sName: nameOf("desired" in subject ? subject.desired : subject.ref),
      }),
    deletedReport: (key, ref) => report("delete", deletedFields, key, { k8sName: nameOf(ref) }),
    equal: (a, b) => equals(applySchema, a as Message, b as Message),
  });
}

/** A product kind's protocol: its messages on ctrl's ClusterService (see serviceProtocol). */
export function clusterProtocol<S extends KStateMessage<ApplyOf<S>, DeleteOf<S>>, R extends Message>(
  env: { readonly ctrl: object; readonly region: string },
  kind: ServiceKind<S, R>,
): CtrlProtocol<S, ApplyOf<S>, DeleteOf<S>, R> {
  return serviceProtocol(ClusterService, env.ctrl, env.region, kind);
}
