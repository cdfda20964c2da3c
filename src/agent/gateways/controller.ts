// The gateway controller kind: an environment's exposure in this region (key = gateway id, the
// environment id), on the shared runtime with its own stream, cursor, breaker, queue and resync.
// It runs only on agents configured with a Gateway (--public-gateway / --organization-gateway).
//   owns     the HTTPRoutes (one per route, in the workspace namespace)
//   renders  the ReferenceGrants (to the sentinel Service; to the certificates' Secrets),
//            cert-manager Certificates (with an issuer configured), with --https-gateway-class the
//            environment's Gateway whose HTTPS listeners serve them; with --envoy-gateway-policies
//            it also watches its SecurityPolicies, only so that those an earlier krane rendered
//            are pruned (the sentinel enforces the JWT policy; none is rendered now)
//   watches  the sentinel Services (a route leads to its environment's sentinel Service, looked
//            up in the cache: a sentinel that appears or goes re-renders the routes)
// Status: each route's Accepted/ResolvedRefs from its Gateway and its Certificates' Ready, from
// the caches (route status changes are events). Delete: everything labelled with the gateway id
// goes (the runtime's owner-label pruning); the workspace namespace stays.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  ReportGatewayStatusRequestSchema,
  type ApplyGateway,
  type DeleteGateway,
  type GatewayState,
  type ReportGatewayStatusRequest,
  GatewayStateSchema,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { SENTINEL_NAMESPACE } from "../../contracts/cluster.js";
import { COMPONENT, LABEL_COMPONENT, LABEL_ENVIRONMENT_ID, LABEL_GATEWAY_ID } from "../../contracts/labels.js";
import { isPermanentKubeError } from "../../kube/client.js";
import type { KubeObject } from "../../kube/object.js";
import { resourceOf, resources } from "../../kube/resources.js";
import { sentinelKeyOf } from "../sentinels/controller.js";
import {
  controller,
  labelIndex,
  type ControllerBuilder,
  type ControllerDeclaration,
  type KindContext,
  type StatusReport,
} from "../runtime/builder.js";
import { oneKey, type KindEnv } from "../runtime/kind.js";
import { WorkspaceNamespaces } from "../runtime/namespaces.js";
import type { GatewayEnv, GatewaySettings } from "./settings.js";
import { clusterProtocol } from "../runtime/kstate.js";
import { renderRoutes, renderStatic } from "./render.js";
import { gatewayFingerprint, observeGateway } from "./status.js";
import { validateApplyGateway, validateDeleteGateway } from "./validate.js";

export type GatewayDeclaration = ControllerDeclaration<
  GatewayState,
  ApplyGateway,
  DeleteGateway,
  ReportGatewayStatusRequest
>;
type Ctx = KindContext<ApplyGateway>;

/** The gateway id of an exposure object, or undefined. */
export function gatewayKeyOf(obj: KubeObject): string | undefined {
  const labels = obj.metadata.labels;
  return labels?.[LABEL_COMPONENT] === COMPONENT.gateway ? labels[LABEL_GATEWAY_ID] : undefined;
}

/** The name of the environment's sentinel Service in this region, from the cache. */
function sentinelServiceOf(environmentId: string, ctx: Ctx): string | undefined {
  const names = ctx
    .informer(resources.services)
    .byIndex(labelIndex(LABEL_ENVIRONMENT_ID), environmentId)
    .filter((s) => sentinelKeyOf(s) !== undefined && !s.metadata.deletionTimestamp)
    .map((s) => s.metadata.name ?? "")
    .sort();
  return names[0];
}

