// Log lines as the agent, ctrl and the CLI agree on them: the kubelet's timestamp at the start of
// each line of `pods/log?timestamps=true` (RFC 3339 with up to nine fractional digits), kept as
// unix nanoseconds so lines of many instances sort exactly; and the cut of over-long lines, so a
// batch of lines always fits the messages that carry it between ctrl replicas.

/** The longest line relayed, in UTF-8 bytes; a longer one is cut and says how much was cut. */
export const MAX_LINE_BYTES = 5_000;

const STAMP = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2}) /;

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
  const second = `${m[1]}${m[3]}`;
  if (second !== lastSecond) {
    const ms = Date.parse(second);
    if (Number.isNaN(ms)) return null;
    lastSecond = second;
    lastSecondNs = BigInt(ms) * 1_000_000n;
  }
  const frac = m[2] === undefined ? 0n : BigInt(m[2].padEnd(9, "0"));
  return { ns: lastSecondNs + frac, text: line.slice(m[0].length) };
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
