// A reflector: a watch-backed cache of one Kubernetes resource type, filtered by a label
// selector (DESIGN §6.5). Written by hand because client-node 1.4.0's informer stops for good
// on most errors and has no watchdog.
//
//  - LIST (raw JSON, paginated) then WATCH from the list's resourceVersion, with bookmarks and a
//    server-side timeout so streams are recycled regularly;
//  - a clean end re-watches from the last resourceVersion seen; 410 Gone (as an HTTP answer or
//    an ERROR event) re-lists, diffing the new list against the cache;
//  - a watchdog aborts a watch that has been silent for longer than the server timeout plus a
//    margin (a half-open connection never ends by itself);
//  - any other failure retries forever with full-jitter backoff, reset after the first event.
// Handlers are called synchronously and must only record/enqueue.
import { KubeApiError, isGone, type KubeClient, type WatchEventType, type WatchParams } from "../../kube/client.js";
import { isKubeObject, objectKey, type KubeObject } from "../../kube/object.js";
import type { ResourceType } from "../../kube/resources.js";
import { Backoff, sleep, type BackoffPolicy } from "../../retry/backoff.js";
import type { Logger } from "./log.js";

export type ChangeType = "added" | "updated" | "deleted";
export type ChangeHandler = (type: ChangeType, obj: KubeObject, old: KubeObject | undefined) => void;

/** The part of KubeClient a reflector needs (a test can supply its own). */
export interface ListWatchClient {
  list(r: ResourceType, opts: { labelSelector?: string; signal?: AbortSignal }): Promise<{ items: KubeObject[]; resourceVersion: string }>;
  watch(
    r: ResourceType,
    params: WatchParams,
    onEvent: (type: WatchEventType, object: unknown) => void,
    signal: AbortSignal,
  ): Promise<void>;
}

export interface ReflectorOptions {
  readonly resource: ResourceType;
  readonly labelSelector: string;
  readonly client: ListWatchClient | KubeClient;
  readonly log: Logger;
  readonly timeoutSeconds?: number;
  /** Silence longer than this aborts the watch (default: timeoutSeconds + 30 s). */
  readonly watchdogMs?: number;
  readonly backoff?: BackoffPolicy;
  /** An optional secondary index (e.g. pods by deployment id). */
  readonly indexBy?: (obj: KubeObject) => string | undefined;
  readonly onEvent?: (kind: "list" | "watch-start" | "watch-end" | "relist-410" | "watchdog" | "error") => void;
}

class GoneError extends Error {}

export class Reflector {
  readonly resource: ResourceType;
  readonly #o: ReflectorOptions;
  readonly #cache = new Map<string, KubeObject>();
  readonly #index = new Map<string, Set<string>>();
  readonly #handlers: ChangeHandler[] = [];
  #rv: string | undefined;
  #synced = false;
  #syncWaiters: Array<() => void> = [];

  constructor(opts: ReflectorOptions) {
    this.resource = opts.resource;
    this.#o = opts;
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

  get size(): number {
    return this.#cache.size;
  }

  byIndex(value: string): KubeObject[] {
    const keys = this.#index.get(value);
    if (!keys) return [];
    const out: KubeObject[] = [];
    for (const k of keys) {
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
            labelSelector: this.#o.labelSelector,
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

  async #watchOnce(signal: AbortSignal, timeoutSeconds: number, watchdogMs: number, onFirst: () => void): Promise<void> {
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
          resourceVersion: this.#rv,
          labelSelector: this.#o.labelSelector,
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

  #apply(type: WatchEventType, obj: KubeObject): void {
    const key = objectKey(obj);
    const old = this.#cache.get(key);
    if (type === "DELETED") {
      if (!old) return;
      this.#remove(key, old);
      this.#emit("deleted", obj, old);
      return;
    }
    this.#put(key, obj, old);
    this.#emit(old ? "updated" : "added", obj, old);
  }

  #replace(items: KubeObject[]): void {
    const seen = new Set<string>();
    for (const obj of items) {
      const key = objectKey(obj);
      seen.add(key);
      const old = this.#cache.get(key);
      if (old && old.metadata.resourceVersion === obj.metadata.resourceVersion) continue;
      this.#put(key, obj, old);
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
    const idx = this.#o.indexBy?.(obj);
    if (idx !== undefined) {
      let set = this.#index.get(idx);
      if (!set) this.#index.set(idx, (set = new Set()));
      set.add(key);
    }
  }

  #remove(key: string, old: KubeObject): void {
    this.#unindex(key, old);
    this.#cache.delete(key);
  }

  #unindex(key: string, obj: KubeObject): void {
    const idx = this.#o.indexBy?.(obj);
    if (idx === undefined) return;
    const set = this.#index.get(idx);
    set?.delete(key);
    if (set?.size === 0) this.#index.delete(idx);
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

function isKubeObjectStatus(v: unknown): v is { code: number } {
  return typeof v === "object" && v !== null && typeof (v as { code?: unknown }).code === "number";
}
