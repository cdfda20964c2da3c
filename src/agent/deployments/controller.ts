// The deployment controller kind: user deployments on the shared runtime. Key = deployment id.
//   owns      ReplicaSets (one per deployment and region)
//   renders   the environment's CiliumNetworkPolicy (shared by its deployments)
//   watches   Pods (an event re-reports the deployment's instance set and instance events), and
//             Warning events about its pods that say why one does not start (events.ts)
//   reads     Nodes (the zone of an instance)
// Apply: the workspace Namespace (created if missing), its quota's LimitRange and ResourceQuota
// (quota.ts: rendered and watched, so one deleted or edited is repaired), the network policy,
// then the ReplicaSet,
// each only when the cache shows it differs; a scale-up first waits for the environment's
// pending scale-downs (order.ts). Status: the deployment's full instance set.
// Delete: the ReplicaSet; the network policy goes with the environment's last deployment here.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  ReportDeploymentStatusRequestSchema,
  type ApplyDeployment,
  type DeleteDeployment,
  type DeploymentState,
  type ReportDeploymentStatusRequest,
  DeploymentStateSchema,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { ZONE_LABEL } from "../../contracts/cluster.js";
import { COMPONENT, LABEL_COMPONENT, LABEL_DEPLOYMENT_ID, LABEL_ENVIRONMENT_ID } from "../../contracts/labels.js";
import type { KubeObject } from "../../kube/object.js";
import { resourceOf, resources } from "../../kube/resources.js";
import {
  controller,
  labelIndex,
  Result,
  type ControllerDeclaration,
  type KindContext,
  type StatusReport,
} from "../runtime/builder.js";
import { oneKey, type KindEnv } from "../runtime/kind.js";
import type { SecretStoreEnv } from "./secret-store.js";
import { clusterProtocol } from "../runtime/kstate.js";
import { trimEvent, trimNode, trimPod } from "../runtime/trim.js";
import { scaleDownsFirst, SCALE_UP_RECHECK_MS, SCALE_UP_WAIT_MS, type Sibling } from "./order.js";
import { deploymentLabels, renderDeployment } from "./render.js";
import { PullSecrets } from "./pull-secret.js";
import { renderQuotaObjects, rendersWorkspaceQuota } from "./quota.js";
import { renderConfigMap, renderSecret, renderSecretProviderClass, secretNameOfReplicaSet } from "./settings.js";
import { cannotStart, eventsFingerprint, eventsKey, eventsOf } from "./events.js";
import { boostKey, DEFAULT_BOOST_MILLICORES, StartupBoost, type BoostSettings } from "./boost.js";
import { instanceKey, instancesFingerprint, instancesOf } from "./status.js";
import { validateApplyDeployment, validateDeleteDeployment } from "./validate.js";

type Ctx = KindContext<ApplyDeployment>;
export type DeploymentDeclaration = ControllerDeclaration<
  DeploymentState,
  ApplyDeployment,
  DeleteDeployment,
  ReportDeploymentStatusRequest
>;

/** The deployment id of a user-deployment object (ReplicaSet, Pod), or undefined. */
export function deploymentKeyOf(obj: KubeObject): string | undefined {
  const labels = obj.metadata.labels;
  return labels?.[LABEL_COMPONENT] === COMPONENT.deployment ? labels[LABEL_DEPLOYMENT_ID] : undefined;
}

/**
 * The region's autoscaler as the deployment kind sees it (src/agent/autoscale): its own size of a
 * settled environment's target, which the render uses while ctrl has not caught up.
 */
export interface ReplicaSizer {
  sized(d: ApplyDeployment): ApplyDeployment;
  /** Runs while the kind runs: the sizer reads its desired states and re-renders keys. */
  attachDeployments(ctx: KindContext<ApplyDeployment>, signal: AbortSignal): Promise<void>;
}

/** The index of Warning events by the pod they are about ("namespace/name"). */
const EVENTS_BY_POD = "involved-pod";

