// The caches of the kinds the release kind's releases hold. A release may hold any allow-listed
// kind, so these cannot be declared up front: each is the manager's shared cache of that
// resource (`ctx.cache`), added while the agent runs — the same watch the other kinds read
// (a release's ConfigMaps are in the one ConfigMaps cache), under the manager's watchdog and
// metrics, kept for the life of the agent. Each gets an index by release and a handler that
// re-queues the release of an object that changed. Kinds the agent may write but not read
// (Secrets: RBAC cannot narrow a read to krane's objects, and listing every Secret of the cluster
// is not something a leaked agent token should allow) get no cache: they are pruned by label
// with a collection delete.
import type { Informer } from "../../kube/informer.js";
import type { KubeObject } from "../../kube/object.js";
import type { ResourceType } from "../../kube/resources.js";
import { releaseKeyOf } from "./render.js";

/** The index of a shared cache over the release id of the objects releases hold. */
export const RELEASE_INDEX = "release";

/** Kinds the agent writes without reading (no cache, pruned by collection delete). */
export function writeOnly(r: Pick<ResourceType, "group" | "kind">): boolean {
  return r.group === "" && r.kind === "Secret";
}

export class ReleaseCaches {
  readonly #byKind = new Map<string, Informer>();
  readonly #all = new Set<Informer>();

  constructor(
    /** The manager's shared cache of a resource (see KindContext.cache). */
    private readonly cache: (r: ResourceType) => Promise<Informer>,
    private readonly onChange: (releaseId: string) => void,
  ) {}

  /** The synced cache of a served kind; undefined for write-only kinds. */
  async ensure(r: ResourceType): Promise<Informer | undefined> {
    if (writeOnly(r)) return undefined;
    const inf = await this.cache(r);
    if (!this.#all.has(inf)) {
      this.#all.add(inf);
      if (!inf.hasIndex(RELEASE_INDEX)) inf.addIndex(RELEASE_INDEX, (o) => releaseKeyOf(o));
      inf.onChange((_t, obj) => {
        const k = releaseKeyOf(obj);
        if (k !== undefined) this.onChange(k);
      });
      this.#byKind.set(`${r.group}/${r.kind}`, inf);
    }
    return inf;
  }

  /** The cache an object of this apiVersion/kind is in, if one was asked for (for drift checks). */
  forObject(obj: KubeObject): Informer | undefined {
    const av = obj.apiVersion ?? "";
    const group = av.includes("/") ? (av.split("/")[0] ?? "") : "";
    return this.#byKind.get(`${group}/${obj.kind ?? ""}`);
  }

  /** Every cache asked for (the sweep's label query). */
  all(): Informer[] {
    return [...this.#all];
  }
}
