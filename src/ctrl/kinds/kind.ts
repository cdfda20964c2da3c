// The kind descriptor: everything ctrl knows about one kind of object it streams to agents
// (deployments, sentinels; gateway routes and releases next), in one value per kind, registered
// in ./registry.ts. What is generic — streams, point reads, report plumbing, the outbox — is
// written once (../cluster-service, ../db) and driven by the descriptors.
//
// A descriptor names its outbox kind, its id prefix and its wire messages (the stream's state
// message, Apply and Delete), records its agents' reports, and maps its ClusterService methods
// (their names and request fields are the proto's, per kind) onto the shared handlers. Its file
// also holds the kind's payload encoding (rows → Apply/Delete bytes, used by ../domain when
// desired state changes) and its report validation.
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { ClusterService } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { KindName } from "../db/schema.js";
import type { Store } from "../db/store.js";

export type ClusterServiceMethods = Partial<ServiceImpl<typeof ClusterService>>;

/** The wire messages of a kind's stream: `state` has the oneof apply = 2, delete = 3 of every kind. */
export interface KindWire<S extends DescMessage = DescMessage> {
  readonly state: S;
  readonly apply: DescMessage;
  readonly delete: DescMessage;
}

/** What a report is about: the object's id (may be empty) and its Kubernetes name. */
export interface ReportSubject {
  id: string;
  k8sName: string;
}

/**
 * The generic ClusterService handlers, bound to one kind (implemented once, in
 * ../cluster-service/handlers.ts). Each authorizes the agent for the requested region first.
 */
export interface KindHandlers<S extends DescMessage, R> {
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
  /** Validates (after authorizing), records, and tells the report's listeners. */
  report(req: { region: string }, validate: () => R, ctx: HandlerContext): Promise<void>;
}

export interface Kind<S extends DescMessage = DescMessage, R = unknown> {
  /** The outbox and stream kind, stored in every row of it: never renamed. */
  readonly name: KindName;
  /** The prefix of the kind's ids (`dep`). */
  readonly idPrefix: string;
  readonly wire: KindWire<S>;
  /** Records a validated report in one write transaction. */
  recordReport(store: Store, region: string, report: R): Promise<void>;
  subject(report: R): ReportSubject;
  /**
   * Whether a report confirms the object is gone from the region (a pending deletion then ends).
   * Absent: reports of type "delete".
   */
  confirmsDeletion?(report: R): boolean;
  /** The kind's ClusterService methods. */
  methods(h: KindHandlers<S, R>): ClusterServiceMethods;
}
