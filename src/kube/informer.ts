// An informer: a watch-backed cache of one Kubernetes resource type, filtered by a label
// selector, with named indexes and change handlers. The agent's manager keeps one
// per resource type and every controller kind shares it; the sentinel uses one for its routing
// table. Written by hand because client-node 1.4.0's informer stops for good on most errors and
// has no watchdog.
//
//  - LIST (raw JSON, paginated) then WATCH from the list's resourceVersion, with bookmarks and a
//    server-side timeout so streams are recycled regularly;
//  - a clean end re-watches from the last resourceVersion seen; 410 Gone (as an HTTP answer or
//    an ERROR event) re-lists, diffing the new list against the cache;
//  - a watchdog aborts a watch that has been silent for longer than the server timeout plus a
//    margin (a half-open connection never ends by itself);
//  - any other failure retries forever with full-jitter backoff, reset after the first event.
//
// Memory: an optional `transform` trims every object before it is cached (drop managedFields
// and whatever no reader uses, as client-go's cache transforms do). An update whose trimmed
// object equals the cached one apart from its resourceVersion is stored but not announced: no
// handler runs for changes nobody can see.
// Handlers are called synchronously and must only record/enqueue.
import { KubeApiError, isGone, type KubeClient, type WatchEventType, type WatchParams } from "./client.js";
import { isKubeObject, objectKey, type KubeObject } from "./object.js";
import type { ResourceType } from "./resources.js";
import { Backoff, sleep, type BackoffPolicy } from "../retry/backoff.js";

export type ChangeType = "added" | "updated" | "deleted";
export type ChangeHandler = (type: ChangeType, obj: KubeObject, old: KubeObject | undefined) => void;
/** An index function: the values an object is found under (none: not indexed). */
export type IndexFunc = (obj: KubeObject) => string | readonly string[] | undefined;

/** The logger shape an informer needs (a subset of pino's). */
export interface InformerLogger {
  warn(obj: object, msg?: string): void;
}

/** The part of KubeClient an informer needs (a test can supply its own). */
export interface ListWatchClient {
  list(
    r: ResourceType,
    opts: { namespace?: string; labelSelector?: string; signal?: AbortSignal },
  ): Promise<{ items: KubeObject[]; resourceVersion: string }>;
  watch(
    r: ResourceType,
    params: WatchParams,
    onEvent: (type: WatchEventType, object: unknown) => void,
    signal: AbortSignal,
  ): Promise<void>;
}

export interface InformerOptions {
  readonly resource: ResourceType;
  readonly labelSelector: string;
  /** Only this namespace (default: all namespaces). */
  readonly namespace?: string;
  readonly client: ListWatchClient | KubeClient;
  readonly log: InformerLogger;
  readonly timeoutSeconds?: number;
  /** Silence longer than this aborts the watch (default: timeoutSeconds + 30 s). */
  readonly watchdogMs?: number;
  readonly backoff?: BackoffPolicy;
  /** Trims each object before it is cached (must return a new or the same object). */
  readonly transform?: (obj: KubeObject) => KubeObject;
  readonly indexes?: Readonly<Record<string, IndexFunc>>;
  readonly onEvent?: (kind: "list" | "watch-start" | "watch-end" | "relist-410" | "watchdog" | "error") => void;
}

class GoneError extends Error {}

export class Informer {
  readonly resource: ResourceType;
  readonly labelSelector: string;
  readonly namespace: string | undefined;
  readonly #o: InformerOptions;
  readonly #cache = new Map<string, KubeObject>();
  readonly #indexFuncs = new Map<string, IndexFunc>();
  /** index name → value → object keys */
  readonly #indexes = new Map<string, Map<string, IndexKeys>>();
  readonly #handlers: ChangeHandler[] = [];
  #rv: string | undefined;
  #synced = false;
  #syncWaiters: Array<() => void> = [];

  constructor(opts: InformerOptions) {
    this.resource = opts.resource;
    this.labelSelector = opts.labelSelector;
    this.namespace = opts.namespace;
    this.#o = opts;
    for (const [name, fn] of Object.entries(opts.indexes ?? {})) this.addIndex(name, fn);
  }

