// ClusterService: what agents call. The methods of every kind are built here once, generically
// (a watch stream, point reads, a report), and bound to each registered kind's descriptor
// (../kinds/registry.ts), whose `methods` maps its proto methods onto them; heartbeats, secret
// values and measurements (rollout analysis) belong to no kind. Thin: authorize the region, validate,
// call the store or the watch logic, and translate to protobuf.
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { ClusterService, type GetSecretValuesRequest } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { buildMethods, type ClusterBuilds } from "./builds.js";
import { FRAME_SINK, joinFrames } from "./frame-sink.js";
import { agentPrincipal, agentRegion } from "../auth/principal.js";
import { readDesired } from "../db/outbox.js";
import type { KindName } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { takeAutoscaleDecision } from "../domain/autoscale.js";
import { recordHeartbeat } from "../domain/clusters.js";
import { confirmDeletion } from "../domain/deletion.js";
import { MEASUREMENT_RETENTION_MS, recordMeasurements } from "../domain/measurements.js";
import { recordUsage } from "../domain/usage.js";
import { MINUTE_RETENTION_MS } from "../history/sums.js";
import { releaseSecretValues, secretValuesFor, type SecretOwner } from "../domain/secret-values.js";
import { invalidArgument } from "../errors.js";
import type { Keyring } from "../secrets/keyring.js";
import { kindMethods, type ClusterServiceMethods, type Kind, type KindHandlers } from "../kinds/kind.js";
import type { AnyReport, ReportSubject } from "../kinds/report.js";
import { KINDS } from "../kinds/registry.js";
import { desiredState, encodingOf, streamFrame, streamState } from "../kinds/wire.js";
import type { FeedHub } from "../stream/feed.js";
import { watchBatches } from "../stream/watch.js";
import { validateHeartbeat, validateIdList } from "../validate/cluster.js";
import { validateMeasurementReport } from "../validate/measurements.js";
import { validateUsageReport } from "../validate/usage.js";
import * as rules from "../validate/rules.js";

/** The stream metrics this service keeps (ctrl's CtrlMetrics has them). */
export interface StreamMetrics {
  streamsActive: { inc(labels: { kind: string }): void; dec(labels: { kind: string }): void };
  streamMessages: { inc(labels: { kind: string }, value?: number): void };
}

export interface ClusterServiceDeps {
  store: Store;
  hub: FeedHub;
  metrics: StreamMetrics;
  /** Aborted when the server drains: streams then end cleanly. */
  streamsStop: AbortSignal;
  /** A watch stream quiet this long gets a bookmark (ms; default DEFAULT_STREAM_KEEPALIVE_MS). */
  streamKeepaliveMs?: number;
  /** Told about every recorded report (the rollout driver: a report may change a rollout's counts). */
  onReport?: (kind: KindName, region: string, subject: ReportSubject) => void;
  /** The kinds served (default: every registered kind). */
  kinds?: readonly Kind[];
  /** Opens sealed secrets for GetSecretValues (absent: the method answers failed_precondition). */
  keyring?: Keyring;
  /** Told when an agent confirmed a pending deletion of an environment's object (the deletion
   * finishes only once every region confirmed it). */
  onDeletionConfirmed?: (environmentId: string) => void;
  /** Told when an autoscaling decision changed a region's count (the rollout driver runs a pass). */
  onRegionScaled?: (environmentId: string, region: string) => void;
  /** ctrl's build worker, for the build methods beside the build kind (absent: they answer failed_precondition). */
  builds?: ClusterBuilds;
}

function cursorOf(v: bigint): number {
  return v > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(v);
}

