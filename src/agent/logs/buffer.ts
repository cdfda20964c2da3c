// The agent's outgoing lines for one log request: a bounded queue between the readers of pods/log
// (which never wait) and the pushes to ctrl (which may be slow). When it is full, new lines are
// dropped and counted per instance; one "N lines dropped" marker per instance and gap takes their
// place, in order after the lines queued before the gap and before those accepted after it.

export interface OutMarker {
  kind: "joined" | "left" | "dropped" | "error";
  dropped: number;
  message: string;
}

export interface OutEntry {
  instance: string;
  deploymentId: string;
  ns: bigint;
  line?: string;
  marker?: OutMarker;
}

export interface BufferLimits {
  /** Lines kept waiting at most (markers are not counted). */
  readonly maxEntries: number;
  /** Bytes of line text kept waiting at most. */
  readonly maxBytes: number;
}

export const DEFAULT_BUFFER: BufferLimits = { maxEntries: 20_000, maxBytes: 8 * 1024 * 1024 };

export class OutBuffer {
  readonly #limits: BufferLimits;
  #queue: OutEntry[] = [];
  #head = 0;
  #lines = 0;
  #bytes = 0;
  /** The open "dropped" marker of each instance (still in the queue, still counting). */
  readonly #gaps = new Map<string, OutEntry>();
  #droppedTotal = 0;

  constructor(limits: BufferLimits = DEFAULT_BUFFER) {
    this.#limits = limits;
  }

  /** Entries waiting. */
  get size(): number {
    return this.#queue.length - this.#head;
  }

  /** Lines dropped since the start. */
  get dropped(): number {
    return this.#droppedTotal;
  }

  /** Queues a line or a marker; false when a line was dropped for want of room. */
  push(e: OutEntry): boolean {
    if (e.line === undefined) {
      this.#queue.push(e);
      return true;
    }
    const bytes = e.line.length;
    if (this.#lines + 1 > this.#limits.maxEntries || this.#bytes + bytes > this.#limits.maxBytes) {
      this.#droppedTotal++;
      const gap = this.#gaps.get(e.instance);
      if (gap?.marker) gap.marker.dropped++;
      else {
        const marker: OutEntry = {
          instance: e.instance,
          deploymentId: e.deploymentId,
          ns: e.ns,
          marker: { kind: "dropped", dropped: 1, message: "" },
        };
        this.#gaps.set(e.instance, marker);
        this.#queue.push(marker);
      }
      return false;
    }
    this.#lines++;
    this.#bytes += bytes;
    this.#queue.push(e);
    return true;
  }

  /** Takes up to `max` entries (and about `maxBytes` of text) from the front, oldest first. */
  take(max: number, maxBytes = Number.POSITIVE_INFINITY): OutEntry[] {
    const out: OutEntry[] = [];
    let bytes = 0;
    while (this.#head < this.#queue.length && out.length < max && bytes < maxBytes) {
      const e = this.#queue[this.#head++] as OutEntry;
      if (e.line !== undefined) {
        this.#lines--;
        this.#bytes -= e.line.length;
        bytes += e.line.length;
      } else if (e.marker?.kind === "dropped" && this.#gaps.get(e.instance) === e) {
        // Taken: later drops of the instance start a new gap after the lines accepted since.
        this.#gaps.delete(e.instance);
      }
      out.push(e);
    }
    if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head);
      this.#head = 0;
    }
    return out;
  }
}
