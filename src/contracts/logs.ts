// Log lines as the agent, ctrl and the CLI agree on them: the kubelet's timestamp at the start of
// each line of `pods/log?timestamps=true` (RFC 3339 with up to nine fractional digits), kept as
// unix nanoseconds so lines of many instances sort exactly; the cut of over-long lines, so a
// batch of lines always fits the messages that carry it between ctrl replicas; and the split of a
// chunk of such lines (what an agent pushes in the chunk form) into its lines.

/** The longest line relayed, in UTF-8 bytes; a longer one is cut and says how much was cut. */
export const MAX_LINE_BYTES = 5_000;

const STAMP = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2}) /;
/** The same, matched where a line starts inside a chunk (sticky: no copy of the line first). */
const STAMP_AT = /(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2}) /y;

/**
 * The whole second last parsed, and its unix ns: the agent parses thousands of lines a second and
 * nearly all of them share the second of the line before, so Date.parse (the dearest step) runs
 * once per second rather than once per line.
 */
let lastSecond = "";
let lastSecondNs = 0n;

/** Splits "2025-01-02T03:04:05.123456789Z text" into its time (unix ns) and text; null without a stamp. */
export function parseStampedLine(line: string): { ns: bigint; text: string } | null {
  const m = STAMP.exec(line);
  if (!m) return null;
  const ns = stampNs(m);
  return ns === undefined ? null : { ns, text: line.slice(m[0].length) };
}

/** The time (unix ns) of the stamp a line starts with, or undefined without one. */
export function stampOf(line: string): bigint | undefined {
  const m = STAMP.exec(line);
  return m ? stampNs(m) : undefined;
}

/** A matched stamp's unix ns; undefined when it is no real time. */
function stampNs(m: RegExpExecArray): bigint | undefined {
  const second = `${m[1]}${m[3]}`;
  if (second !== lastSecond) {
    const ms = Date.parse(second);
    if (Number.isNaN(ms)) return undefined;
    lastSecond = second;
    lastSecondNs = BigInt(ms) * 1_000_000n;
  }
  const frac = m[2];
  if (frac === undefined) return lastSecondNs;
  // Nine digits or fewer fit a double exactly: one BigInt per line, not one per step.
  return lastSecondNs + BigInt(Number(frac) * 10 ** (9 - frac.length));
}

/**
 * Calls `onLine` with the time and text (cut to MAX_LINE_BYTES) of each line of a chunk of
 * `pods/log?timestamps=true` text, in order, from `sinceNs` on; lines without a stamp are
 * skipped, and so is a last line without its newline. The chunk is decoded once and each line's
 * stamp read in place.
 */
export function forEachStampedLine(
  chunk: Uint8Array,
  sinceNs: bigint,
  onLine: (ns: bigint, text: string) => void,
): void {
  const s = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString("utf8");
  let start = 0;
  for (let nl = s.indexOf("\n"); nl >= 0; start = nl + 1, nl = s.indexOf("\n", start)) {
    STAMP_AT.lastIndex = start;
    const m = STAMP_AT.exec(s);
    if (!m || m.index !== start) continue;
    const ns = stampNs(m);
    if (ns === undefined || ns < sinceNs) continue;
    onLine(ns, cutLine(s.slice(start + m[0].length, nl)));
  }
}

/** Unix ns → RFC 3339 with nine fractional digits, in UTC. */
export function formatNs(ns: bigint): string {
  const ms = ns / 1_000_000n;
  const iso = new Date(Number(ms)).toISOString(); // …T03:04:05.123Z
  const frac = (ns % 1_000_000_000n).toString().padStart(9, "0");
  return `${iso.slice(0, 19)}.${frac}Z`;
}

export function msToNs(ms: number): bigint {
  return BigInt(Math.trunc(ms)) * 1_000_000n;
}

/** The line, cut to MAX_LINE_BYTES (on a character boundary) with a note of what was cut. */
export function cutLine(text: string): string {
  if (text.length * 3 <= MAX_LINE_BYTES) return text;
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes <= MAX_LINE_BYTES) return text;
  const keep = MAX_LINE_BYTES - 40;
  let kept = Buffer.from(text, "utf8").subarray(0, keep).toString("utf8");
  // A cut inside a multi-byte character decodes as U+FFFD: drop it.
  if (kept.endsWith("\uFFFD")) kept = kept.slice(0, -1);
  return `${kept} …[${bytes - Buffer.byteLength(kept, "utf8")} bytes cut]`;
}
