// Masking of secret values in log lines before they are stored (pure). ctrl masks, not the agent:
// ctrl already holds the values (sealed, opened in memory for GetSecretValues) and stores the
// lines, so no new copy of a secret travels to the cluster and no line reaches the store by a path
// that skipped the mask. A value shorter than MIN_MASKED characters is not masked: masking "1" or
// "on" would garble every line and hide nothing an attacker could not guess. A value with several
// lines is masked line by line (a log line never holds a newline).

export const MASK = "[masked]";
/** Values shorter than this are left alone. */
export const MIN_MASKED = 4;

/** The pieces to mask: each line of each value, long enough, longest first, once each. */
export function maskedPieces(values: Iterable<string>): string[] {
  const out = new Set<string>();
  for (const v of values) for (const piece of v.split(/\r?\n/)) if ([...piece].length >= MIN_MASKED) out.add(piece);
  return [...out].sort((a, b) => b.length - a.length || (a < b ? -1 : a > b ? 1 : 0));
}

export type Masker = (line: string) => string;

/** A function that replaces every occurrence of any of the values in a line by MASK. */
export function secretMasker(values: Iterable<string>): Masker {
  const pieces = maskedPieces(values);
  if (pieces.length === 0) return (line) => line;
  // One alternation, longest first: a value that contains another is masked whole.
  const re = new RegExp(pieces.map(escapeRegExp).join("|"), "g");
  return (line) => line.replace(re, MASK);
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
