// The sentinel controller kind: an environment's routing proxy in this region and its routing
// table, on the shared runtime next to the deployment kind (its own stream, cursor, breaker,
// queue and resync, so a failing deployment stream never stalls it). Key = sentinel id.
//   owns     the sentinel's Deployment in namespace `sentinel`
//   renders  its Service (owned by the Deployment), its ingress CiliumNetworkPolicy and the
//            routing policy ConfigMap;
//   creates  once, its replicas' peer Secret (the rate-limit exchange's key; deleted with it);
//            derives one EndpointSlice per revision from the pods (sentinels/routing.ts)
//   watches  the environment's user pods (a pod that becomes routable, or stops being so,
//            reaches the table without a round trip through ctrl)
//   reads    Nodes (the zone of an endpoint)
//   observes the sentinel pods: the routing version they serve (observer.ts) and their
//            per-revision request counters, reported for rollout analysis (collector.ts)
// Everything it writes carries the sentinel id, so slices of revisions that left are pruned.
// Apply: the `sentinel` Namespace (created if missing), the peer Secret (created once), the
// Deployment, the Service, then the network policy and the routing table. Status: available replicas and health from the Deployment's status.
// Delete: the Service, the Deployment, the network policy and the peer Secret, then whatever else carries the sentinel id.
import { randomBytes } from "node:crypto";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  ReportSentinelStatusRequestSchema,
  type ApplySentinel,
  type DeleteSentinel,
  type ReportSentinelStatusRequest,
  type SentinelState,
  SentinelStateSchema,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { SENTINEL_NAMESPACE, SENTINEL_PORT, ZONE_LABEL } from "../../contracts/cluster.js";
import {
  COMPONENT,
  LABEL_COMPONENT,
  LABEL_ENVIRONMENT_ID,
  LABEL_SENTINEL_ID,
  regionSelector,
} from "../../contracts/labels.js";
import {
  ENDPOINTSLICE_MANAGED_BY,
  ENDPOINTSLICE_MANAGED_BY_LABEL,
  type SentinelStatus,
} from "../../contracts/routing.js";
import type { KubeObject } from "../../kube/object.js";
import { resourceOf, resources } from "../../kube/resources.js";
import { deploymentKeyOf } from "../deployments/controller.js";
import { instanceKey } from "../deployments/status.js";
import {
  controller,
  labelIndex,
  type ControllerDeclaration,
  type KindContext,
  type StatusReport,
} from "../runtime/builder.js";
import { oneKey, type KindEnv } from "../runtime/kind.js";
import type { SentinelEnv } from "./settings.js";
import { clusterProtocol } from "../runtime/kstate.js";
import { trimNode, trimPod } from "../runtime/trim.js";
import {
  isOwnSentinel,
  peerSecretName,
  renderPeerSecret,
  renderSentinelDeployment,
  renderSentinelNamespace,
  renderSentinelNetworkPolicy,
  renderSentinelService,
} from "./render.js";
import { MeasurementCollector } from "./collector.js";
import { USAGE_INTERVAL_MS, UsageReader } from "../usage/reader.js";
import { SentinelObserver, sentinelPods } from "./observer.js";
import { renderRevisionSlices, renderRoutingPolicy, podRoutingKey } from "./routing.js";
import { observationFingerprint, observeSentinel } from "./status.js";
import { validateApplySentinel, validateDeleteSentinel } from "./validate.js";

export type SentinelDeclaration = ControllerDeclaration<
  SentinelState,
  ApplySentinel,
  DeleteSentinel,
  ReportSentinelStatusRequest
>;

/** The sentinel id of a routing-table object (policy ConfigMap, EndpointSlice), or undefined. */
function routingKeyOf(obj: KubeObject): string | undefined {
  if (obj.metadata.namespace !== SENTINEL_NAMESPACE) return undefined;
  const labels = obj.metadata.labels;
  return labels?.[LABEL_COMPONENT] === COMPONENT.routing ? labels[LABEL_SENTINEL_ID] : undefined;
}