  /**
   * Adds a named index. One added while the informer runs is built from what the cache holds
   * now (handlers run synchronously, so no event falls between the two).
   */
  addIndex(name: string, fn: IndexFunc): void {
    if (this.#indexFuncs.has(name)) throw new Error(`informer ${this.resource.plural}: index "${name}" declared twice`);
    const idx = new Map<string, IndexKeys>();
    for (const [key, obj] of this.#cache) for (const v of indexValues(fn, obj)) addKey(idx, v, key);
    this.#indexFuncs.set(name, fn);
    this.#indexes.set(name, idx);
  }

  hasIndex(name: string): boolean {
    return this.#indexFuncs.has(name);
  }

  onChange(h: ChangeHandler): void {
    this.#handlers.push(h);
  }

  get synced(): boolean {
    return this.#synced;
  }

  /** Resolves after the first successful list. */
  waitSynced(): Promise<void> {
    if (this.#synced) return Promise.resolve();
    return new Promise((resolve) => this.#syncWaiters.push(resolve));
  }

  get(namespace: string | undefined, name: string): KubeObject | undefined {
    return this.#cache.get(namespace ? `${namespace}/${name}` : name);
  }

  list(): KubeObject[] {
    return [...this.#cache.values()];
  }

  values(): IterableIterator<KubeObject> {
    return this.#cache.values();
  }

  get size(): number {
    return this.#cache.size;
  }

  byIndex(index: string, value: string): KubeObject[] {
    const idx = this.#indexes.get(index);
    if (!idx) throw new Error(`informer ${this.resource.plural}: no index "${index}"`);
    const keys = idx.get(value);
    if (keys === undefined) return [];
    const out: KubeObject[] = [];
    for (const k of typeof keys === "string" ? [keys] : keys) {
      const o = this.#cache.get(k);
      if (o) out.push(o);
    }
    return out;
  }

  /** Runs until `signal` aborts; never throws. */
  async run(signal: AbortSignal): Promise<void> {
    const backoff = new Backoff(this.#o.backoff ?? { baseMs: 200, capMs: 30_000, minMs: 50 });
    const timeoutSeconds = this.#o.timeoutSeconds ?? 300;
    const watchdogMs = this.#o.watchdogMs ?? (timeoutSeconds + 30) * 1000;
    while (!signal.aborted) {
      try {
        if (this.#rv === undefined) {
          const { items, resourceVersion } = await this.#o.client.list(this.resource, {
            namespace: this.namespace,
            labelSelector: this.labelSelector,
            signal,
          });
          this.#replace(items);
          this.#rv = resourceVersion;
          this.#o.onEvent?.("list");
          this.#markSynced();
          backoff.reset();
        }
        await this.#watchOnce(signal, timeoutSeconds, watchdogMs, () => backoff.reset());
        this.#o.onEvent?.("watch-end");
        // A clean end (server timeout): re-watch from the last resourceVersion at once.
      } catch (err) {
        if (signal.aborted) break;
        if (err instanceof GoneError || isGone(err)) {
          this.#o.onEvent?.("relist-410");
          this.#rv = undefined;
          continue;
        }
        this.#o.onEvent?.("error");
        this.#o.log.warn(
          { resource: this.resource.plural, err: err instanceof Error ? err.message : String(err) },
          "watch failed; retrying",
        );
        if (err instanceof KubeApiError && err.status >= 400 && err.status < 500) {
          // 401/403/404 on a watch: the list may be stale too; re-list after the backoff.
          this.#rv = undefined;
        }
        await sleep(backoff.next(), signal);
      }
    }
  }

  async #watchOnce(
    signal: AbortSignal,
    timeoutSeconds: number,
    watchdogMs: number,
    onFirst: () => void,
  ): Promise<void> {
    const ac = new AbortController();
    const stop = (): void => ac.abort();
    signal.addEventListener("abort", stop, { once: true });
    let silent = false;
    let timer = setTimeout(fire, watchdogMs);
    function fire(): void {
      silent = true;
      ac.abort();
    }
    let first = true;
    let gone = false;
    this.#o.onEvent?.("watch-start");
    try {
      await this.#o.client.watch(
        this.resource,
        {
          namespace: this.namespace,
          resourceVersion: this.#rv,
          labelSelector: this.labelSelector,
          timeoutSeconds,
          allowWatchBookmarks: true,
        },
        (type, object) => {
          clearTimeout(timer);
          timer = setTimeout(fire, watchdogMs);
          if (first) {
            first = false;
            onFirst();
          }
          if (type === "ERROR") {
            const code = isKubeObjectStatus(object) ? object.code : 0;
            if (code === 410) {
              gone = true;
              ac.abort();
            }
            return;
          }
          if (!isKubeObject(object)) return;
          const rv = object.metadata.resourceVersion;
          if (type === "BOOKMARK") {
            if (rv) this.#rv = rv;
            return;
          }
          this.#apply(type, object);
          if (rv) this.#rv = rv;
        },
        ac.signal,
      );
    } catch (err) {
      if (!ac.signal.aborted) throw err;
    } finally {
      clearTimeout(timer);
      signal.removeEventListener("abort", stop);
      ac.abort();
    }
    if (gone) throw new GoneError("watch expired");
    if (silent && !signal.aborted) {
      this.#o.onEvent?.("watchdog");
      throw new Error(`watch silent for ${watchdogMs} ms`);
    }
  }

  #trim(obj: KubeObject): KubeObject {
    return this.#o.transform ? this.#o.transform(obj) : obj;
  }

