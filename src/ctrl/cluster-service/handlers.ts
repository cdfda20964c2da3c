// ClusterService: what agents call. Thin: authorize the region, validate, call the store or the
// watch logic, and translate to protobuf.
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { ClusterService, GetDesiredDeploymentStatesResponseSchema, GetDesiredSentinelStatesResponseSchema } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { recordHeartbeat } from "../store/clusters.js";
import { readDesired } from "../store/outbox.js";
import { recordDeploymentReport, recordSentinelReport } from "../store/reports.js";
import type { ObjectKind } from "../store/schema.js";
import type { Store } from "../store/store.js";
import type { FeedHub } from "../stream/feed.js";
import { watch, type WatchEvent } from "../stream/watch.js";
import { validateDeploymentReport, validateHeartbeat, validateIdList, validateSentinelReport } from "../validate/cluster.js";
import * as rules from "../validate/rules.js";
import { agentPrincipal, agentRegion } from "../server/auth.js";
import type { CtrlMetrics } from "../server/metrics.js";
import { deploymentState, desiredDeploymentState, desiredSentinelState, encodingOf, sentinelState } from "./states.js";

export interface ClusterServiceDeps {
  store: Store;
  hub: FeedHub;
  metrics: CtrlMetrics;
  /** Aborted when the server drains: streams then end cleanly. */
  streamsStop: AbortSignal;
  /** The rollout driver: a report may change a rollout's counts (absent in stream-only tests). */
  rollout?: { deploymentReported(region: string, deploymentId: string, k8sName: string): Promise<void> };
}

function cursorOf(v: bigint): number {
  return v > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(v);
}

export function clusterServiceImpl(deps: ClusterServiceDeps): ServiceImpl<typeof ClusterService> {
  const { store, hub, metrics } = deps;

  async function* streamOf<T>(kind: ObjectKind, region: string, cursor: bigint, ctx: HandlerContext, map: (ev: WatchEvent) => T): AsyncGenerator<T> {
    const signal = AbortSignal.any([ctx.signal, deps.streamsStop]);
    metrics.streamsActive.inc({ kind });
    try {
      for await (const ev of watch(store, hub, { kind, region, cursor: cursorOf(cursor), signal })) {
        yield map(ev);
        metrics.streamMessages.inc({ kind });
      }
    } finally {
      metrics.streamsActive.dec({ kind });
    }
  }

  async function desired(kind: ObjectKind, region: string, ids: readonly string[]): Promise<Map<string, Uint8Array>> {
    return readDesired(store.db, region, kind, ids);
  }

  return {
    watchDeployments(req, ctx) {
      const region = agentRegion(ctx, req.region);
      const encoding = encodingOf(ctx.requestHeader.get("content-type"));
      return streamOf("deployment", region, req.versionLastSeen, ctx, (ev) => deploymentState(ev, encoding));
    },

    watchSentinels(req, ctx) {
      const region = agentRegion(ctx, req.region);
      const encoding = encodingOf(ctx.requestHeader.get("content-type"));
      return streamOf("sentinel", region, req.versionLastSeen, ctx, (ev) => sentinelState(ev, encoding));
    },

    async getDesiredDeploymentState(req, ctx) {
      const region = agentRegion(ctx, req.region);
      const id = rules.id("deployment_id", req.deploymentId, "dep");
      const payload = (await desired("deployment", region, [id])).get(id);
      if (!payload) throw new ConnectError(`deployment ${id} is not desired in region ${region}`, Code.NotFound);
      return desiredDeploymentState(payload);
    },

    async getDesiredDeploymentStates(req, ctx) {
      const region = agentRegion(ctx, req.region);
      const ids = validateIdList("deployment_ids", req.deploymentIds, "dep");
      const found = await desired("deployment", region, ids);
      const res = create(GetDesiredDeploymentStatesResponseSchema);
      for (const id of ids) {
        const payload = found.get(id);
        if (payload) res.states.push(desiredDeploymentState(payload));
        else res.notFound.push(id);
      }
      return res;
    },

    async getDesiredSentinelState(req, ctx) {
      const region = agentRegion(ctx, req.region);
      const id = rules.id("sentinel_id", req.sentinelId, "snt");
      const payload = (await desired("sentinel", region, [id])).get(id);
      if (!payload) throw new ConnectError(`sentinel ${id} is not desired in region ${region}`, Code.NotFound);
      return desiredSentinelState(payload);
    },

    async getDesiredSentinelStates(req, ctx) {
      const region = agentRegion(ctx, req.region);
      const ids = validateIdList("sentinel_ids", req.sentinelIds, "snt");
      const found = await desired("sentinel", region, ids);
      const res = create(GetDesiredSentinelStatesResponseSchema);
      for (const id of ids) {
        const payload = found.get(id);
        if (payload) res.states.push(desiredSentinelState(payload));
        else res.notFound.push(id);
      }
      return res;
    },

    async reportDeploymentStatus(req, ctx) {
      const region = agentRegion(ctx, req.region);
      const report = validateDeploymentReport(req);
      await recordDeploymentReport(store, region, report);
      void deps.rollout?.deploymentReported(region, report.deploymentId, report.k8sName);
      return {};
    },

    async reportSentinelStatus(req, ctx) {
      const region = agentRegion(ctx, req.region);
      await recordSentinelReport(store, region, validateSentinelReport(req));
      return {};
    },

    async heartbeat(req, ctx) {
      agentRegion(ctx, req.region);
      const { clusterId } = agentPrincipal(ctx);
      await recordHeartbeat(store, { clusterId, ...validateHeartbeat(req) });
      return {};
    },
  };
}
