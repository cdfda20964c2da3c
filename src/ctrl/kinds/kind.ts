// The kind descriptor: everything ctrl knows about one kind of object it streams to agents
// (deployments, sentinels; gateway routes and releases next), in one value per kind, registered
// in ./registry.ts. What is generic — streams, point reads, report plumbing, the outbox — is
// written once (../cluster-service, ../db) and driven by the descriptors.
//
// A descriptor names its outbox kind, its id prefix and its wire messages (the stream's state
// message, Apply and Delete), how its agents' reports are checked and which owner records them
// (`report`, built by ./report.ts from the kind's update rules), and maps its ClusterService
// methods, found by their messages (`kindMethods`), onto the shared handlers.
// The kind's payload encoding (rows → Apply/Delete bytes, used by ../domain when desired state
// changes) is ../payloads/<kind>.ts.
import { create, type DescMessage, type DescService, type MessageShape } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { ClusterService } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { KindName } from "../db/schema.js";
import {
  kindReports,
  type AnyReport,
  type CheckedReport,
  type KindReports,
  type ReportChange,
  type ReportRules,
} from "./report.js";

export type ClusterServiceMethods = Partial<ServiceImpl<typeof ClusterService>>;

/** The wire messages of a kind's stream: `state` has the oneof apply = 2, delete = 3 of every kind. */
export interface KindWire<S extends DescMessage = DescMessage> {
  readonly state: S;
  readonly apply: DescMessage;
  readonly delete: DescMessage;
}

/**
 * The generic ClusterService handlers, bound to one kind (implemented once, in
 * ../cluster-service/handlers.ts). Each authorizes the agent for the requested region first.
 */
export interface KindHandlers<S extends DescMessage, Q> {
  /** The kind's watch stream for a region from a cursor: a snapshot if needed, then changes. */
  watch(req: { region: string; versionLastSeen: bigint }, ctx: HandlerContext): AsyncIterable<MessageShape<S>>;
  /** One desired object as a state message; NotFound when it is not desired in the region. */
  getOne(req: { region: string }, idField: string, id: string, ctx: HandlerContext): Promise<MessageShape<S>>;
  /** Several desired objects; the ids not desired in the region are listed, not failed. */
  getMany(
    req: { region: string },
    idsField: string,
    ids: readonly string[],
    ctx: HandlerContext,
  ): Promise<{ states: MessageShape<S>[]; notFound: string[] }>;
  /** Validates (after authorizing) with the kind's `report`, records, and tells the report's listeners. */
  report(req: Q & { region: string }, ctx: HandlerContext): Promise<Record<string, never>>;
}

export interface Kind<S extends DescMessage = DescMessage, R extends AnyReport = AnyReport, Q = unknown> {
  /** The outbox and stream kind, stored in every row of it: never renamed. */
  readonly name: KindName;
  /** The prefix of the kind's ids (`dep`). */
  readonly idPrefix: string;
  readonly wire: KindWire<S>;
  /** How the kind's report requests `Q` are checked, and which owner records them. */
  readonly report: KindReports<Q, R>;
  /**
   * Whether a report confirms the object is gone from the region (a pending deletion then ends).
   * Absent: reports of type "delete".
   */
  confirmsDeletion?(report: R): boolean;
}

/** A descriptor from its parts, its report checks built from the kind's report rules (./report.ts). */
export function streamedKind<S extends DescMessage, K extends string, U, V>(d: {
  readonly name: KindName;
  readonly idPrefix: string;
  readonly wire: KindWire<S>;
  readonly report: Omit<ReportRules<K, U, V>, "idPrefix">;
}): Kind<S, CheckedReport<V>, { change: ReportChange<K, U> }> {
  return {
    name: d.name,
    idPrefix: d.idPrefix,
    wire: d.wire,
    report: kindReports({ ...d.report, idPrefix: d.idPrefix }),
  };
}

type Request = Record<string, unknown> & { region: string };

/**
 * A kind's ClusterService methods, found by their messages and bound to the generic handlers:
 * the server-streaming method answering the kind's state message is its watch, the unary one
 * answering a state its point read (by its one id field), the one answering a list of states its
 * batched read (by its one repeated id field), the one taking the kind's report message its report.
 */
export function kindMethods<S extends DescMessage, R extends AnyReport, Q>(
  kind: Kind<S, R, Q>,
  h: KindHandlers<S, Q>,
  service: DescService = ClusterService,
): ClusterServiceMethods {
  const state = kind.wire.state.typeName;
  const out: Record<string, (req: Request, ctx: HandlerContext) => unknown> = {};
  for (const m of service.methods) {
    const ids = m.input.fields.find((f) => f.name !== "region" && (f.fieldKind === "scalar" || f.fieldKind === "list"));
    if (m.methodKind === "server_streaming" && m.output.typeName === state) {
      out[m.localName] = (req, ctx) =>
        h.watch({ region: req.region, versionLastSeen: req["versionLastSeen"] as bigint }, ctx);
    } else if (m.methodKind !== "unary") {
      continue;
    } else if (m.input.typeName === kind.report.message.typeName) {
      out[m.localName] = (req, ctx) => h.report(req as Q & Request, ctx);
    } else if (m.output.typeName === state && ids?.fieldKind === "scalar") {
      out[m.localName] = (req, ctx) => h.getOne(req, ids.name, String(req[ids.localName]), ctx);
    } else if (
      ids?.fieldKind === "list" &&
      m.output.fields.some((f) => f.fieldKind === "list" && f.listKind === "message" && f.message.typeName === state)
    ) {
      out[m.localName] = async (req, ctx) =>
        create(m.output, await h.getMany(req, ids.name, req[ids.localName] as string[], ctx));
    }
  }
  if (Object.keys(out).length !== 4)
    throw new Error(`kind ${kind.name}: ${service.typeName} has no watch, point reads and report of ${state}`);
  return out as ClusterServiceMethods;
}