function podOfEvent(ev: KubeObject): string | undefined {
  const name = (ev as { involvedObject?: { name?: unknown } }).involvedObject?.name;
  return typeof name === "string" ? `${ev.metadata.namespace ?? ""}/${name}` : undefined;
}

/** What a Warning event contributes to a report (its reason, first time and message; "" for others). */
function warningKey(ev: KubeObject | undefined): string {
  if (ev === undefined) return "";
  const e = ev as { reason?: unknown; message?: unknown; firstTimestamp?: unknown };
  return `${String(e.reason)}|${String(e.firstTimestamp)}|${String(e.message)}`;
}

/** The deployment kind's own settings. */
export interface DeploymentEnv {
  /** Startup CPU boost (./boost.ts); default DEFAULT_BOOST_MILLICORES. */
  readonly startupBoost?: BoostSettings;
}

export function deploymentsController(
  { region, ctrl, secretStore, startupBoost }: KindEnv & SecretStoreEnv & DeploymentEnv,
  autoscaler?: ReplicaSizer,
): DeploymentDeclaration {
  const boost = new StartupBoost(startupBoost ?? { millicores: DEFAULT_BOOST_MILLICORES });
  const zoneOf =
    (ctx: Ctx) =>
    (node: string): string =>
      ctx.informer(resources.nodes).get(undefined, node)?.metadata.labels?.[ZONE_LABEL] ?? "";
  // Namespaces are shared and never deleted by an agent; once created they are assumed present
  // (a failed apply checks again). Keys of one namespace reconciled at once share one create.
  const ensuredNamespaces = new Map<string, Promise<unknown>>();
  // Scale-ups waiting for their siblings' scale-downs (order.ts): key → since when.
  const waiting = new Map<string, number>();
  const replicasOf = (rs: KubeObject | undefined): number | undefined => {
    const r = (rs?.spec as { replicas?: unknown } | undefined)?.replicas;
    return typeof r === "number" ? r : undefined;
  };
  /** A requeue while a scale-up of `d` must wait for an environment sibling to shrink. */
  const holdScaleUp = (d: ApplyDeployment, ctx: Ctx): Result | undefined => {
    const key = d.deploymentId;
    const siblings: Sibling[] = [];
    for (const rs of ctx.informer(resources.replicaSets).byIndex(labelIndex(LABEL_ENVIRONMENT_ID), d.environmentId)) {
      const k = deploymentKeyOf(rs);
      if (k === undefined || k === key) continue;
      siblings.push({ key: k, liveReplicas: replicasOf(rs) ?? 0, desiredReplicas: ctx.desiredOf(k)?.replicas });
    }
    const blockers = scaleDownsFirst(key, d.replicas, replicasOf(ctx.primaryOf(key)), siblings);
    const since = waiting.get(key);
    if (blockers.length === 0 || (since !== undefined && Date.now() - since > SCALE_UP_WAIT_MS)) {
      waiting.delete(key);
      return undefined;
    }
    if (since === undefined) waiting.set(key, Date.now());
    ctx.log.debug({ controller: "deployments", key, waitsFor: blockers }, "scale-up waits for scale-downs");
    return Result.requeueAfter(SCALE_UP_RECHECK_MS);
  };
  const report = (
    change: MessageInitShape<typeof ReportDeploymentStatusRequestSchema>["change"],
  ): ReportDeploymentStatusRequest => create(ReportDeploymentStatusRequestSchema, { region, change });

  // The revisions' Secrets this process created or found (the agent cannot read
  // Secrets: a create that answers "exists" is how it finds one). Values are fetched from ctrl
  // only to create a Secret, and never kept.
  const createdSecrets = new Set<string>();
  const ensureSecret = async (d: ApplyDeployment, ctx: Ctx, signal: AbortSignal): Promise<void> => {
    const s = d.secrets;
    if (!s || s.keys.length === 0) return;
    const id = `${d.k8sNamespace}/${s.secretName}`;
    if (createdSecrets.has(id)) return;
    const { values } = await ctrl.getSecretValues(
      { region, owner: { case: "deploymentId", value: d.deploymentId } },
      { signal, timeoutMs: 10_000 },
    );
    await ctx.kube.create(
      resources.secrets,
      renderSecret(s, d.k8sNamespace, deploymentLabels(d, region), values),
      signal,
    );
    createdSecrets.add(id);
  };
  // The workspace's pull Secret (./pull-secret.ts): written before the ReplicaSet that names it.
  const pullSecrets = new PullSecrets();
  const ensurePullSecret = (d: ApplyDeployment, ctx: Ctx, signal: AbortSignal): Promise<void> =>
    pullSecrets.ensure(
      ctx.kube,
      {
        namespace: d.k8sNamespace,
        pullSecret: d.pullSecret,
        live: ctx.primaryOf(d.deploymentId),
        fetch: async (s) =>
          (
            await ctrl.getSecretValues(
              { region, owner: { case: "deploymentPullSecret", value: d.deploymentId } },
              { signal: s, timeoutMs: 10_000 },
            )
          ).values,
      },
      signal,
    );
  /** The Namespace, its quota, then each rendered object that differs; a scale-up may first have to wait. */
  const apply = async (
    d: ApplyDeployment,
    rendered: readonly KubeObject[],
    ctx: Ctx,
    signal: AbortSignal,
  ): Promise<Result | undefined> => {
    const wait = holdScaleUp(d, ctx);
    if (wait) return wait;
    try {
      let ns = ensuredNamespaces.get(d.k8sNamespace);
      if (!ns)
        ensuredNamespaces.set(
          d.k8sNamespace,
          (ns = ctx.kube.create(resources.namespaces, renderDeployment(d, region).namespace, signal)),
        );
      await ns;
      for (const obj of rendered) {
        // The revision's Secret and the pull Secret go right before the ReplicaSet (their values come from ctrl).
        if (obj.kind === "ReplicaSet") {
          await ensureSecret(d, ctx, signal);
          await ensurePullSecret(d, ctx, signal);
        }
        // Objects shared by an environment's deployments are applied only when they differ
        // (and once, when several of its deployments find them missing at the same time).
        if (ctx.isCurrent(obj)) continue;
        const r = resourceOf(obj);
        if (!r) throw new Error(`deployment ${d.deploymentId}: no resource type for ${obj.apiVersion}/${obj.kind}`);
        await ctx.apply(r, obj, signal);
      }
    } catch (err) {
      // The namespace may have been deleted behind our back; check it again next time.
      ensuredNamespaces.delete(d.k8sNamespace);
      throw err;
    }
    return undefined;
  };

  /** The ReplicaSet and the revision's Secret (the rest carries its id and is pruned). */
  const remove = async (key: string, ref: DeleteDeployment, ctx: Ctx, signal: AbortSignal): Promise<void> => {
    waiting.delete(key);
    boost.forget(key);
    await ctx.kube.delete(resources.replicaSets, ref.k8sNamespace, ref.k8sName, signal);
    // The revision's Secret by name (the agent cannot list Secrets); its ConfigMap and
    // SecretProviderClass carry its id and are pruned by the runtime right after.
    const secret =
      ref.secretName !== ""
        ? ref.secretName
        : secretNameOfReplicaSet(ctx.primaryOf(ref.deploymentId) ?? { metadata: {} });
    if (secret !== "") {
      await ctx.kube.delete(resources.secrets, ref.k8sNamespace, secret, signal);
      createdSecrets.delete(`${ref.k8sNamespace}/${secret}`);
    }
    // The environment's network policy stays while any deployment of the environment may
    // still need it; collectGarbage removes it once none is left.
  };

  /** The deployment's full instance set and its instance events, from the caches. */
  const status = (key: string, ctx: Ctx): StatusReport<ReportDeploymentStatusRequest> | undefined => {
    const rs = ctx.primaryOf(key);
    if (!rs) return undefined;
    const k8sName = rs.metadata.name ?? "";
    const pods = ctx.informer(resources.pods).byIndex(labelIndex(LABEL_DEPLOYMENT_ID), key);
    const warnings = ctx.informer(resources.podWarningEvents);
    if (!warnings.hasIndex(EVENTS_BY_POD)) warnings.addIndex(EVENTS_BY_POD, podOfEvent);
    const warningsOf = (pod: KubeObject): KubeObject[] =>
      warnings.byIndex(EVENTS_BY_POD, `${pod.metadata.namespace ?? ""}/${pod.metadata.name ?? ""}`);
    const instances = instancesOf(pods, zoneOf(ctx), (pod) => cannotStart(pod, warningsOf(pod)));
    const events = eventsOf(pods, warningsOf);
    // Events are part of the fingerprint: a new one is a change to report, the same ones
    // seen again are not.
    const fingerprint = `${instancesFingerprint(k8sName, instances)}|${eventsFingerprint(events)}`;
    return {
      fingerprint,
      report: report({ case: "update", value: { k8sName, deploymentId: key, instances, events } }),
    };
  };

  const builder = controller<DeploymentState, ApplyDeployment, DeleteDeployment, ReportDeploymentStatusRequest>(
    "deployments",
  )
    .protocol(
      clusterProtocol(
        { region, ctrl },
        { state: DeploymentStateSchema, report: ReportDeploymentStatusRequestSchema, key: "deploymentId" },
      ),
    )
    // A revision's ConfigMap (and SecretProviderClass) carry its id and go with it.
    .ownedBy(LABEL_DEPLOYMENT_ID)
    .owns(resources.replicaSets, {
      keyOf: deploymentKeyOf,
      // The report names the ReplicaSet; a change of its spec (replicas) changes no instance.
      statusChanged: (rs, old) => rs?.metadata.name !== old?.metadata.name,
      refOf: (obj) => ({
        $typeName: "krane.ctrl.v1.DeleteDeployment",
        k8sNamespace: obj.metadata.namespace ?? "",
        k8sName: obj.metadata.name ?? "",
        deploymentId: obj.metadata.labels?.[LABEL_DEPLOYMENT_ID] ?? "",
        secretName: secretNameOfReplicaSet(obj),
      }),
      labelIndexes: [LABEL_ENVIRONMENT_ID],
    })
    .renders(resources.configMaps, { keysOf: (cm) => oneKey(deploymentKeyOf(cm)) })
    .renders(resources.ciliumNetworkPolicies, {
      // A policy event concerns the deployments of its environment.
      keysOf: function* (cnp, ctx) {
        const env = cnp.metadata.labels?.[LABEL_ENVIRONMENT_ID];
        if (env === undefined) return;
        for (const rs of ctx.informer(resources.replicaSets).byIndex(labelIndex(LABEL_ENVIRONMENT_ID), env)) {
          const k = deploymentKeyOf(rs);
          if (k !== undefined) yield k;
        }
      },
    })
    .watches(resources.pods, {
      keysOf: (pod) => oneKey(deploymentKeyOf(pod)),
      // Only a change of what is reported (the instance, its events) concerns the deployment: a
      // pod added before it has an address, or deleted without one, changes nothing.
      changed: (pod, old) => {
        const now = instanceKey(pod);
        if (now !== instanceKey(old)) return true;
        if (eventsKey(pod) !== eventsKey(old)) return true;
        if (boostKey(pod) !== boostKey(old)) return true;
        return now !== "" && pod !== undefined && old !== undefined && deploymentKeyOf(pod) !== deploymentKeyOf(old);
      },
      labelIndexes: [LABEL_DEPLOYMENT_ID],
      trim: trimPod,
    })
    // Every Warning event about a pod (the resource's field selector), not only krane's: events
    // carry no labels. Only the start failures of krane's pods reach a report.
    .watches(resources.podWarningEvents, {
      selector: "",
      keysOf: (ev, ctx) => {
        const [ns, name] = [ev.metadata.namespace, (ev as { involvedObject?: { name?: string } }).involvedObject?.name];
        const pod = ns === undefined || name === undefined ? undefined : ctx.informer(resources.pods).get(ns, name);
        return oneKey(pod === undefined ? undefined : deploymentKeyOf(pod));
      },
      changed: (ev, old) => warningKey(ev) !== warningKey(old),
      trim: trimEvent,
    })
    .reads(resources.nodes, { selector: ZONE_LABEL, trim: trimNode });
  rendersWorkspaceQuota(builder, (d) => d.k8sNamespace);
  // External secrets only where this cluster has a store: the SecretProviderClass CRD exists only there.
  if (secretStore) builder.renders(resources.secretProviderClasses, { keysOf: (spc) => oneKey(deploymentKeyOf(spc)) });
  return builder
    .reconciler({
      validate: (d) => validateApplyDeployment(d, region, secretStore !== undefined),
      validateDelete: validateDeleteDeployment,
      render: (desired) => {
        const d = autoscaler ? autoscaler.sized(desired) : desired;
        const r = renderDeployment(d, region);
        const labels = deploymentLabels(d, region);
        const settings: KubeObject[] = [];
        if (d.config && d.config.values.length > 0) settings.push(renderConfigMap(d.config, d.k8sNamespace, labels));
        if (secretStore && d.externalSecrets && d.externalSecrets.secrets.length > 0) {
          settings.push(renderSecretProviderClass(d.externalSecrets, secretStore, d.k8sNamespace, labels));
        }
        // The namespace's quota objects first (./quota.ts: a workload is never written before
        // them), the network policy next: pods must never run without their ingress fence;
        // then what the pods read; the ReplicaSet last.
        return [...renderQuotaObjects(d.workspaceQuota, d.k8sNamespace), r.networkPolicy, ...settings, r.replicaSet];
      },

      async reconcile(key, want, ctx, signal) {
        if (want.type === "delete") {
          await remove(key, want.ref, ctx, signal);
          return ctx.deleted(key, want, signal);
        }
        // The autoscaler's own size of a settled target, where it has one (src/agent/autoscale).
        const d = autoscaler ? autoscaler.sized(want.desired) : want.desired;
        const result = await ctx.sync(key, want.rendered, signal, () => apply(d, want.rendered, ctx, signal));
        if (result.type !== "done") return result;
        ctx.report(key, () => status(key, ctx));
        // Starting pods get the boosted CPU limit, Ready ones their own back; look again when a boost's window ends.
        const pods = ctx.informer(resources.pods).byIndex(labelIndex(LABEL_DEPLOYMENT_ID), key);
        const after = await boost.apply(ctx.kube, key, pods, Number(d.cpuMillicores), signal, (pod, err) =>
          // Counted (krane_agent_startup_cpu_boosts_total{step="refused"}); KWOK's nodes refuse every resize.
          ctx.log.debug(
            { controller: "deployments", key, pod, err: err instanceof Error ? err.message : String(err) },
            "startup CPU boost resize refused",
          ),
        );
        return after === undefined ? result : Result.requeueAfter(after);
      },

      ...(autoscaler ? { observe: (ctx, signal) => autoscaler.attachDeployments(ctx, signal) } : {}),

      async collectGarbage(ctx, active, signal) {
        // Environment network policies whose environment has no active deployment left here.
        const liveEnvs = new Set<string>();
        for (const key of active) {
          const env = ctx.desiredOf(key)?.environmentId ?? ctx.primaryOf(key)?.metadata.labels?.[LABEL_ENVIRONMENT_ID];
          if (env !== undefined) liveEnvs.add(env);
        }
        for (const cnp of ctx.informer(resources.ciliumNetworkPolicies).list()) {
          const env = cnp.metadata.labels?.[LABEL_ENVIRONMENT_ID];
          if (cnp.metadata.labels?.[LABEL_COMPONENT] !== COMPONENT.deployment || env === undefined || liveEnvs.has(env))
            continue;
          ctx.log.info(
            { controller: "deployments", policy: cnp.metadata.name },
            "deleting network policy of an environment with no deployments",
          );
          await ctx.kube.delete(
            resources.ciliumNetworkPolicies,
            cnp.metadata.namespace,
            cnp.metadata.name ?? "",
            signal,
          );
        }
      },
    })
    .build();
}