/** The sentinel id of a sentinel object (Deployment, Service), or undefined. */
export function sentinelKeyOf(obj: KubeObject): string | undefined {
  if (obj.metadata.namespace !== SENTINEL_NAMESPACE) return undefined;
  const labels = obj.metadata.labels;
  return labels?.[LABEL_COMPONENT] === COMPONENT.sentinel ? labels[LABEL_SENTINEL_ID] : undefined;
}

type Ctx = KindContext<ApplySentinel>;

/** The sentinels of an environment in this region (normally one). */
function sentinelsOfEnvironment(env: string, ctx: KindContext<ApplySentinel>): string[] {
  const out: string[] = [];
  for (const d of ctx.informer(resources.deployments).byIndex(labelIndex(LABEL_ENVIRONMENT_ID), env)) {
    const k = sentinelKeyOf(d);
    if (k !== undefined) out.push(k);
  }
  return out;
}

/** The in-cluster address of a sentinel's Service (what Gateway routes point at). */
export function sentinelAddress(k8sName: string): string {
  return `${k8sName}.${SENTINEL_NAMESPACE}.svc:${SENTINEL_PORT}`;
}

/** What runs beside the observer and reads what it read: the region's autoscaler (src/agent/autoscale). */
export interface SentinelLoadReader {
  run(
    ctx: KindContext<ApplySentinel>,
    source: {
      documents(key: string): Iterable<SentinelStatus> | undefined;
      pods(key: string): { name: string; host: string }[];
    },
    signal: AbortSignal,
  ): Promise<void>;
}

