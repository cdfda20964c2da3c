// Pure rendering of a release (ApplyRelease) in this region: each object from its manifest with
// krane's labels (managed-by, component "release", region, the owning ids, the release, a hash of
// the object's identity, the version that applied it), and the release's inventory: a ConfigMap
// in the workspace namespace recording the version, the objects and every kind the release ever
// had here. The inventory is the kind's primary object (one per release and region): after a
// restart it still names the kinds to sweep, and a release ctrl no longer knows is found by it.
import { createHash } from "node:crypto";
import type { ApplyRelease, ReleaseKind } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { KubeObject } from "../../kube/object.js";
import { COMPONENT, LABEL_COMPONENT, ownerLabels } from "../../contracts/labels.js";
import { LABEL_RELEASE_ID, LABEL_RELEASE_OBJECT, LABEL_RELEASE_VERSION } from "../../contracts/releases.js";

/** The inventory ConfigMap's component label (the release's objects carry COMPONENT.release). */
export const INVENTORY_COMPONENT = "release-inventory";

export interface KindRef {
  group: string;
  version: string;
  kind: string;
}

export function kindKey(k: KindRef): string {
  return `${k.group}/${k.version}/${k.kind}`;
}

export function apiVersionOfKind(k: KindRef): string {
  return k.group === "" ? k.version : `${k.group}/${k.version}`;
}

/** A label-safe hash of an object's identity in its release (ids hold '/'). */
export function objectHash(id: string): string {
  return createHash("sha256").update(id).digest("hex").slice(0, 16);
}

export function releaseLabels(r: ApplyRelease, region: string): Record<string, string> {
  return {
    ...ownerLabels(COMPONENT.release, region, r),
    [LABEL_RELEASE_ID]: r.releaseId,
    [LABEL_RELEASE_VERSION]: String(r.version),
  };
}

export function inventoryName(releaseId: string): string {
  return `krane-release-${releaseId.replace(/_/g, "-").toLowerCase()}`;
}

export interface RenderedReleaseObject {
  id: string;
  kind: KindRef;
  sealed: boolean;
  object: KubeObject;
}

/** The release's objects with krane's labels, in order (the manifests are ctrl-validated JSON). */
export function renderReleaseObjects(r: ApplyRelease, region: string): RenderedReleaseObject[] {
  const base = releaseLabels(r, region);
  return r.objects.map((o) => {
    const parsed = JSON.parse(o.manifestJson) as KubeObject;
    const kind = { group: o.kind?.group ?? "", version: o.kind?.version ?? "", kind: o.kind?.kind ?? "" };
    const labels = { ...(parsed.metadata.labels ?? {}), ...base, [LABEL_RELEASE_OBJECT]: objectHash(o.id) };
    const object: KubeObject = {
      ...parsed,
      apiVersion: apiVersionOfKind(kind),
      kind: kind.kind,
      metadata: { ...parsed.metadata, namespace: r.k8sNamespace, labels },
    };
    return { id: o.id, kind, sealed: o.sealed, object };
  });
}

/** Every kind the release ever had: ctrl's inventory of kinds and this version's. */
export function kindsEver(r: Pick<ApplyRelease, "kindsEver" | "objects">, extra: readonly KindRef[] = []): KindRef[] {
  const all = new Map<string, KindRef>();
  const add = (k: KindRef | ReleaseKind | undefined): void => {
    if (k && k.kind !== "") all.set(kindKey(k), { group: k.group, version: k.version, kind: k.kind });
  };
  for (const k of r.kindsEver) add(k);
  for (const o of r.objects) add(o.kind);
  for (const k of extra) add(k);
  return [...all.values()].sort((a, b) => kindKey(a).localeCompare(kindKey(b)));
}

export function renderInventory(r: ApplyRelease, region: string): KubeObject {
  const labels = { ...releaseLabels(r, region), [LABEL_COMPONENT]: INVENTORY_COMPONENT };
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: inventoryName(r.releaseId), namespace: r.k8sNamespace, labels },
    data: {
      version: String(r.version),
      kinds: JSON.stringify(kindsEver(r)),
      objects: JSON.stringify(r.objects.map((o) => o.id)),
    },
  };
}

/** The kinds an inventory ConfigMap records (for the sweep and deletion after a restart). */
export function inventoryKinds(cm: KubeObject): KindRef[] {
  const data = cm.data as Record<string, string> | undefined;
  try {
    const v: unknown = JSON.parse(data?.kinds ?? "[]");
    return Array.isArray(v)
      ? v.filter((k): k is KindRef => typeof k === "object" && k !== null && typeof (k as KindRef).kind === "string")
      : [];
  } catch {
    return [];
  }
}

export function inventoryKeyOf(obj: KubeObject): string | undefined {
  const labels = obj.metadata.labels;
  return labels?.[LABEL_COMPONENT] === INVENTORY_COMPONENT ? labels[LABEL_RELEASE_ID] : undefined;
}

/** The release an applied object belongs to (its label), or undefined. */
export function releaseKeyOf(obj: KubeObject): string | undefined {
  const labels = obj.metadata.labels;
  return labels?.[LABEL_COMPONENT] === COMPONENT.release ? labels[LABEL_RELEASE_ID] : undefined;
}