/** The shared handlers, bound to one kind. */
export function kindHandlers<S extends DescMessage, R extends AnyReport, Q>(
  kind: Kind<S, R, Q>,
  deps: ClusterServiceDeps,
): KindHandlers<S, Q> {
  const { store, hub, metrics } = deps;
  const labels = { kind: kind.name };
  return {
    async *watch(req, ctx) {
      // A stream its agent already gave up (a backlog ctrl works through after a pause: a frozen
      // process, a long GC) costs no database read.
      if (ctx.signal.aborted) return;
      const region = agentRegion(ctx, req.region);
      const encoding = encodingOf(ctx.requestHeader.get("content-type"));
      const signal = AbortSignal.any([ctx.signal, deps.streamsStop]);
      metrics.streamsActive.inc(labels);
      // Binary watchers get each batch as frames in one write (./frame-sink.ts) once Connect
      // has sent the headers with the stream's first message (always a bookmark); JSON watchers
      // get typed messages.
      const sink = encoding === "binary" ? ctx.values.get(FRAME_SINK) : undefined;
      try {
        for await (const batch of watchBatches(store, hub, {
          kind: kind.name,
          region,
          cursor: cursorOf(req.versionLastSeen),
          signal,
          keepaliveMs: deps.streamKeepaliveMs,
        })) {
          if (sink?.ready()) {
            if (!sink.write(joinFrames(batch.map((ev) => streamFrame(kind.wire, ev))))) await sink.drained(signal);
            metrics.streamMessages.inc(labels, batch.length);
            continue;
          }
          for (const ev of batch) {
            yield streamState(kind.wire, ev, encoding);
            metrics.streamMessages.inc(labels);
          }
        }
      } finally {
        metrics.streamsActive.dec(labels);
      }
    },

    async getOne(req, idField, rawId, ctx) {
      const region = agentRegion(ctx, req.region);
      const id = rules.id(idField, rawId, kind.idPrefix);
      const payload = (await readDesired(store.db, region, kind.name, [id])).get(id);
      if (!payload) throw new ConnectError(`${kind.name} ${id} is not desired in region ${region}`, Code.NotFound);
      return desiredState(kind.wire, payload);
    },

    async getMany(req, idsField, rawIds, ctx) {
      const region = agentRegion(ctx, req.region);
      const ids = validateIdList(idsField, rawIds, kind.idPrefix);
      const found = await readDesired(store.db, region, kind.name, ids);
      const states: MessageShape<S>[] = [];
      const notFound: string[] = [];
      for (const id of ids) {
        const payload = found.get(id);
        if (payload) states.push(desiredState(kind.wire, payload));
        else notFound.push(id);
      }
      return { states, notFound };
    },

    async report(req, ctx) {
      const region = agentRegion(ctx, req.region);
      const report = kind.report.validate(req);
      await kind.report.record(store, region, report);
      deps.onReport?.(kind.name, region, { id: report.id, k8sName: report.k8sName });
      // A delete report ends that object's pending deletion, whatever the kind.
      const deleted = kind.confirmsDeletion ? kind.confirmsDeletion(report) : report.type === "delete";
      if (deleted) {
        const env = await confirmDeletion(store.db, kind.name, region, report.id);
        if (env !== undefined) deps.onDeletionConfirmed?.(env);
      }
      return {};
    },
  };
}

/** The owner a GetSecretValues request names (every case but release_version). */
function secretOwnerOf(o: GetSecretValuesRequest["owner"]): SecretOwner {
  switch (o.case) {
    case "deploymentId":
      return { type: "deployment", id: rules.id("deployment_id", o.value, "dep") };
    case "jobId":
      return { type: "job", id: rules.id("job_id", o.value, "job") };
    case "deploymentPullSecret":
      return { type: "pull-secret", kind: "deployment", id: rules.id("deployment_pull_secret", o.value, "dep") };
    case "jobPullSecret":
      return { type: "pull-secret", kind: "job", id: rules.id("job_pull_secret", o.value, "job") };
    case "releaseObject":
      return {
        type: "release",
        id: rules.id("release_object.release_id", o.value.releaseId, "rel"),
        version: rules.intRange("release_object.version", o.value.version, 1, Number.MAX_SAFE_INTEGER),
        objectId: rules.text("release_object.object_id", o.value.objectId, 600, true),
      };
    default:
      throw invalidArgument(
        "owner",
        "is required (deployment_id, job_id, release_object, release_version, deployment_pull_secret or job_pull_secret)",
      );
  }
}

