// Complete lines out of one pod's log stream, as bytes (pure): the agent passes on what pods/log
// gives it without looking at each line. A chunk of the stream usually ends with a newline; what
// follows the last one is kept until the line is complete. A line that grows past the cut
// (MAX_LINE_BYTES of text, after its time stamp) is not kept whole: its start is kept and the
// rest counted, and it is passed on cut exactly as cutLine would cut it, so a tenant printing a
// line without end cannot make the agent hold it.
import { MAX_LINE_BYTES, stampOf } from "../../contracts/logs.js";

const NL = 0x0a;
const SPACE = 0x20;
/** Bytes of an unfinished line kept: the cut text and the longest stamp with its space. */
const KEEP = MAX_LINE_BYTES + 40;
/** cutLine keeps this many bytes of the text of a cut line. */
const CUT_KEEP = MAX_LINE_BYTES - 40;

export class LineChunker {
  /** The start of the unfinished line (at most KEEP bytes). */
  #parts: Buffer[] = [];
  #kept = 0;
  /** Bytes of the unfinished line past KEEP, not kept. */
  #over = 0;

  /** Bytes of an unfinished line waiting for its end. */
  get pending(): number {
    return this.#kept;
  }

  /** The complete lines the chunk finishes (a view of it where it can), or undefined for none. */
  feed(chunk: Buffer): Buffer | undefined {
    const last = chunk.lastIndexOf(NL);
    if (last < 0) {
      this.#keep(chunk);
      return undefined;
    }
    let out: Buffer;
    if (this.#kept === 0) out = chunk.subarray(0, last + 1);
    else {
      const first = chunk.indexOf(NL);
      this.#keep(chunk.subarray(0, first));
      const head = this.#finish();
      out = first === last ? head : Buffer.concat([head, chunk.subarray(first + 1, last + 1)]);
    }
    if (last + 1 < chunk.length) this.#keep(chunk.subarray(last + 1));
    return out;
  }

  /** The unfinished line as a line of its own (the stream ended), or undefined. */
  end(): Buffer | undefined {
    return this.#kept === 0 ? undefined : this.#finish();
  }

  #keep(b: Buffer): void {
    const room = KEEP - this.#kept;
    if (b.length <= room) {
      // A copy: a view would hold the whole read buffer it came from while the line waits.
      this.#parts.push(Buffer.from(b));
      this.#kept += b.length;
      return;
    }
    if (room > 0) {
      this.#parts.push(Buffer.from(b.subarray(0, room)));
      this.#kept += room;
    }
    this.#over += b.length - room;
  }

  /** The kept line with its newline, cut when it grew past KEEP. */
  #finish(): Buffer {
    const line = this.#parts.length === 1 ? (this.#parts[0] as Buffer) : Buffer.concat(this.#parts);
    const over = this.#over;
    this.#parts = [];
    this.#kept = 0;
    this.#over = 0;
    if (over === 0) return Buffer.concat([line, Buffer.of(NL)]);
    // Cut like cutLine: the text's first CUT_KEEP bytes on a character boundary, and how many
    // bytes of the text were cut.
    const space = line.indexOf(SPACE);
    const textStart = space < 0 ? 0 : space + 1;
    const textBytes = line.length - textStart + over;
    let keep = Math.min(CUT_KEEP, line.length - textStart);
    // Back off a character cut in two: a UTF-8 continuation byte is 10xxxxxx.
    const end = textStart + keep;
    if (end < line.length && ((line[end] as number) & 0xc0) === 0x80) {
      let start = end - 1;
      while (start > textStart && ((line[start] as number) & 0xc0) === 0x80) start--;
      keep = start - textStart;
    }
    const note = Buffer.from(` …[${textBytes - keep} bytes cut]\n`, "utf8");
    return Buffer.concat([line.subarray(0, textStart + keep), note]);
  }
}

/** Lines in a chunk of complete lines (its newlines). */
export function countLines(b: Uint8Array): number {
  let n = 0;
  for (let i = b.indexOf(NL); i >= 0; i = b.indexOf(NL, i + 1)) n++;
  return n;
}

/** The time of the last line of a chunk of complete lines, or undefined when it has no stamp. */
export function lastLineNs(b: Buffer): bigint | undefined {
  const start = b.length < 2 ? 0 : b.lastIndexOf(NL, b.length - 2) + 1;
  // A stamp is ASCII and at most 35 characters and a space.
  return stampOf(b.toString("latin1", start, Math.min(b.length, start + 40)));
}

/** The lines of a chunk of complete lines from the first one later than `ns` on, or undefined for none. */
export function linesAfter(b: Buffer, ns: bigint): Buffer | undefined {
  for (let start = 0; start < b.length;) {
    const nl = b.indexOf(NL, start);
    const t = stampOf(b.toString("latin1", start, Math.min(nl < 0 ? b.length : nl, start + 40)));
    if (t !== undefined && t > ns) return start === 0 ? b : b.subarray(start);
    if (nl < 0) break;
    start = nl + 1;
  }
  return undefined;
}
