// Field paths into a krane.yaml, as errors, plans and the audit log spell them: keys joined with
// dots, list items as [i], and a key that is not a plain word (a hostname, "a.b") quoted as JSON
// (`config."a.b"`, `environments.production.regions.eu-west.replicas`). The same spelling as the
// audit log's diff paths (src/ctrl/audit/diff.ts), so a plan's paths read like the audit's.
// Pure.

export type Segment = string | number;

const PLAIN = /^[A-Za-z0-9_-]+$/;

/** One key as a path segment: quoted when it holds anything but letters, digits, '_' and '-'. */
export function keySegment(key: string): string {
  return PLAIN.test(key) ? key : JSON.stringify(key);
}

/** Segments as a path: `a.b[2]."c.d"`. */
export function formatPath(segments: readonly Segment[]): string {
  let out = "";
  for (const s of segments) {
    if (typeof s === "number") out += `[${s}]`;
    else out += out === "" ? keySegment(s) : `.${keySegment(s)}`;
  }
  return out;
}

/** A path's segments, or undefined when it is not one (formatPath's inverse). */
export function parsePath(path: string): Segment[] | undefined {
  const out: Segment[] = [];
  let i = 0;
  const n = path.length;
  let first = true;
  while (i < n) {
    const c = path[i];
    if (c === "[") {
      const end = path.indexOf("]", i);
      if (end < 0) return undefined;
      const index = path.slice(i + 1, end);
      if (!/^\d+$/.test(index)) return undefined;
      out.push(Number(index));
      i = end + 1;
      first = false;
      continue;
    }
    if (!first) {
      if (c !== ".") return undefined;
      i++;
    }
    first = false;
    if (path[i] === '"') {
      // A JSON string: find its closing quote, skipping escapes.
      let j = i + 1;
      while (j < n && path[j] !== '"') j += path[j] === "\\" ? 2 : 1;
      if (j >= n) return undefined;
      try {
        out.push(JSON.parse(path.slice(i, j + 1)) as string);
      } catch {
        return undefined;
      }
      i = j + 1;
      continue;
    }
    const m = /^[A-Za-z0-9_-]+/.exec(path.slice(i));
    if (!m) return undefined;
    out.push(m[0]);
    i += m[0].length;
  }
  return out.length > 0 ? out : undefined;
}

/**
 * An error message of the form `<path>: <problem>` (how ctrl's validation words every refusal)
 * split into its path and problem; undefined when it does not start with a path.
 */
export function splitFieldMessage(message: string): { path: Segment[]; problem: string } | undefined {
  // The path ends at the first ": " outside a quoted segment.
  let inQuote = false;
  for (let i = 0; i < message.length - 1; i++) {
    const c = message[i];
    if (inQuote) {
      if (c === "\\") i++;
      else if (c === '"') inQuote = false;
      continue;
    }
    if (c === '"') inQuote = true;
    else if (c === ":" && message[i + 1] === " ") {
      const path = parsePath(message.slice(0, i));
      return path ? { path, problem: message.slice(i + 2) } : undefined;
    } else if (c === " ") return undefined;
  }
  return undefined;
}