export function clusterServiceImpl(deps: ClusterServiceDeps): ServiceImpl<typeof ClusterService> {
  const impl: ClusterServiceMethods = {
    async getSecretValues(req, ctx) {
      const region = agentRegion(ctx, req.region);
      if (!deps.keyring) throw new ConnectError("this ctrl has no master key for secrets", Code.FailedPrecondition);
      const o = req.owner;
      if (o.case === "releaseVersion") {
        const id = rules.id("release_version.release_id", o.value.releaseId, "rel");
        const version = rules.intRange("release_version.version", o.value.version, 1, Number.MAX_SAFE_INTEGER);
        const objects = await releaseSecretValues(deps.store.db, deps.keyring, region, id, version);
        return {
          releaseObjects: objects.map((x) => ({
            objectId: x.objectId,
            values: x.values.map((v) => ({ key: v.key, value: v.value })),
          })),
        };
      }
      const owner = secretOwnerOf(o);
      const values = await secretValuesFor(deps.store.db, deps.keyring, region, owner);
      return { values: values.map((v) => ({ key: v.key, value: v.value })) };
    },
    // A region's sentinel measurements for rollout analysis (belongs to no kind, like heartbeats).
    async reportMeasurements(req, ctx) {
      const region = agentRegion(ctx, req.region);
      const report = validateMeasurementReport(req, deps.store.clock(), MEASUREMENT_RETENTION_MS);
      return { stored: await recordMeasurements(deps.store, region, report) };
    },
    // What the region's instances used, per minute, for the metrics history.
    async reportUsage(req, ctx) {
      const region = agentRegion(ctx, req.region);
      const report = validateUsageReport(req, deps.store.clock(), MINUTE_RETENTION_MS);
      return { stored: await recordUsage(deps.store, region, report) };
    },
    // A region's autoscaling decision (belongs to no kind: it moves an environment-region's count).
    async reportAutoscale(req, ctx) {
      const region = agentRegion(ctx, req.region);
      const decision = {
        environmentId: rules.id("environment_id", req.environmentId, "env"),
        region,
        replicas: rules.intRange("replicas", req.replicas, 0, rules.LIMITS.replicasMax),
        reason: rules.text("reason", req.reason, 500, true),
        decidedAtMs: rules.intRange("decided_at_unix_ms", req.decidedAtUnixMs, 1, Number.MAX_SAFE_INTEGER),
      };
      const taken = await takeAutoscaleDecision(deps.store, decision);
      if (taken.changed) deps.onRegionScaled?.(decision.environmentId, region);
      return { recorded: taken.recorded, replicas: taken.replicas };
    },
    async heartbeat(req, ctx) {
      const region = agentRegion(ctx, req.region);
      const { clusterId } = agentPrincipal(ctx);
      await recordHeartbeat(deps.store, { clusterId, region, ...validateHeartbeat(req) });
      return {};
    },
    ...buildMethods(deps.store, deps.builds),
  };
  for (const kind of deps.kinds ?? KINDS) {
    for (const [name, method] of Object.entries(kindMethods(kind, kindHandlers(kind, deps)))) {
      if (name in impl) throw new Error(`ClusterService.${name} is implemented twice (kind ${kind.name})`);
      Object.assign(impl, { [name]: method });
    }
  }
  const missing = ClusterService.methods.filter((m) => !(m.localName in impl)).map((m) => m.localName);
  if (missing.length > 0) throw new Error(`ClusterService methods without a kind: ${missing.join(", ")}`);
  return impl as ServiceImpl<typeof ClusterService>;
}
