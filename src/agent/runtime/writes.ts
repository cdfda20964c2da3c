// What one controller writes to Kubernetes and how it decides a write is needed: drift checks
// of rendered objects against the shared caches, remembered writes (an applied object is trusted
// while the cache has not moved, so a reconcile in between does not repeat it), applies of the
// same object by several keys at once made one request, and pruning of objects a key no longer
// renders (each deleted version deleted once).
import type { KubeClient } from "../../kube/client.js";
import type { Informer } from "../../kube/informer.js";
import type { KubeObject } from "../../kube/object.js";
import type { ResourceType } from "../../kube/resources.js";
import { labelIndex } from "./builder.js";
import { findDrift } from "./drift.js";
import type { AgentMetrics } from "./metrics.js";

/** How long a remembered write is trusted while the cache does not move (then the cache decides). */
const WRITTEN_TTL_MS = 30_000;

export class ClusterWrites {
  /** kind/apiVersion → informer, for the rendered kinds' drift checks. */
  readonly #renderedCaches = new Map<string, Informer>();
  /**
   * Objects this controller deleted, by "kind/namespace/name" → the resourceVersion deleted: until
   * the cache hears of the deletion, a second reconcile must not delete the same version again.
   */
  readonly #pruned = new Map<string, string>();
  /**
   * Objects this controller applied while its cache has not moved yet (object id → the applied
   * JSON and the cached resourceVersion from before the write), and applies in flight (id + JSON).
   */
  readonly #written = new Map<string, { json: string; before: string | undefined; at: number }>();
  readonly #inflight = new Map<string, Promise<KubeObject>>();
  /** Rendered object → the live resourceVersion it was last found to match. */
  readonly #verified = new WeakMap<KubeObject, string>();

  constructor(
    private readonly controller: string,
    private readonly kube: KubeClient,
    private readonly m: AgentMetrics,
    /** The label objects a key wrote carry (pruning); undefined: the kind prunes nothing. */
    private readonly ownerLabel: string | undefined,
    /** The cache of an object of a kind the declaration does not list, if the kind has one. */
    private readonly extraCache: ((obj: KubeObject) => Informer | undefined) | undefined,
  ) {}

  /** Declares a rendered resource's cache: its objects are drift-checked and pruned there. */
  addRendered(r: ResourceType, inf: Informer): void {
    const id = renderedId(r.kind, r.group);
    if (!this.#renderedCaches.has(id)) {
      // A deletion (or a re-list that no longer has the object) voids a remembered write.
      inf.onChange((type, obj) => {
        if (type === "deleted") this.#written.delete(writtenId(obj));
      });
    }
    this.#renderedCaches.set(id, inf);
  }

  /** The first drifted field over the rendered objects that have a cache, or undefined. */
  driftOf(rendered: readonly KubeObject[]): string | undefined {
    for (const obj of rendered) {
      const cache = this.cacheFor(obj);
      if (!cache) continue;
      const d = this.#liveDrift(obj, cache);
      if (d !== undefined) return `${obj.kind}/${obj.metadata.name}${d}`;
    }
    return undefined;
  }

  /** Whether `obj` needs no write (see KindContext.isCurrent). */
  isCurrent(obj: KubeObject): boolean {
    return this.#liveDrift(obj, this.cacheFor(obj)) === undefined;
  }

  /**
   * Where the live object differs from `obj` (": missing" when absent), or undefined when it
   * matches — or when this controller applied exactly `obj` and the cache has not caught up with
   * that write yet (its event is on the way; asking again would only repeat the write).
   */
  #liveDrift(obj: KubeObject, cache: Informer | undefined): string | undefined {
    const live = cache?.get(obj.metadata.namespace, obj.metadata.name ?? "");
    const id = writtenId(obj);
    const w = this.#written.get(id);
    if (w) {
      // Trusted only while the cache still shows the version it held before the write: once it
      // shows any other (the write itself, or a later change by someone else — the informer
      // does not announce every version, so waiting for the write's own would miss drift),
      // the cache decides.
      if (live?.metadata.resourceVersion !== w.before || Date.now() - w.at > WRITTEN_TTL_MS) this.#written.delete(id);
      else if (w.json === JSON.stringify(obj)) return undefined;
    }
    if (!live) return ": missing";
    // A rendered object (cached per desired state) already found to match this very version of
    // the live object still matches: idle resyncs and repeated events cost no comparison.
    const rv = live.metadata.resourceVersion;
    if (rv !== undefined && this.#verified.get(obj) === rv) return undefined;
    const d = findDrift(obj, live);
    if (d === undefined && rv !== undefined) this.#verified.set(obj, rv);
    return d;
  }

  /** Server-side applies `obj`, remembered until the cache moves (see KindContext.apply). */
  async apply(r: ResourceType, obj: KubeObject, signal: AbortSignal): Promise<KubeObject> {
    const id = writtenId(obj);
    const json = JSON.stringify(obj);
    const flight = `${id}\n${json}`;
    const cache = this.cacheFor(obj);
    const versionOf = (): string | undefined =>
      cache?.get(obj.metadata.namespace, obj.metadata.name ?? "")?.metadata.resourceVersion;
    const before = versionOf();
    let p = this.#inflight.get(flight);
    if (!p) {
      p = this.kube.apply(r, obj, { force: true, signal }).finally(() => this.#inflight.delete(flight));
      this.#inflight.set(flight, p);
    }
    const live = await p;
    // Remembered only while the cache has not moved since before the write (see #liveDrift).
    if (live.metadata.resourceVersion !== undefined && versionOf() === before)
      this.#written.set(id, { json, before, at: Date.now() });
    return live;
  }

  /** Deletes the objects of the rendered kinds labelled as the key's that `keep` does not name. */
  async prune(key: string, keep: readonly KubeObject[], signal: AbortSignal): Promise<void> {
    const label = this.ownerLabel;
    if (label === undefined) return;
    const wanted = new Set(keep.map((o) => `${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name ?? ""}`));
    for (const inf of new Set(this.#renderedCaches.values())) {
      for (const live of inf.byIndex(labelIndex(label), key)) {
        const id = `${inf.resource.kind}/${live.metadata.namespace ?? ""}/${live.metadata.name ?? ""}`;
        if (live.metadata.deletionTimestamp || wanted.has(id)) continue;
        const version = live.metadata.resourceVersion ?? "";
        if (version !== "" && this.#pruned.get(id) === version) continue;
        this.m.resyncRepairs.inc({ controller: this.controller, reason: "pruned" });
        await this.kube.delete(inf.resource, live.metadata.namespace, live.metadata.name ?? "", signal);
        // Bounded: entries of deletions the cache has long seen are worthless; start over when large.
        if (this.#pruned.size >= 10_000) this.#pruned.clear();
        this.#pruned.set(id, version);
      }
    }
  }

  cacheFor(obj: KubeObject): Informer | undefined {
    const group = (obj.apiVersion ?? "").includes("/") ? ((obj.apiVersion ?? "").split("/")[0] ?? "") : "";
    return this.#renderedCaches.get(renderedId(obj.kind ?? "", group)) ?? this.extraCache?.(obj);
  }
}

function writtenId(obj: KubeObject): string {
  return `${obj.apiVersion ?? ""}/${obj.kind ?? ""}/${obj.metadata.namespace ?? ""}/${obj.metadata.name ?? ""}`;
}

function renderedId(kind: string, group: string): string {
  return `${group}/${kind}`;
}
