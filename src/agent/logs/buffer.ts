// The agent's outgoing log data for one log request: a bounded queue between the readers of
// pods/log (which never wait) and the pushes to ctrl (which may be slow). It holds chunks of
// complete lines as read (bytes, never split into lines here) and markers. When it is full, new
// chunks are dropped and their lines counted per instance; one "N lines dropped" marker per
// instance and gap takes their place, in order after the data queued before the gap and before
// what is accepted after it. A take joins each instance's consecutive chunks into one.
import { countLines } from "./lines.js";

export interface OutMarker {
  kind: "joined" | "left" | "dropped" | "error";
  dropped: number;
  message: string;
}

export interface OutEntry {
  instance: string;
  deploymentId: string;
  /** A marker's time (unix ns); 0 for data, whose lines carry their own. */
  ns: bigint;
  /** Complete lines of pods/log, each with its time stamp and newline. */
  data?: Buffer;
  /** The stream the data was read from (undefined: stdout and stderr merged). */
  stream?: LogStreamName;
  marker?: OutMarker;
}

/** A container's stream, as pods/log's `stream` parameter names it. */
export type LogStreamName = "Stdout" | "Stderr";

export interface BufferLimits {
  /** Chunks kept waiting at most (markers are not counted). */
  readonly maxEntries: number;
  /** Bytes of data kept waiting at most. */
  readonly maxBytes: number;
}

export const DEFAULT_BUFFER: BufferLimits = { maxEntries: 50_000, maxBytes: 8 * 1024 * 1024 };

export class OutBuffer {
  readonly #limits: BufferLimits;
  #queue: OutEntry[] = [];
  #head = 0;
  #chunks = 0;
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

  /** Bytes of data waiting. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Lines dropped since the start. */
  get dropped(): number {
    return this.#droppedTotal;
  }

  /** Queues data or a marker; false when data was dropped for want of room. */
  push(e: OutEntry): boolean {
    if (e.data === undefined) {
      this.#queue.push(e);
      return true;
    }
    const bytes = e.data.length;
    if (this.#chunks + 1 > this.#limits.maxEntries || this.#bytes + bytes > this.#limits.maxBytes) {
      const lines = countLines(e.data);
      this.#droppedTotal += lines;
      const gap = this.#gaps.get(e.instance);
      if (gap?.marker) gap.marker.dropped += lines;
      else {
        const marker: OutEntry = {
          instance: e.instance,
          deploymentId: e.deploymentId,
          ns: e.ns,
          marker: { kind: "dropped", dropped: lines, message: "" },
        };
        this.#gaps.set(e.instance, marker);
        this.#queue.push(marker);
      }
      return false;
    }
    this.#chunks++;
    this.#bytes += bytes;
    this.#queue.push(e);
    return true;
  }

  /**
   * Takes entries from the front, oldest first, up to about `maxBytes` of data; each instance's
   * chunks of one stream with no marker of the instance between them come out joined, as one entry.
   */
  take(maxBytes = Number.POSITIVE_INFINITY): OutEntry[] {
    const out: OutEntry[] = [];
    /** Per instance and stream, the data entry being joined and its parts. */
    const open = new Map<string, Map<string, { entry: OutEntry; parts: Buffer[] }>>();
    const joined: { entry: OutEntry; parts: Buffer[] }[] = [];
    let bytes = 0;
    while (this.#head < this.#queue.length && bytes < maxBytes) {
      const e = this.#queue[this.#head++] as OutEntry;
      if (e.data !== undefined) {
        this.#chunks--;
        this.#bytes -= e.data.length;
        bytes += e.data.length;
        let streams = open.get(e.instance);
        if (!streams) open.set(e.instance, (streams = new Map()));
        const o = streams.get(e.stream ?? "");
        if (o) o.parts.push(e.data);
        else {
          const j = { entry: { ...e }, parts: [e.data] };
          streams.set(e.stream ?? "", j);
          joined.push(j);
          out.push(j.entry);
        }
        continue;
      }
      if (e.marker?.kind === "dropped" && this.#gaps.get(e.instance) === e) {
        // Taken: later drops of the instance start a new gap after the data accepted since.
        this.#gaps.delete(e.instance);
      }
      open.delete(e.instance);
      out.push(e);
    }
    for (const j of joined) if (j.parts.length > 1) j.entry.data = Buffer.concat(j.parts);
    if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head);
      this.#head = 0;
    }
    return out;
  }
}
