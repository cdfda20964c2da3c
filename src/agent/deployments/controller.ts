// The deployment controller: what differs for user deployments, plugged into the generic
// controller runtime. Key = deployment id. Applies the workspace Namespace (create if
// missing), the environment's CiliumNetworkPolicy and the ReplicaSet; observes pods of managed
// ReplicaSets and reports each deployment's full instance set; deletes idempotently.
import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import {
  ClusterService,
  ReportDeploymentStatusRequestSchema,
  type ApplyDeployment,
  type DeleteDeployment,
  type DeploymentState,
  type ReportDeploymentStatusRequest,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { KubeObject } from "../../kube/object.js";
import { resources } from "../../kube/resources.js";
import { LABEL_DEPLOYMENT_ID, LABEL_ENVIRONMENT_ID, managedSelector } from "../../contracts/labels.js";
import { ZONE_LABEL } from "../../contracts/cluster.js";
import type { ControllerSpec, DesiredEntry, RuntimeContext } from "../runtime/controller.js";
import { decodeKState, type StreamEvent } from "../runtime/cursor.js";
import { COMPONENT, renderDeployment } from "./render.js";
import { instancesFingerprint, instancesOf } from "./status.js";
import { validateApplyDeployment, validateDeleteDeployment } from "./validate.js";

export type ClusterClient = Client<typeof ClusterService>;
type Ctx = RuntimeContext<ReportDeploymentStatusRequest, ApplyDeployment>;
export type DeploymentSpec = ControllerSpec<DeploymentState, ApplyDeployment, DeleteDeployment, ReportDeploymentStatusRequest>;

export interface DeploymentControllerOptions {
  readonly region: string;
  readonly ctrl: ClusterClient;
}

function decode(msg: DeploymentState): StreamEvent<ApplyDeployment, DeleteDeployment> {
  return decodeKState<ApplyDeployment, DeleteDeployment>(msg, { apply: (d) => d.deploymentId, delete: (ref) => ref.deploymentId });
}

export function deploymentControllerSpec(opts: DeploymentControllerOptions): DeploymentSpec {
  const { region, ctrl } = opts;
  const zoneOf = (ctx: Ctx) => (node: string): string =>
    ctx.cache(resources.nodes).get(undefined, node)?.metadata.labels?.[ZONE_LABEL] ?? "";
  const ensuredNamespaces = new Set<string>();

  return {
    name: "deployments",
    labelSelector: managedSelector(COMPONENT, region),
    primary: resources.replicaSets,
    secondary: [resources.ciliumNetworkPolicies, resources.pods, resources.nodes],
    selectorFor: (r) => (r === resources.nodes ? ZONE_LABEL : undefined),
    indexBy: (r, obj) => (r === resources.pods ? obj.metadata.labels?.[LABEL_DEPLOYMENT_ID] : undefined),

    watch: (cursor, signal, onOpen) =>
      ctrl.watchDeployments({ region, versionLastSeen: cursor }, { signal, onHeader: () => onOpen() }),
    decode,
    async getDesired(keys, o) {
      const res = await ctrl.getDesiredDeploymentStates({ region, deploymentIds: keys }, o);
      const states: DesiredEntry<ApplyDeployment, DeleteDeployment>[] = [];
      for (const s of res.states) {
        if (s.state.case === "apply") states.push({ key: s.state.value.deploymentId, type: "apply", desired: s.state.value });
        else if (s.state.case === "delete") states.push({ key: s.state.value.deploymentId, type: "delete", ref: s.state.value });
      }
      return { states, notFound: res.notFound };
    },
    async sendReport(request, o) {
      await ctrl.reportDeploymentStatus(request, o);
    },

    keyOf: (obj) => obj.metadata.labels?.[LABEL_DEPLOYMENT_ID],
    refOf: (obj: KubeObject) => ({
      $typeName: "krane.ctrl.v1.DeleteDeployment",
      k8sNamespace: obj.metadata.namespace ?? "",
      k8sName: obj.metadata.name ?? "",
      deploymentId: obj.metadata.labels?.[LABEL_DEPLOYMENT_ID] ?? "",
    }),
    validate: (d) => validateApplyDeployment(d, region),
    validateDelete: validateDeleteDeployment,
    render: (d) => {
      const r = renderDeployment(d, region);
      return [r.networkPolicy, r.replicaSet];
    },

    async apply(d, rendered, ctx, signal) {
      const { namespace } = renderDeployment(d, region);
      if (!ensuredNamespaces.has(d.k8sNamespace)) {
        await ctx.kube.create(resources.namespaces, namespace, signal);
        ensuredNamespaces.add(d.k8sNamespace);
      }
      try {
        // The network policy first: pods must never run without their ingress fence.
        for (const obj of rendered) {
          // Objects shared by an environment's deployments are applied only when they differ.
          if (ctx.isCurrent(obj)) continue;
          const r = obj.kind === "CiliumNetworkPolicy" ? resources.ciliumNetworkPolicies : resources.replicaSets;
          await ctx.kube.apply(r, obj, { force: true, signal });
        }
      } catch (err) {
        // The namespace may have been deleted behind our back; check it again next time.
        ensuredNamespaces.delete(d.k8sNamespace);
        throw err;
      }
    },

    async remove(_key, ref, ctx, signal) {
      await ctx.kube.delete(resources.replicaSets, ref.k8sNamespace, ref.k8sName, signal);
      // The environment's network policy stays while any deployment of the environment may
      // still need it; collectGarbage removes it once none is left.
    },

    rejectedReport: (key, subject, reason) =>
      create(ReportDeploymentStatusRequestSchema, {
        region,
        change: {
          case: "rejected",
          value: { deploymentId: key, k8sName: "desired" in subject ? subject.desired.k8sName : subject.ref.k8sName, reason },
        },
      }),
    deletedReport: (key, ref) =>
      create(ReportDeploymentStatusRequestSchema, {
        region,
        change: { case: "delete", value: { deploymentId: key, k8sName: ref.k8sName } },
      }),

    observe(ctx) {
      const pods = ctx.cache(resources.pods);
      pods.onChange((_type, obj) => {
        const key = obj.metadata.labels?.[LABEL_DEPLOYMENT_ID];
        if (key !== undefined && ctx.isActive(key)) this.refreshStatus?.(key, ctx);
      });
    },

    refreshStatus(key, ctx) {
      const rs = ctx.cache(resources.replicaSets).byIndex(key)[0];
      if (!rs || !ctx.isActive(key)) return;
      const k8sName = rs.metadata.name ?? "";
      const instances = instancesOf(ctx.cache(resources.pods).byIndex(key), zoneOf(ctx));
      ctx.report(
        key,
        instancesFingerprint(k8sName, instances),
        create(ReportDeploymentStatusRequestSchema, {
          region,
          change: { case: "update", value: { k8sName, deploymentId: key, instances } },
        }),
      );
    },

    async collectGarbage(ctx, active, signal) {
      // Environment network policies whose environment has no active deployment left here.
      const liveEnvs = new Set<string>();
      for (const key of active) {
        const d = ctx.desiredOf(key);
        const env = d?.environmentId ?? ctx.cache(resources.replicaSets).byIndex(key)[0]?.metadata.labels?.[LABEL_ENVIRONMENT_ID];
        if (env !== undefined) liveEnvs.add(env);
      }
      for (const cnp of ctx.cache(resources.ciliumNetworkPolicies).list()) {
        const env = cnp.metadata.labels?.[LABEL_ENVIRONMENT_ID];
        if (env === undefined || liveEnvs.has(env)) continue;
        ctx.log.info({ controller: "deployments", policy: cnp.metadata.name }, "deleting network policy of an environment with no deployments");
        await ctx.kube.delete(resources.ciliumNetworkPolicies, cnp.metadata.namespace, cnp.metadata.name ?? "", signal);
      }
    },
  };
}
