// The seam between stored lines and live ones, and the archive's "stored already" test (pure).
// Both rest on one fact: each stream of an instance carries the kubelet's time stamps (unix ns),
// in order, and no two lines of it share one. So a cursor per instance and stream (the time of
// the last line kept) says exactly which lines were seen: a line is new when it is later than
// its stream's cursor, and an instance without a cursor has nothing seen.
//
// Streams: a line read with its stream ("stdout", "stderr") or merged ("", stream unknown: a
// cluster without split log streams, a read with a tail, a line kept before streams were). A
// merged cursor covers both streams up to its time; a merged line is seen only up to where both
// streams were (it may be of either). Two streams are read apart, so one may be ahead of the
// other: a live read must start early enough for each, and a stream that has no cursor at all
// (an instance read apart that never wrote to stderr, say) makes it start from the floor.

/** An instance's key: its region and pod name. */
export function sourceKey(region: string, instance: string): string {
  return `${region}/${instance}`;
}

/** A line's stream as kept: "" when not known. */
export type StreamName = "" | "stdout" | "stderr";

function later(a: bigint | undefined, b: bigint | undefined): bigint | undefined {
  return a === undefined ? b : b === undefined || a > b ? a : b;
}

export class InstanceCursors {
  /** Per instance, per stream, the time of the last line seen. */
  readonly #last = new Map<string, Map<StreamName, bigint>>();

  constructor(initial?: Iterable<readonly [string, bigint] | readonly [string, bigint, StreamName]>) {
    if (initial) for (const [k, ns, stream] of initial) this.#set(k, stream ?? "", ns);
  }

  /** Instances with a cursor. */
  get size(): number {
    return this.#last.size;
  }

  /** The time of the last line seen of the instance's stream, or undefined. */
  get(key: string, stream: StreamName = ""): bigint | undefined {
    return this.#last.get(key)?.get(stream);
  }

  /** Whether the line is new (later than what was seen of its stream); a new line moves the cursor. */
  admit(key: string, ns: bigint, stream: StreamName = ""): boolean {
    if (!this.isNew(key, ns, stream)) return false;
    this.#set(key, stream, ns);
    return true;
  }

  /** Whether the line is new, without moving the cursor (the seam: history's cursors stay fixed). */
  isNew(key: string, ns: bigint, stream: StreamName = ""): boolean {
    const seen = this.#seen(key, stream);
    return seen === undefined || ns > seen;
  }

  /**
   * Where a live read must start so that no line after any of `running`'s cursors is missed:
   * the earliest of what was seen of their streams, or `floor` when one of them has nothing seen
   * (all it wrote is new). Never before `floor`.
   */
  liveSince(running: Iterable<string>, floor: bigint): bigint {
    let since: bigint | undefined;
    for (const key of running) {
      const m = this.#last.get(key);
      if (!m) return floor;
      const streams: StreamName[] = m.has("stdout") || m.has("stderr") ? ["stdout", "stderr"] : [""];
      for (const s of streams) {
        const seen = this.#seen(key, s);
        if (seen === undefined) return floor;
        if (since === undefined || seen < since) since = seen;
      }
    }
    if (since === undefined || since < floor) return floor;
    return since;
  }

  /** Up to when lines of the instance's stream were seen. */
  #seen(key: string, stream: StreamName): bigint | undefined {
    const m = this.#last.get(key);
    if (!m) return undefined;
    if (stream !== "") return later(m.get(""), m.get(stream));
    const out = m.get("stdout");
    const err = m.get("stderr");
    return later(m.get(""), out === undefined || err === undefined ? undefined : out < err ? out : err);
  }

  #set(key: string, stream: StreamName, ns: bigint): void {
    let m = this.#last.get(key);
    if (!m) this.#last.set(key, (m = new Map()));
    m.set(stream, ns);
  }
}
