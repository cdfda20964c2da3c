// The release controller kind: releases of arbitrary allow-listed objects on the
// shared runtime. Key = release id.
//   owns     the release's inventory ConfigMap (one per release and region; ./render.ts)
//   reads    the manager's shared cache of each kind the releases hold, added while the agent runs
//            (./caches.ts), resolved through discovery (./discovery.ts): drift, health, events
//            and the prune sweep's label query
// Apply (only when something differs from the caches): each object (16 at a time) with
// server-side apply under the field manager "krane-release" (force), labelled with the release,
// its identity and the version; the Secrets' values fetched from ctrl (GetSecretValues, one call
// per version) only to be applied. A kind the cluster does not serve (CRD missing) or the API server refuses (RBAC,
// the fence, validation) is recorded as that object's status — the other objects still go, and
// the key does not retry in a storm: a missing kind is looked at again at the next resync. Then the inventory, then prune:
//   - from the caches: live objects of the release (label) that the version no longer names, in
//     every kind it ever had (ctrl's release_kinds, the inventory's kinds, this version's);
//   - for kinds the agent cannot list (Secrets): a collection delete of the release's objects of
//     another version (every object of this version carries its version label).
// Status: per object, health from its live state (./health.ts) or the recorded failure.
// Delete: every object of the release in every kind it ever had, then the inventory.
// After each resync, the sweep deletes objects of releases this region no longer has (found by
// label in every cached kind), and looks again at kinds that were missing.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  ObjectHealth,
  ReleaseKindSchema,
  ReleaseObjectStatusSchema,
  ReportReleaseStatusRequestSchema,
  type ApplyRelease,
  type DeleteRelease,
  type ReleaseObjectStatus,
  type ReleaseState,
  type ReportReleaseStatusRequest,
  ReleaseStateSchema,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import {
  LABEL_RELEASE_ID,
  LABEL_RELEASE_OBJECT,
  LABEL_RELEASE_VERSION,
  RELEASE_FIELD_MANAGER,
} from "../../contracts/releases.js";
import { isPermanentKubeError, type KubeClient } from "../../kube/client.js";
import { resources, type ResourceType } from "../../kube/resources.js";
import { controller, type ControllerDeclaration, type KindContext, type StatusReport } from "../runtime/builder.js";
import type { KindEnv } from "../runtime/kind.js";
import { WorkspaceNamespaces } from "../runtime/namespaces.js";
import { clusterProtocol } from "../runtime/kstate.js";
import { RELEASE_INDEX, ReleaseCaches, writeOnly } from "./caches.js";
import { Discovery } from "./discovery.js";
import { healthOf } from "./health.js";
import {
  inventoryKeyOf,
  inventoryKinds,
  inventoryName,
  kindKey,
  kindsEver,
  renderInventory,
  renderReleaseObjects,
  type KindRef,
  type RenderedReleaseObject,
} from "./render.js";
import { validateApplyRelease, validateDeleteRelease } from "./validate.js";
import { renderQuotaObjects, rendersWorkspaceQuota } from "../deployments/quota.js";
import { forEachLimit } from "../runtime/limit.js";

export type ReleaseDeclaration = ControllerDeclaration<
  ReleaseState,
  ApplyRelease,
  DeleteRelease,
  ReportReleaseStatusRequest
>;
type Ctx = KindContext<ApplyRelease>;

/** Objects of a release written at once (the agent's Kubernetes QPS limit still applies). */
const APPLY_CONCURRENCY = 16;

/** What applying an object last came to, when it did not land (kept per release). */
interface Outcome {
  health: ObjectHealth;
  message: string;
}