export function sentinelsController(
  { region, ctrl, sentinel: defaults }: KindEnv & SentinelEnv,
  autoscaler?: SentinelLoadReader,
): SentinelDeclaration {
  const observer = new SentinelObserver({ intervalMs: defaults.observeIntervalMs, addressMap: defaults.podAddressMap });
  // The sentinels' per-revision counters, for rollout analysis.
  const collector = new MeasurementCollector({
    region,
    intervalMs: defaults.measureIntervalMs,
    addressMap: defaults.podAddressMap,
    registry: defaults.registry,
    send: async (req, signal) => void (await ctrl.reportMeasurements(req, { signal, timeoutMs: 5_000 })),
  });
  // What the region's instances use (CPU, memory, restarts), for the metrics history.
  const usage = new UsageReader({
    region,
    intervalMs: defaults.usageIntervalMs ?? USAGE_INTERVAL_MS,
    send: async (req, signal) => void (await ctrl.reportUsage(req, { signal, timeoutMs: 5_000 })),
  });
  // Once created the namespace is assumed present; a failed apply checks it again.
  let namespaceEnsured = false;
  /** Sentinels whose peer Secret this process created or found there (by name). */
  const peerSecrets = new Set<string>();
  const report = (
    change: MessageInitShape<typeof ReportSentinelStatusRequestSchema>["change"],
  ): ReportSentinelStatusRequest => create(ReportSentinelStatusRequestSchema, { region, change });

  /** The routing table's EndpointSlices, one set per revision, from the environment's pods. */
  const revisionSlices = (s: ApplySentinel, ctx: Ctx): KubeObject[] => {
    const zone = (node: string): string =>
      ctx.informer(resources.nodes).get(undefined, node)?.metadata.labels?.[ZONE_LABEL] ?? "";
    const byRevision = new Map<string, KubeObject[]>();
    for (const pod of ctx.informer(resources.pods).byIndex(labelIndex(LABEL_ENVIRONMENT_ID), s.environmentId)) {
      const dep = deploymentKeyOf(pod);
      if (dep === undefined) continue;
      const list = byRevision.get(dep);
      if (list) list.push(pod);
      else byRevision.set(dep, [pod]);
    }
    return [...byRevision].flatMap(([dep, pods]) => renderRevisionSlices(s, region, dep, pods, zone));
  };

  /** The Namespace, the Deployment, its Service, then the routing table's objects that differ. */
  const apply = async (
    s: ApplySentinel,
    objects: readonly KubeObject[],
    ctx: Ctx,
    signal: AbortSignal,
  ): Promise<void> => {
    if (!namespaceEnsured) {
      await ctx.kube.create(resources.namespaces, renderSentinelNamespace(), signal);
      namespaceEnsured = true;
    }
    try {
      // The rate-limit exchange's key before the pods that read it: created once with random
      // bytes, left as it is when it exists (every replica must keep the same one).
      if (isOwnSentinel(s, defaults) && !peerSecrets.has(s.k8sName)) {
        const key = randomBytes(32).toString("base64url");
        await ctx.kube.create(resources.secrets, renderPeerSecret(s, region, key), signal);
        peerSecrets.add(s.k8sName);
      }
      // The Deployment first: the Service's ownerReference needs its uid.
      let deployment = ctx.primaryOf(s.sentinelId);
      const wanted = renderSentinelDeployment(s, region, defaults);
      if (!deployment || !ctx.isCurrent(wanted))
        deployment = await ctx.kube.apply(resources.deployments, wanted, { force: true, signal });
      const uid = deployment.metadata.uid;
      if (!uid) throw new Error(`sentinel ${s.sentinelId}: the Deployment has no uid`);
      if (!ctx.isCurrent(renderSentinelService(s, region))) {
        await ctx.kube.apply(resources.services, renderSentinelService(s, region, uid), { force: true, signal });
      }
      // Then the routing table: the policy and the revisions' slices that differ.
      for (const obj of objects) {
        if (obj.kind === "Deployment" || obj.kind === "Service" || ctx.isCurrent(obj)) continue;
        const r = resourceOf(obj);
        if (!r) throw new Error(`sentinel ${s.sentinelId}: no resource type for ${obj.apiVersion}/${obj.kind}`);
        await ctx.kube.apply(r, obj, { force: true, signal });
      }
    } catch (err) {
      namespaceEnsured = false;
      throw err;
    }
  };

  /** Available replicas and health from the Deployment's status, and the routing version served. */
  const status = (key: string, ctx: Ctx): StatusReport<ReportSentinelStatusRequest> | undefined => {
    const deployment = ctx.primaryOf(key);
    if (!deployment) return undefined;
    const o = observeSentinel(deployment);
    const address = sentinelAddress(o.k8sName);
    const served = observer.get(key)?.servedVersion ?? 0;
    return {
      fingerprint: `${observationFingerprint(o)}|${address}|${served}`,
      report: report({
        case: "update",
        value: {
          k8sName: o.k8sName,
          sentinelId: key,
          availableReplicas: o.availableReplicas,
          health: o.health,
          address,
          routingVersion: BigInt(served),
        },
      }),
    };
  };

  return (
    controller<SentinelState, ApplySentinel, DeleteSentinel, ReportSentinelStatusRequest>("sentinels")
      .protocol(
        clusterProtocol(
          { region, ctrl },
          { state: SentinelStateSchema, report: ReportSentinelStatusRequestSchema, key: "sentinelId" },
        ),
      )
      .ownedBy(LABEL_SENTINEL_ID)
      .owns(resources.deployments, {
        keyOf: sentinelKeyOf,
        refOf: (obj) => ({
          $typeName: "krane.ctrl.v1.DeleteSentinel",
          k8sName: obj.metadata.name ?? "",
          sentinelId: obj.metadata.labels?.[LABEL_SENTINEL_ID] ?? "",
        }),
        namespace: SENTINEL_NAMESPACE,
        labelIndexes: [LABEL_ENVIRONMENT_ID],
        // status.availableReplicas: the sentinel's health (./status.ts).
        readsStatus: true,
      })
      // Cached so a deleted or edited Service is drift. Everything here lives in one namespace,
      // so the agent needs no cluster-wide read of Deployments, Services or ConfigMaps.
      .renders(resources.services, { keysOf: (svc) => oneKey(sentinelKeyOf(svc)), namespace: SENTINEL_NAMESPACE })
      .renders(resources.configMaps, { keysOf: (cm) => oneKey(routingKeyOf(cm)), namespace: SENTINEL_NAMESPACE })
      .renders(resources.ciliumNetworkPolicies, {
        keysOf: (cnp) => oneKey(sentinelKeyOf(cnp)),
        namespace: SENTINEL_NAMESPACE,
      })
      // Only the agent's own slices: Kubernetes' EndpointSlice controller copies the sentinel
      // Service's labels (the sentinel id among them) onto the Service's slices, and a slice
      // carrying the key's owner label that the render does not name would be pruned — the
      // Service would lose its endpoints on every reconcile (kube-proxy and Gateways route by them).
      .renders(resources.endpointSlices, {
        keysOf: (slice) => oneKey(routingKeyOf(slice)),
        namespace: SENTINEL_NAMESPACE,
        selector: `${regionSelector(region)},${ENDPOINTSLICE_MANAGED_BY_LABEL}=${ENDPOINTSLICE_MANAGED_BY}`,
      })
      .watches(resources.pods, {
        keysOf: (pod, ctx) => {
          const env = pod.metadata.labels?.[LABEL_ENVIRONMENT_ID];
          return deploymentKeyOf(pod) === undefined || env === undefined ? [] : sentinelsOfEnvironment(env, ctx);
        },
        // A change of what is routed concerns the table, and so does a pod added or deleted: a
        // revision keeps its (maybe empty) slice while any of its pods exists, so the deletion of
        // its last, already unroutable pod is what prunes it.
        changed: (pod, old) =>
          pod === undefined ||
          old === undefined ||
          instanceKey(pod) !== instanceKey(old) ||
          podRoutingKey(pod) !== podRoutingKey(old),
        // By environment: the routing table; by sentinel: the observer reads the sentinel's pods.
        labelIndexes: [LABEL_ENVIRONMENT_ID, LABEL_SENTINEL_ID],
        trim: trimPod,
      })
      .reads(resources.nodes, { selector: ZONE_LABEL, trim: trimNode })
      .reconciler({
        validate: (s) => validateApplySentinel(s, region),
        validateDelete: validateDeleteSentinel,
        // The Service is compared without its owner reference (a resync cannot compare the uid).
        render: (s) => [
          renderSentinelDeployment(s, region, defaults),
          renderSentinelService(s, region),
          renderSentinelNetworkPolicy(s, region, defaults),
          renderRoutingPolicy(s, region),
        ],

        async reconcile(key, want, ctx, signal) {
          if (want.type === "delete") {
            // Both explicitly, so the Service goes even if its ownerReference was lost.
            await ctx.kube.delete(resources.services, SENTINEL_NAMESPACE, want.ref.k8sName, signal);
            await ctx.kube.delete(resources.deployments, SENTINEL_NAMESPACE, want.ref.k8sName, signal);
            await ctx.kube.delete(resources.ciliumNetworkPolicies, SENTINEL_NAMESPACE, want.ref.k8sName, signal);
            await ctx.kube.delete(resources.secrets, SENTINEL_NAMESPACE, peerSecretName(want.ref.k8sName), signal);
            peerSecrets.delete(want.ref.k8sName);
            return ctx.deleted(key, want, signal);
          }
          const s = want.desired;
          const objects = [...want.rendered, ...revisionSlices(s, ctx)];
          const result = await ctx.sync(key, objects, signal, () => apply(s, objects, ctx, signal));
          if (result.type === "done") ctx.report(key, () => status(key, ctx));
          return result;
        },

        observe: async (ctx, signal, requeue) =>
          void (await Promise.all([
            observer.run(ctx, signal, requeue),
            collector.run(ctx, signal),
            usage.run(ctx, signal),
            autoscaler?.run(
              ctx,
              {
                documents: (key) => observer.get(key)?.pods.values(),
                pods: (key) => sentinelPods(ctx, key, defaults.podAddressMap),
              },
              signal,
            ),
          ])),
      })
      .build()
  );
}