  #apply(type: WatchEventType, raw: KubeObject): void {
    const key = objectKey(raw);
    const old = this.#cache.get(key);
    if (type === "DELETED") {
      if (!old) return;
      this.#remove(key, old);
      this.#emit("deleted", old, old);
      return;
    }
    const obj = this.#trim(raw);
    this.#put(key, obj, old);
    if (old && sameButVersion(old, obj)) return;
    this.#emit(old ? "updated" : "added", obj, old);
  }

  #replace(items: KubeObject[]): void {
    const seen = new Set<string>();
    for (const raw of items) {
      const key = objectKey(raw);
      seen.add(key);
      const old = this.#cache.get(key);
      if (old && old.metadata.resourceVersion === raw.metadata.resourceVersion) continue;
      const obj = this.#trim(raw);
      this.#put(key, obj, old);
      if (old && sameButVersion(old, obj)) continue;
      this.#emit(old ? "updated" : "added", obj, old);
    }
    for (const [key, old] of [...this.#cache]) {
      if (seen.has(key)) continue;
      this.#remove(key, old);
      this.#emit("deleted", old, old);
    }
  }

  #put(key: string, obj: KubeObject, old: KubeObject | undefined): void {
    if (old) this.#unindex(key, old);
    this.#cache.set(key, obj);
    for (const [name, fn] of this.#indexFuncs) {
      const idx = this.#indexes.get(name) as Map<string, IndexKeys>;
      for (const v of indexValues(fn, obj)) addKey(idx, v, key);
    }
  }

  #remove(key: string, old: KubeObject): void {
    this.#unindex(key, old);
    this.#cache.delete(key);
  }

  #unindex(key: string, obj: KubeObject): void {
    for (const [name, fn] of this.#indexFuncs) {
      const idx = this.#indexes.get(name) as Map<string, IndexKeys>;
      for (const v of indexValues(fn, obj)) removeKey(idx, v, key);
    }
  }

  #emit(type: ChangeType, obj: KubeObject, old: KubeObject | undefined): void {
    for (const h of this.#handlers) h(type, obj, old);
  }

  #markSynced(): void {
    if (this.#synced) return;
    this.#synced = true;
    const w = this.#syncWaiters;
    this.#syncWaiters = [];
    for (const f of w) f();
  }
}

/**
 * The keys of the objects an index value finds. One key is held as the string itself: most
 * values find one object (a deployment's ReplicaSet by its id), and a Set of one costs about
 * 150 bytes.
 */
type IndexKeys = string | Set<string>;

function addKey(idx: Map<string, IndexKeys>, value: string, key: string): void {
  const keys = idx.get(value);
  if (keys === undefined) idx.set(value, key);
  else if (typeof keys !== "string") keys.add(key);
  else if (keys !== key) idx.set(value, new Set([keys, key]));
}

function removeKey(idx: Map<string, IndexKeys>, value: string, key: string): void {
  const keys = idx.get(value);
  if (keys === undefined) return;
  if (typeof keys === "string") {
    if (keys === key) idx.delete(value);
    return;
  }
  keys.delete(key);
  if (keys.size > 1) return;
  const [last] = keys;
  if (last === undefined) idx.delete(value);
  else idx.set(value, last);
}

function indexValues(fn: IndexFunc, obj: KubeObject): readonly string[] {
  const v = fn(obj);
  if (v === undefined) return [];
  return typeof v === "string" ? [v] : v;
}

/** Deep equality of two cached objects, ignoring metadata.resourceVersion. */
export function sameButVersion(a: KubeObject, b: KubeObject): boolean {
  const { resourceVersion: _ra, ...ma } = a.metadata;
  const { resourceVersion: _rb, ...mb } = b.metadata;
  return deepEqual({ ...a, metadata: ma }, { ...b, metadata: mb });
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!deepEqual(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  const rb = b as Record<string, unknown>;
  const ra = a as Record<string, unknown>;
  for (const k of ka) if (!(k in rb) || !deepEqual(ra[k], rb[k])) return false;
  return true;
}

function isKubeObjectStatus(v: unknown): v is { code: number } {
  return typeof v === "object" && v !== null && typeof (v as { code?: unknown }).code === "number";
}