export function releasesController({ region, ctrl }: KindEnv): ReleaseDeclaration {
  let kube: KubeClient | undefined;
  let caches: ReleaseCaches | undefined;
  let discovery: Discovery | undefined;
  let enqueue: (key: string) => void = () => undefined;
  /** Per release: objects that did not land in its current version, and why. */
  const outcomes = new Map<string, { version: bigint; byObject: Map<string, Outcome> }>();
  /** Workspace namespaces this process created or found (a release may come before any deployment). */
  const namespaces = new WorkspaceNamespaces();
  /** Sealed Secrets applied by this process, per release version and object. */
  const sealedApplied = new Set<string>();
  /** Per release: the version whose write-only kinds were swept by this process. */
  const sweptVersion = new Map<string, bigint>();

  const report = (
    change: MessageInitShape<typeof ReportReleaseStatusRequestSchema>["change"],
  ): ReportReleaseStatusRequest => create(ReportReleaseStatusRequestSchema, { region, change });

  const setup = (ctx: Ctx): { caches: ReleaseCaches; discovery: Discovery } => {
    kube ??= ctx.kube;
    enqueue = (k) => ctx.enqueue(k);
    caches ??= new ReleaseCaches(
      (r) => ctx.cache(r),
      (k) => enqueue(k),
    );
    discovery ??= new Discovery(ctx.kube);
    return { caches, discovery };
  };

  const record = (releaseId: string, version: bigint, objectId: string, outcome: Outcome | undefined): void => {
    let o = outcomes.get(releaseId);
    if (!o || o.version !== version) outcomes.set(releaseId, (o = { version, byObject: new Map() }));
    if (outcome) o.byObject.set(objectId, outcome);
    else o.byObject.delete(objectId);
  };

  /** Resolves a kind to its resource and cache; a missing or cluster-scoped kind is an outcome. */
  const resolve = async (k: KindRef, signal: AbortSignal): Promise<{ resource: ResourceType } | Outcome> => {
    const d = discovery as Discovery;
    const res = await d.resolve(k, signal);
    if (res.type === "missing") return { health: ObjectHealth.KIND_MISSING, message: res.reason };
    if (!res.resource.namespaced)
      return {
        health: ObjectHealth.REFUSED,
        message: `${k.kind} is cluster-scoped on this cluster: a release holds only namespaced objects`,
      };
    await (caches as ReleaseCaches).ensure(res.resource);
    return { resource: res.resource };
  };

  /** The data of the version's sealed Secrets not applied yet by this process: one GetSecretValues call. */
  const sealedData = async (
    r: ApplyRelease,
    objects: readonly RenderedReleaseObject[],
    signal: AbortSignal,
  ): Promise<Map<string, Record<string, string>>> => {
    const out = new Map<string, Record<string, string>>();
    if (!objects.some((o) => o.sealed && !sealedApplied.has(`${r.releaseId}/${r.version}/${o.id}`))) return out;
    const { releaseObjects } = await ctrl.getSecretValues(
      { region, owner: { case: "releaseVersion", value: { releaseId: r.releaseId, version: r.version } } },
      { signal, timeoutMs: 10_000 },
    );
    for (const x of releaseObjects) {
      const data: Record<string, string> = {};
      for (const v of x.values) data[v.key] = Buffer.from(v.value).toString("base64");
      out.set(x.objectId, data);
    }
    return out;
  };

  const applyOne = async (
    r: ApplyRelease,
    o: RenderedReleaseObject,
    resource: ResourceType,
    sealed: ReadonlyMap<string, Record<string, string>>,
    ctx: Ctx,
    signal: AbortSignal,
  ): Promise<void> => {
    let obj = o.object;
    const sealedKey = `${r.releaseId}/${r.version}/${o.id}`;
    if (o.sealed) {
      if (sealedApplied.has(sealedKey)) return;
      const data = sealed.get(o.id);
      if (!data)
        throw new Error(`ctrl sent no values for sealed object ${o.id} of release ${r.releaseId} version ${r.version}`);
      obj = { ...obj, data };
    } else if (ctx.isCurrent(obj)) {
      return;
    }
    try {
      await ctx.kube.apply(resource, obj, { force: true, signal, fieldManager: RELEASE_FIELD_MANAGER });
      record(r.releaseId, r.version, o.id, undefined);
      if (o.sealed) sealedApplied.add(sealedKey);
    } catch (err) {
      if (isPermanentKubeError(err)) {
        record(r.releaseId, r.version, o.id, {
          health: ObjectHealth.REFUSED,
          message: err instanceof Error ? err.message : String(err),
        });
        return;
      }
      throw err;
    }
  };

  /** Deletes the release's live objects that `keep` does not name, in the given kinds. */
  const prune = async (
    releaseId: string,
    namespace: string,
    kinds: readonly KindRef[],
    keep: ReadonlySet<string>,
    version: bigint | undefined,
    signal: AbortSignal,
  ): Promise<void> => {
    const c = caches as ReleaseCaches;
    const d = discovery as Discovery;
    for (const k of kinds) {
      const res = await d.resolve(k, signal);
      if (res.type === "missing" || !res.resource.namespaced) continue;
      const r = res.resource;
      if (writeOnly(r)) {
        // Not listable: every object of the release not applied by this version goes.
        if (version !== undefined && sweptVersion.get(`${releaseId}/${kindKey(k)}`) === version) continue;
        const selector =
          version === undefined
            ? `${LABEL_RELEASE_ID}=${releaseId}`
            : `${LABEL_RELEASE_ID}=${releaseId},${LABEL_RELEASE_VERSION}!=${version}`;
        await (kube as KubeClient).deleteCollection(r, namespace, selector, signal);
        if (version !== undefined) sweptVersion.set(`${releaseId}/${kindKey(k)}`, version);
        continue;
      }
      const inf = await c.ensure(r);
      for (const live of inf?.byIndex(RELEASE_INDEX, releaseId) ?? []) {
        if (live.metadata.deletionTimestamp) continue;
        if (keep.has(`${r.group}/${r.kind}/${live.metadata.namespace ?? ""}/${live.metadata.name ?? ""}`)) continue;
        await (kube as KubeClient).delete(r, live.metadata.namespace, live.metadata.name ?? "", signal);
      }
    }
  };

  const statuses = (r: ApplyRelease): ReleaseObjectStatus[] => {
    const rendered = renderReleaseObjects(r, region);
    const out = outcomes.get(r.releaseId);
    return rendered.map((o) => {
      const base = {
        id: o.id,
        kind: create(ReleaseKindSchema, o.kind),
        namespace: r.k8sNamespace,
        name: o.object.metadata.name ?? "",
      };
      const failed = out?.version === r.version ? out.byObject.get(o.id) : undefined;
      if (failed) return create(ReleaseObjectStatusSchema, { ...base, health: failed.health, message: failed.message });
      if (o.sealed) {
        return create(ReleaseObjectStatusSchema, {
          ...base,
          health: sealedApplied.has(`${r.releaseId}/${r.version}/${o.id}`)
            ? ObjectHealth.HEALTHY
            : ObjectHealth.UNSPECIFIED,
          message: "",
        });
      }
      const live = caches?.forObject(o.object)?.get(r.k8sNamespace, base.name);
      if (!live)
        return create(ReleaseObjectStatusSchema, {
          ...base,
          health: ObjectHealth.PROGRESSING,
          message: "not applied yet",
        });
      const h = healthOf(live);
      return create(ReleaseObjectStatusSchema, { ...base, health: h.health, message: h.message });
    });
  };

  /** The Namespace, the objects (a kind missing or refused is recorded), the inventory, then prune. */
  const apply = async (r: ApplyRelease, ctx: Ctx, signal: AbortSignal): Promise<void> => {
    setup(ctx);
    await namespaces.ensure(ctx.kube, r.k8sNamespace, r.workspaceId, signal);
    // The namespace's quota objects before any of the release's (a Job's pods need its defaults).
    for (const q of renderQuotaObjects(r.workspaceQuota, r.k8sNamespace))
      if (!ctx.isCurrent(q))
        await ctx.apply(q.kind === "LimitRange" ? resources.limitRanges : resources.resourceQuotas, q, signal);
    const rendered = renderReleaseObjects(r, region);
    const keep = new Set<string>();
    const writes: { o: RenderedReleaseObject; resource: ResourceType }[] = [];
    for (const o of rendered) {
      const res = await resolve(o.kind, signal);
      if (!("resource" in res)) {
        record(r.releaseId, r.version, o.id, res);
        continue;
      }
      keep.add(`${res.resource.group}/${res.resource.kind}/${r.k8sNamespace}/${o.object.metadata.name ?? ""}`);
      writes.push({ o, resource: res.resource });
    }
    // The objects do not depend on each other for the API server (as with kubectl, a Job
    // naming a ServiceAccount applied later just waits for it), so they go
    // APPLY_CONCURRENCY at a time; the first retriable failure fails the key after the others.
    const sealed = await sealedData(
      r,
      writes.map((w) => w.o),
      signal,
    );
    await forEachLimit(writes, APPLY_CONCURRENCY, ({ o, resource }) => applyOne(r, o, resource, sealed, ctx, signal));
    const inventory = renderInventory(r, region);
    if (!ctx.isCurrent(inventory)) await ctx.kube.apply(resources.configMaps, inventory, { force: true, signal });
    const live = ctx.primaryOf(r.releaseId);
    await prune(r.releaseId, r.k8sNamespace, kindsEver(r, live ? inventoryKinds(live) : []), keep, r.version, signal);
  };

  /** Every object of the release in every kind it ever had, then the inventory. */
  const remove = async (key: string, ref: DeleteRelease, ctx: Ctx, signal: AbortSignal): Promise<void> => {
    setup(ctx);
    const live = ctx.primaryOf(key);
    const kinds = kindsEver({ kindsEver: ref.kindsEver, objects: [] }, live ? inventoryKinds(live) : []);
    await prune(key, ref.k8sNamespace, kinds, new Set(), undefined, signal);
    await ctx.kube.delete(resources.configMaps, ref.k8sNamespace, inventoryName(key), signal);
    outcomes.delete(key);
    for (const k of [...sweptVersion.keys()]) if (k.startsWith(`${key}/`)) sweptVersion.delete(k);
  };

  /** Per object, its health from the caches or what applying it came to. */
  const status = (key: string, r: ApplyRelease): StatusReport<ReportReleaseStatusRequest> => {
    const objects = statuses(r);
    return {
      fingerprint: JSON.stringify([String(r.version), objects.map((o) => [o.id, o.health, o.message])]),
      report: report({ case: "update", value: { releaseId: key, version: r.version, objects } }),
    };
  };

  const builder = controller<ReleaseState, ApplyRelease, DeleteRelease, ReportReleaseStatusRequest>("releases")
    .protocol(
      clusterProtocol(
        { region, ctrl },
        { state: ReleaseStateSchema, report: ReportReleaseStatusRequestSchema, key: "releaseId" },
      ),
    )
    .owns(resources.configMaps, {
      keyOf: inventoryKeyOf,
      refOf: (cm) => ({
        $typeName: "krane.ctrl.v1.DeleteRelease",
        releaseId: cm.metadata.labels?.[LABEL_RELEASE_ID] ?? "",
        k8sNamespace: cm.metadata.namespace ?? "",
        kindsEver: inventoryKinds(cm).map((k) => create(ReleaseKindSchema, k)),
      }),
    });
  return rendersWorkspaceQuota(builder, (r) => r.k8sNamespace)
    .reconciler({
      validate: (r) => validateApplyRelease(r, region),
      validateDelete: validateDeleteRelease,
      render: (r) => [...renderQuotaObjects(r.workspaceQuota, r.k8sNamespace), renderInventory(r, region)],
      cacheFor: (obj) => caches?.forObject(obj),

      async reconcile(key, want, ctx, signal) {
        if (want.type === "delete") {
          await remove(key, want.ref, ctx, signal);
          return ctx.deleted(key, want, signal);
        }
        const r = want.desired;
        // The objects themselves beside the inventory: compared with the caches of the kinds they
        // are (cacheFor), so a resync or an event that finds nothing changed writes nothing.
        const objects = [...want.rendered, ...renderReleaseObjects(r, region).map((o) => o.object)];
        const result = await ctx.sync(key, objects, signal, () => apply(r, ctx, signal));
        if (result.type === "done") ctx.report(key, () => status(key, r));
        return result;
      },

      async collectGarbage(ctx, active, signal) {
        const { caches: c } = setup(ctx);
        // Objects of releases this region does not have (their inventory lost, or never
        // recorded): found by label in every kind a cache runs for.
        for (const inf of c.all()) {
          for (const live of inf.list()) {
            const rel = live.metadata.labels?.[LABEL_RELEASE_ID];
            if (rel === undefined || active.has(rel) || live.metadata.deletionTimestamp) continue;
            if (live.metadata.labels?.[LABEL_RELEASE_OBJECT] === undefined) continue;
            ctx.log.info(
              { controller: "releases", release: rel, object: `${live.kind}/${live.metadata.name}` },
              "deleting an object of a release this region does not have",
            );
            await ctx.kube.delete(inf.resource, live.metadata.namespace, live.metadata.name ?? "", signal);
          }
        }
        // Releases with a kind that was missing: look again (the CRD may be installed now).
        for (const [releaseId, o] of outcomes) {
          if ([...o.byObject.values()].some((x) => x.health === ObjectHealth.KIND_MISSING)) ctx.enqueue(releaseId);
        }
      },
    })
    .build();
}