export function gatewaysController(env: KindEnv & GatewayEnv): GatewayDeclaration | undefined {
  const settings: GatewaySettings | undefined = env.gateway;
  if (!settings || (!settings.public && !settings.organization)) return undefined;
  const { region } = env;
  const namespaces = new WorkspaceNamespaces();
  const report = (
    change: MessageInitShape<typeof ReportGatewayStatusRequestSchema>["change"],
  ): ReportGatewayStatusRequest => create(ReportGatewayStatusRequestSchema, { region, change });

  /**
   * The workspace Namespace, then each object that differs. Every object gets its chance: one the
   * API server refuses for good (a rejected policy, say) does not keep the others from being
   * applied; the first such refusal is raised at the end (the key is then terminal and reported,
   * not retried).
   */
  const apply = async (
    g: ApplyGateway,
    objects: readonly KubeObject[],
    ctx: Ctx,
    signal: AbortSignal,
  ): Promise<void> => {
    await namespaces.ensure(ctx.kube, g.k8sNamespace, g.workspaceId, signal);
    let refused: unknown;
    try {
      for (const obj of objects) {
        if (ctx.isCurrent(obj)) continue;
        const r = resourceOf(obj);
        if (!r) throw new Error(`gateway ${g.gatewayId}: no resource type for ${obj.apiVersion}/${obj.kind}`);
        try {
          await ctx.kube.apply(r, obj, { force: true, signal });
        } catch (err) {
          if (!isPermanentKubeError(err)) throw err;
          refused ??= err;
        }
      }
    } catch (err) {
      namespaces.forget(g.k8sNamespace);
      throw err;
    }
    if (refused !== undefined) throw refused;
  };

  /** Each route's conditions from its Gateway and its Certificates' Ready, from the caches. */
  const status = (key: string, g: ApplyGateway, ctx: Ctx): StatusReport<ReportGatewayStatusRequest> => {
    const routes = observeGateway(g, settings, sentinelServiceOf(g.environmentId, ctx), {
      route: (ns, name) => ctx.informer(resources.httpRoutes).get(ns, name),
      certificate: (ns, name) =>
        settings.certificateIssuer ? ctx.informer(resources.certificates).get(ns, name) : undefined,
      gateway: (ns, name) => (settings.https ? ctx.informer(resources.gateways).get(ns, name) : undefined),
    });
    return {
      fingerprint: gatewayFingerprint(routes),
      report: report({ case: "update", value: { gatewayId: key, routes } }),
    };
  };

  let b: ControllerBuilder<GatewayState, ApplyGateway, DeleteGateway, ReportGatewayStatusRequest> = controller<
    GatewayState,
    ApplyGateway,
    DeleteGateway,
    ReportGatewayStatusRequest
  >("gateways")
    .protocol(
      clusterProtocol(env, { state: GatewayStateSchema, report: ReportGatewayStatusRequestSchema, key: "gatewayId" }),
    )
    .ownedBy(LABEL_GATEWAY_ID)
    .owns(resources.httpRoutes, {
      keyOf: gatewayKeyOf,
      refOf: (obj) => ({
        $typeName: "krane.ctrl.v1.DeleteGateway",
        gatewayId: gatewayKeyOf(obj) ?? "",
        k8sNamespace: obj.metadata.namespace ?? "",
      }),
      // Its status conditions, reported (./status.ts); so are the certificates' and Gateways'.
      readsStatus: true,
    })
    .renders(resources.referenceGrants, { keysOf: (o) => oneKey(gatewayKeyOf(o)) })
    // The sentinels' Services (the sentinel kind caches the same namespace): the backend of routes.
    .watches(resources.services, {
      namespace: SENTINEL_NAMESPACE,
      keysOf: (svc) => {
        const env = sentinelKeyOf(svc) !== undefined ? svc.metadata.labels?.[LABEL_ENVIRONMENT_ID] : undefined;
        return oneKey(env);
      },
      // Additions and deletions always count (a Service appearing or going is a backend change).
      changed: (svc, old) =>
        svc === undefined ||
        old === undefined ||
        sentinelKeyOf(svc) !== sentinelKeyOf(old) ||
        Boolean(svc.metadata.deletionTimestamp) !== Boolean(old.metadata.deletionTimestamp),
      labelIndexes: [LABEL_ENVIRONMENT_ID],
    });
  if (settings.certificateIssuer)
    b = b.renders(resources.certificates, { keysOf: (o) => oneKey(gatewayKeyOf(o)), readsStatus: true });
  // The environment's own Gateway (HTTPS listeners for its certificates), in its workspace namespace.
  if (settings.https) b = b.renders(resources.gateways, { keysOf: (o) => oneKey(gatewayKeyOf(o)), readsStatus: true });
  // Rendered by no key: the runtime prunes every one it finds labelled with a gateway id.
  if (settings.removeSecurityPolicies)
    b = b.renders(resources.securityPolicies, { keysOf: (o) => oneKey(gatewayKeyOf(o)) });

  return b
    .reconciler({
      validate: (g) => validateApplyGateway(g, region),
      validateDelete: validateDeleteGateway,
      render: (g) => renderStatic(g, region, settings),
      async reconcile(key, want, ctx, signal) {
        // Everything the key wrote carries its gateway id: the runtime's pruning deletes it.
        if (want.type === "delete") return ctx.deleted(key, want, signal);
        const g = want.desired;
        const objects = [
          ...want.rendered,
          ...renderRoutes(g, region, settings, sentinelServiceOf(g.environmentId, ctx)),
        ];
        const result = await ctx.sync(key, objects, signal, () => apply(g, objects, ctx, signal));
        if (result.type === "done") ctx.report(key, () => status(key, g, ctx));
        return result;
      },
    })
    .build();
}
