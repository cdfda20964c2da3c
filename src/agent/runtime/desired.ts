// The desired-state store of one controller: the latest apply-or-delete per key, as far as this
// agent knows (from the stream, a snapshot or a resync's point read). The work queue holds only
// keys; reconcile(key) reads the entry here when it runs, so it always acts on the newest state
// and a burst of changes to one key is one run.
//
// An apply entry keeps its rendered objects (rendering is pure, so it is done once per desired
// state, not per reconcile or drift check) and, after a terminal failure, the reason: a key in
// that state is not applied again until its desired state changes or a resync clears it.
// A key whose deletion succeeded is forgotten: nothing is kept for it.
//
// Resync staleness: a resync's batched read may be older than what the stream delivered while
// it was in flight. `track()` collects the keys set meanwhile, so the resync skips them.
//
// Memory: the desired state is kept as a shallow copy (`compact`). A message protobuf-es decoded
// got its fields one by one, and V8 keeps an object with that many added properties as a hash
// table (dictionary mode): an ApplyDeployment held that way costs about 1.4 KiB more than the
// same fields stored in the object, which a copy made by spreading gets. The rendered objects'
// small repeated parts are held once, with the caches' (`share` in trim.ts): they are frozen.
import type { KubeObject } from "../../kube/object.js";
import { share } from "./trim.js";

/**
 * A shallow copy of a plain object, its properties in V8's fast (in-object) form. An object with
 * a prototype of its own (protobuf-es puts the defaults of fields with explicit presence there)
 * is returned as it is: a copy would lose them.
 */
export function compact<D>(d: D): D {
  if (typeof d !== "object" || d === null || Array.isArray(d) || Object.getPrototypeOf(d) !== Object.prototype)
    return d;
  return { ...d };
}

export type DesiredEntry<D, Del> =
  | { readonly type: "apply"; readonly desired: D; readonly rendered: readonly KubeObject[]; terminal?: string }
  | { readonly type: "delete"; readonly ref: Del };

export class DesiredStore<D, Del> {
  readonly #entries = new Map<string, DesiredEntry<D, Del>>();
  readonly #trackers = new Set<Set<string>>();

  constructor(private readonly render: (d: D) => KubeObject[]) {}

  get(key: string): DesiredEntry<D, Del> | undefined {
    return this.#entries.get(key);
  }

  apply(key: string, desired: D): DesiredEntry<D, Del> {
    const kept = compact(desired);
    const e: DesiredEntry<D, Del> = { type: "apply", desired: kept, rendered: share(this.render(kept)) };
    this.#set(key, e);
    return e;
  }

  /** Renders an apply entry again from the same desired state (what it renders from outside it changed). */
  rerender(key: string): void {
    const e = this.#entries.get(key);
    if (e?.type === "apply")
      this.#entries.set(key, { type: "apply", desired: e.desired, rendered: this.render(e.desired) });
  }

  delete(key: string, ref: Del): DesiredEntry<D, Del> {
    const e: DesiredEntry<D, Del> = { type: "delete", ref };
    this.#set(key, e);
    return e;
  }

  /** Forgets a key (deleted for good, or no longer named by a snapshot). */
  forget(key: string): void {
    if (this.#entries.delete(key)) this.#touch(key);
  }

  /** Forgets `key` only while its entry is still `entry` (nothing newer arrived meanwhile). */
  forgetIf(key: string, entry: DesiredEntry<D, Del>): void {
    if (this.#entries.get(key) === entry) this.forget(key);
  }

  /** The desired state of a key when it is "apply". */
  desiredOf(key: string): D | undefined {
    const e = this.#entries.get(key);
    return e?.type === "apply" ? e.desired : undefined;
  }

  isActive(key: string): boolean {
    return this.#entries.get(key)?.type === "apply";
  }

  /** Keys whose desired state is "apply". */
  *activeKeys(): IterableIterator<string> {
    for (const [k, e] of this.#entries) if (e.type === "apply") yield k;
  }

  *entries(): IterableIterator<[string, DesiredEntry<D, Del>]> {
    yield* this.#entries;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Collects every key set or forgotten until the returned function is called. */
  track(): { touched: ReadonlySet<string>; stop(): void } {
    const touched = new Set<string>();
    this.#trackers.add(touched);
    return { touched, stop: () => void this.#trackers.delete(touched) };
  }

  #set(key: string, e: DesiredEntry<D, Del>): void {
    this.#entries.set(key, e);
    this.#touch(key);
  }

  #touch(key: string): void {
    for (const t of this.#trackers) t.add(key);
  }
}
