// How `krane logs` prints entries, and what it has printed (pure): the prefix and colour of each
// instance (and "stderr" for a line written there), markers as lines of their own, NDJSON for
// -o json; and the cursor a resumed stream starts from (the earliest last line of the instances
// still running, of either stream) with the lines it repeats dropped, so a stream that broke and
// came back prints every line once.
import { formatNs } from "../contracts/logs.js";

export interface PrintedEntry {
  readonly ns: bigint;
  readonly region: string;
  readonly instance: string;
  readonly revision: bigint;
  readonly line?: string;
  /** A line's stream, when known. */
  readonly stream?: "stdout" | "stderr";
  readonly marker?: {
    readonly kind: "joined" | "left" | "dropped" | "error" | "resumed" | "event";
    readonly dropped: bigint;
    readonly message: string;
  };
}

export interface PrintOptions {
  readonly timestamps: boolean;
  readonly color: boolean;
}

/** Colours that read on dark and light terminals (ANSI 31–36, bright 91–96). */
const COLORS = [31, 32, 33, 34, 35, 36, 91, 92, 93, 94, 95, 96] as const;

/** The same colour for an instance every time (a hash of its name). */
export function colorOf(source: string): number {
  let h = 2166136261;
  for (let i = 0; i < source.length; i++) h = Math.imul(h ^ source.charCodeAt(i), 16777619) >>> 0;
  return COLORS[h % COLORS.length] as number;
}

function prefixOf(e: PrintedEntry): string {
  const who = e.instance === "" ? e.region : `${e.region}/${e.instance}`;
  return e.revision > 0n ? `${who} r${e.revision}` : who;
}

/** One entry as the terminal shows it (no newline). */
export function formatEntry(e: PrintedEntry, o: PrintOptions): string {
  const prefix = prefixOf(e);
  const painted = o.color ? `\u001b[${colorOf(`${e.region}/${e.instance}`)}m${prefix}\u001b[0m` : prefix;
  const time = o.timestamps ? `${formatNs(e.ns)} ` : "";
  if (e.line !== undefined) return `${time}[${painted}${e.stream === "stderr" ? " stderr" : ""}] ${e.line}`;
  const m = e.marker;
  const what =
    m?.kind === "joined"
      ? "joined"
      : m?.kind === "left"
        ? "left"
        : m?.kind === "dropped"
          ? `${m.dropped} lines dropped${m.message ? ` (${m.message})` : ""}`
          : (m?.message ?? "");
  return `${time}--- ${painted}: ${what} ---`;
}

/** One entry as an NDJSON object. */
export function entryJson(e: PrintedEntry): Record<string, unknown> {
  const base: Record<string, unknown> = {
    time: formatNs(e.ns),
    region: e.region,
    instance: e.instance,
    revision: Number(e.revision),
  };
  if (e.line !== undefined) return { ...base, stream: e.stream ?? "unknown", line: e.line };
  return {
    ...base,
    marker: e.marker?.kind,
    ...(e.marker?.kind === "dropped" ? { dropped: Number(e.marker.dropped) } : {}),
    ...(e.marker?.message ? { message: e.marker.message } : {}),
  };
}

interface Seen {
  /** Per stream ("" unknown), the last line printed. */
  streams: Map<string, Last>;
  live: boolean;
}

interface Last {
  ns: bigint;
  /** Lines printed at exactly `ns` (timestamps can repeat). */
  atNs: number;
  /** Of those, how many this attempt has passed over again. */
  again: number;
}

/** What has been printed per instance, to resume a stream and drop what it repeats. */
export class ResumeCursor {
  readonly #seen = new Map<string, Seen>();

  /** A new attempt starts: repeated lines are counted afresh. */
  restart(): void {
    for (const s of this.#seen.values()) for (const l of s.streams.values()) l.again = 0;
  }

  /** Whether to print the entry (false: already printed before the stream broke). */
  admit(e: PrintedEntry): boolean {
    const key = `${e.region}/${e.instance}`;
    let i = this.#seen.get(key);
    if (e.marker) {
      if (e.marker.kind === "joined") {
        if (i?.live) return false;
        if (i) i.live = true;
        else this.#seen.set(key, { streams: new Map(), live: true });
      } else if (e.marker.kind === "left" && i) i.live = false;
      return true;
    }
    if (!i) this.#seen.set(key, (i = { streams: new Map(), live: true }));
    // Lines printed merged (a --tail read knows no stream) cover both streams up to their last:
    // a resumed read, which has no tail, gives them again with their streams.
    const merged = i.streams.get("");
    const s = merged && e.ns <= merged.ns ? merged : i.streams.get(e.stream ?? "");
    if (!s) {
      i.streams.set(e.stream ?? "", { ns: e.ns, atNs: 1, again: 1 });
      return true;
    }
    if (e.ns < s.ns) return false;
    if (e.ns === s.ns) {
      if (s.again < s.atNs) {
        s.again++;
        return false;
      }
      s.atNs++;
      s.again++;
      return true;
    }
    s.ns = e.ns;
    s.atNs = 1;
    s.again = 1;
    return true;
  }

  /** Where a resumed stream starts (unix ms): the oldest last line of the running instances; undefined before any line. */
  sinceMs(): number | undefined {
    let min: bigint | undefined;
    for (const i of this.#seen.values())
      for (const s of i.streams.values()) if (i.live && s.ns > 0n && (min === undefined || s.ns < min)) min = s.ns;
    if (min === undefined)
      for (const i of this.#seen.values())
        for (const s of i.streams.values()) if (s.ns > 0n && (min === undefined || s.ns > min)) min = s.ns;
    return min === undefined ? undefined : Number(min / 1_000_000n);
  }
}
