// The release kind's own watch caches, one per kind its releases hold (the manager's caches are
// declared up front; a release may hold any allow-listed kind). Each is a shared Informer
// selecting everything krane's releases manage in this region (`component=release`), started on
// first use and kept for the life of the run: it gives the live objects for drift checks and
// health, events that re-queue their release, and the label query of the prune sweep. Kinds the
// agent may write but not read (Secrets: RBAC cannot narrow a read to krane's objects, and
// listing every Secret of the cluster is not something a leaked agent token should allow) get no
// cache: they are pruned by label with a collection delete.
import { COMPONENT, LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_REGION, MANAGED_BY } from "../../contracts/labels.js";
import type { KubeClient } from "../../kube/client.js";
import { Informer } from "../../kube/informer.js";
import type { KubeObject } from "../../kube/object.js";
import type { ResourceType } from "../../kube/resources.js";
import type { Logger } from "../runtime/log.js";
import { releaseKeyOf } from "./render.js";

const SYNC_TIMEOUT_MS = 30_000;

/** Kinds the agent writes without reading (no cache, pruned by collection delete). */
export function writeOnly(r: Pick<ResourceType, "group" | "kind">): boolean {
  return r.group === "" && r.kind === "Secret";
}

export function releaseSelector(region: string): string {
  return `${LABEL_MANAGED_BY}=${MANAGED_BY},${LABEL_COMPONENT}=${COMPONENT.release},${LABEL_REGION}=${region}`;
}

/** Keeps what health and drift read; drops managedFields and kubectl's annotation copy. */
function trim(o: KubeObject): KubeObject {
  const { managedFields: _m, ...meta } = o.metadata as KubeObject["metadata"] & { managedFields?: unknown };
  if (meta.annotations) {
    const { "kubectl.kubernetes.io/last-applied-configuration": _l, ...rest } = meta.annotations;
    meta.annotations = rest;
  }
  return { ...o, metadata: meta };
}

export class ReleaseCaches {
  readonly #byResource = new Map<string, Informer>();
  readonly #byKind = new Map<string, Informer>();
  #signal: AbortSignal | undefined;

  constructor(
    private readonly kube: KubeClient,
    private readonly region: string,
    private readonly log: Logger,
    private readonly onChange: (releaseId: string) => void,
  ) {}

  /**
   * Informers run until this signal aborts; a new run of the controller (the old signal aborted)
   * gets new caches. While the caches run, another live signal changes nothing: reconciles and
   * the resync's garbage collection are handed different signals of the same run, and clearing
   * the caches between them would leave a release's status read from caches that no longer exist.
   */
  start(signal: AbortSignal): void {
    if (this.#signal === signal) return;
    if (this.#signal !== undefined && !this.#signal.aborted) return;
    this.#signal = signal;
    this.#byResource.clear();
    this.#byKind.clear();
  }

  /** The cache of a served kind, started (and synced) on first use; undefined for write-only kinds. */
  async ensure(r: ResourceType): Promise<Informer | undefined> {
    if (writeOnly(r)) return undefined;
    const id = `${r.group}/${r.version}/${r.plural}`;
    let inf = this.#byResource.get(id);
    if (!inf) {
      const signal = this.#signal;
      if (!signal || signal.aborted) throw new Error("release caches are not running");
      inf = new Informer({
        resource: r,
        labelSelector: releaseSelector(this.region),
        client: this.kube,
        log: this.log,
        transform: trim,
      });
      inf.addIndex("release", (o) => releaseKeyOf(o));
      inf.onChange((_t, obj) => {
        const k = releaseKeyOf(obj);
        if (k !== undefined) this.onChange(k);
      });
      this.#byResource.set(id, inf);
      this.#byKind.set(`${r.group}/${r.kind}`, inf);
      void inf.run(signal);
    }
    // A kind the agent may not list (RBAC) never syncs: fail this reconcile (it retries with
    // backoff) rather than wait forever.
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        inf.waitSynced(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new Error(
                  `the cache of ${r.plural}.${r.group || "core"} did not sync within ${SYNC_TIMEOUT_MS / 1000} s (may the agent list them?)`,
                ),
              ),
            SYNC_TIMEOUT_MS,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
    return inf;
  }

  /** The cache an object of this apiVersion/kind is in, if one runs (for drift checks). */
  forObject(obj: KubeObject): Informer | undefined {
    const av = obj.apiVersion ?? "";
    const group = av.includes("/") ? (av.split("/")[0] ?? "") : "";
    return this.#byKind.get(`${group}/${obj.kind ?? ""}`);
  }

  /** Every running cache (the sweep's label query). */
  all(): Informer[] {
    return [...this.#byResource.values()];
  }
}
