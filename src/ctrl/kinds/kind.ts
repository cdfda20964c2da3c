// The kind descriptor: everything ctrl knows about one kind of object it streams to agents
// (deployments, sentinels; gateway routes and releases next), in one value per kind, registered
// in ./registry.ts. What is generic — streams, point reads, report plumbing, the outbox — is
// written once (../cluster-service, ../db) and driven by the descriptors.
//
// A descriptor names its outbox kind, its id prefix and its wire messages (the stream's state
// message, Apply and Delete), how its agents' reports are checked and which owner records them
// (`report`, built by ./report.ts from the kind's update rules), and maps its ClusterService
// methods (their names and request fields are the proto's, per kind) onto the shared handlers.
// The kind's payload encoding (rows → Apply/Delete bytes, used by ../domain when desired state
// changes) is ../payloads/<kind>.ts.
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { ClusterService } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { KindName } from "../db/schema.js";
import type { AnyReport, KindReports } from "./report.js";

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
  /** The kind's ClusterService methods. */
  methods(h: KindHandlers<S, Q>): ClusterServiceMethods;
}
