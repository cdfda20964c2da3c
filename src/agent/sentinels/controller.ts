// The sentinel controller kind: an environment's routing proxy in this region, on the shared
// runtime next to the deployment kind (its own stream, cursor, breaker, queue and resync, so a
// failing deployment stream never stalls it). Key = sentinel id.
//   owns     the sentinel's Deployment in namespace `sentinel`
//   renders  its Service (owned by the Deployment)
// Apply: the `sentinel` Namespace (created if missing), then the Deployment, then the Service.
// Status: available replicas and health from the Deployment's status (a Deployment event
// re-reports). Delete: the Service and the Deployment, each idempotent.
import { create, equals, type MessageInitShape } from "@bufbuild/protobuf";
import {
  ApplySentinelSchema,
  ReportSentinelStatusRequestSchema,
  type ApplySentinel,
  type DeleteSentinel,
  type ReportSentinelStatusRequest,
  type SentinelState,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { SENTINEL_NAMESPACE } from "../../contracts/cluster.js";
import { COMPONENT, LABEL_COMPONENT, LABEL_SENTINEL_ID } from "../../contracts/labels.js";
import type { KubeObject } from "../../kube/object.js";
import { resources } from "../../kube/resources.js";
import { controller, type ControllerDeclaration } from "../runtime/controller.js";
import { oneKey, type KindEnv } from "../runtime/kind.js";
import { kstateProtocol } from "../runtime/kstate.js";
import { renderSentinelDeployment, renderSentinelNamespace, renderSentinelService } from "./render.js";
import { observationFingerprint, observeSentinel } from "./status.js";
import { validateApplySentinel, validateDeleteSentinel } from "./validate.js";

export type SentinelDeclaration = ControllerDeclaration<SentinelState, ApplySentinel, DeleteSentinel, ReportSentinelStatusRequest>;

/** The sentinel id of a sentinel object (Deployment, Service), or undefined. */
export function sentinelKeyOf(obj: KubeObject): string | undefined {
  if (obj.metadata.namespace !== SENTINEL_NAMESPACE) return undefined;
  const labels = obj.metadata.labels;
  return labels?.[LABEL_COMPONENT] === COMPONENT.sentinel ? labels[LABEL_SENTINEL_ID] : undefined;
}

export function sentinelsController({ region, ctrl }: KindEnv): SentinelDeclaration {
  // Once created the namespace is assumed present; a failed apply checks it again.
  let namespaceEnsured = false;
  const report = (change: MessageInitShape<typeof ReportSentinelStatusRequestSchema>["change"]): ReportSentinelStatusRequest =>
    create(ReportSentinelStatusRequestSchema, { region, change });

  return controller<SentinelState, ApplySentinel, DeleteSentinel, ReportSentinelStatusRequest>("sentinels")
    .protocol(
      kstateProtocol({
        keyOf: { apply: (s) => s.sentinelId, delete: (ref) => ref.sentinelId },
        watch: (cursor, signal, onOpen) => ctrl.watchSentinels({ region, versionLastSeen: cursor }, { signal, onHeader: () => onOpen() }),
        getDesired: (keys, o) => ctrl.getDesiredSentinelStates({ region, sentinelIds: keys }, o),
        sendReport: (req, o) => ctrl.reportSentinelStatus(req, o),
        rejectedReport: (key, subject, reason) =>
          report({ case: "rejected", value: { sentinelId: key, k8sName: "desired" in subject ? subject.desired.k8sName : subject.ref.k8sName, reason } }),
        deletedReport: (key, ref) => report({ case: "delete", value: { sentinelId: key, k8sName: ref.k8sName } }),
        equal: (a, b) => equals(ApplySentinelSchema, a, b),
      }),
    )
    .owns(resources.deployments, {
      keyOf: sentinelKeyOf,
      refOf: (obj) => ({ $typeName: "krane.ctrl.v1.DeleteSentinel", k8sName: obj.metadata.name ?? "", sentinelId: obj.metadata.labels?.[LABEL_SENTINEL_ID] ?? "" }),
    })
    // Cached so a deleted or edited Service is drift.
    .renders(resources.services, { keysOf: (svc) => oneKey(sentinelKeyOf(svc)) })
    .reconciler({
      validate: (s) => validateApplySentinel(s, region),
      validateDelete: validateDeleteSentinel,
      // The Service is compared without its owner reference (a resync cannot compare the uid).
      render: (s) => [renderSentinelDeployment(s, region), renderSentinelService(s, region)],

      async apply(s, _rendered, ctx, signal) {
        if (!namespaceEnsured) {
          await ctx.kube.create(resources.namespaces, renderSentinelNamespace(), signal);
          namespaceEnsured = true;
        }
        try {
          // The Deployment first: the Service's ownerReference needs its uid.
          const applied = await ctx.kube.apply(resources.deployments, renderSentinelDeployment(s, region), { force: true, signal });
          const uid = applied.metadata.uid;
          if (!uid) throw new Error(`sentinel ${s.sentinelId}: the applied Deployment has no uid`);
          await ctx.kube.apply(resources.services, renderSentinelService(s, region, uid), { force: true, signal });
        } catch (err) {
          namespaceEnsured = false;
          throw err;
        }
      },

      async remove(_key, ref, ctx, signal) {
        // Both explicitly, so the Service goes even if its ownerReference was lost.
        await ctx.kube.delete(resources.services, SENTINEL_NAMESPACE, ref.k8sName, signal);
        await ctx.kube.delete(resources.deployments, SENTINEL_NAMESPACE, ref.k8sName, signal);
      },

      status(key, _s, ctx) {
        const deployment = ctx.primaryOf(key);
        if (!deployment) return undefined;
        const o = observeSentinel(deployment);
        return {
          fingerprint: observationFingerprint(o),
          report: report({ case: "update", value: { k8sName: o.k8sName, sentinelId: key, availableReplicas: o.availableReplicas, health: o.health } }),
        };
      },
    })
    .build();
}

