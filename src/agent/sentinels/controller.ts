// The sentinel controller: what differs for sentinels, plugged into the generic controller
// runtime next to the deployment controller (its own WatchSentinels stream, cursor, circuit
// breaker, work queue and resync, so a failing deployment stream never stalls it). Key =
// sentinel id. Apply: the `sentinel` Namespace (created if missing), then the Deployment, then
// the Service owned by it. Observe: the runtime's reflector over sentinel Deployments (it
// re-lists and reconnects) feeds refreshStatus, which reports available replicas and health,
// deduplicated. Delete: the Service and the Deployment, each idempotent.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  ReportSentinelStatusRequestSchema,
  type ApplySentinel,
  type DeleteSentinel,
  type ReportSentinelStatusRequest,
  type SentinelState,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { KubeObject } from "../../kube/object.js";
import { resources } from "../../kube/resources.js";
import type { ClusterClient } from "../deployments/controller.js";
import { LABEL_SENTINEL_ID, managedSelector } from "../../contracts/labels.js";
import type { ControllerSpec, DesiredEntry } from "../runtime/controller.js";
import { decodeKState, type StreamEvent } from "../runtime/cursor.js";
import {
  COMPONENT,
  SENTINEL_NAMESPACE,
  renderSentinelDeployment,
  renderSentinelNamespace,
  renderSentinelService,
} from "./render.js";
import { observationFingerprint, observeSentinel } from "./status.js";
import { validateApplySentinel, validateDeleteSentinel } from "./validate.js";

export type SentinelSpec = ControllerSpec<SentinelState, ApplySentinel, DeleteSentinel, ReportSentinelStatusRequest>;

export interface SentinelControllerOptions {
  readonly region: string;
  readonly ctrl: ClusterClient;
}

export function decodeSentinelState(msg: SentinelState): StreamEvent<ApplySentinel, DeleteSentinel> {
  return decodeKState<ApplySentinel, DeleteSentinel>(msg, { apply: (s) => s.sentinelId, delete: (ref) => ref.sentinelId });
}

function toEntry(s: SentinelState): DesiredEntry<ApplySentinel, DeleteSentinel> | undefined {
  if (s.state.case === "apply") return { key: s.state.value.sentinelId, type: "apply", desired: s.state.value };
  if (s.state.case === "delete") return { key: s.state.value.sentinelId, type: "delete", ref: s.state.value };
  return undefined;
}

export function sentinelControllerSpec(opts: SentinelControllerOptions): SentinelSpec {
  const { region, ctrl } = opts;
  // Once created the namespace is assumed present; a failed apply checks it again.
  let namespaceEnsured = false;
  const report = (change: MessageInitShape<typeof ReportSentinelStatusRequestSchema>["change"]): ReportSentinelStatusRequest =>
    create(ReportSentinelStatusRequestSchema, { region, change });

  return {
    name: "sentinels",
    labelSelector: managedSelector(COMPONENT, region),
    primary: resources.deployments,
    // Cached so the resync sees a deleted or edited Service as drift.
    secondary: [resources.services],

    watch: (cursor, signal, onOpen) =>
      ctrl.watchSentinels({ region, versionLastSeen: cursor }, { signal, onHeader: () => onOpen() }),
    decode: decodeSentinelState,
    async getDesired(keys, o) {
      const res = await ctrl.getDesiredSentinelStates({ region, sentinelIds: keys }, o);
      const states: DesiredEntry<ApplySentinel, DeleteSentinel>[] = [];
      for (const s of res.states) {
        const e = toEntry(s);
        if (e) states.push(e);
      }
      return { states, notFound: res.notFound };
    },
    async sendReport(request, o) {
      await ctrl.reportSentinelStatus(request, o);
    },

    keyOf: (obj) => (obj.metadata.namespace === SENTINEL_NAMESPACE ? obj.metadata.labels?.[LABEL_SENTINEL_ID] : undefined),
    refOf: (obj: KubeObject) => ({
      $typeName: "krane.ctrl.v1.DeleteSentinel",
      k8sName: obj.metadata.name ?? "",
      sentinelId: obj.metadata.labels?.[LABEL_SENTINEL_ID] ?? "",
    }),
    validate: (s) => validateApplySentinel(s, region),
    validateDelete: validateDeleteSentinel,
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
      // Both explicitly, so the Service goes even if its ownerReference was lost; a missing
      // object counts as deleted.
      await ctx.kube.delete(resources.services, SENTINEL_NAMESPACE, ref.k8sName, signal);
      await ctx.kube.delete(resources.deployments, SENTINEL_NAMESPACE, ref.k8sName, signal);
    },

    rejectedReport: (key, subject, reason) =>
      report({
        case: "rejected",
        value: { sentinelId: key, k8sName: "desired" in subject ? subject.desired.k8sName : subject.ref.k8sName, reason },
      }),
    deletedReport: (key, ref) => report({ case: "delete", value: { sentinelId: key, k8sName: ref.k8sName } }),

    // Observation needs no extra wiring: the runtime calls refreshStatus whenever a cached
    // sentinel Deployment changes (its status included), after each apply and on every resync.
    refreshStatus(key, ctx) {
      const deployment = ctx.cache(resources.deployments).byIndex(key)[0];
      if (!deployment || !ctx.isActive(key)) return;
      const o = observeSentinel(deployment);
      ctx.report(
        key,
        observationFingerprint(o),
        report({
          case: "update",
          value: { k8sName: o.k8sName, sentinelId: key, availableReplicas: o.availableReplicas, health: o.health },
        }),
      );
    },
  };
}
