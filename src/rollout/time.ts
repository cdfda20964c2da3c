// RFC 3339 timestamps <-> epoch milliseconds. Kubernetes writes whole seconds ("…T00:00:00Z"); we
// keep milliseconds when the input has them and drop a zero fraction so round trips are stable.

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/** Epoch milliseconds, or null when the text is not an RFC 3339 date-time. */
export function parseTime(text: string): number | null {
  if (!RFC3339.test(text)) return null;
  const ms = Date.parse(text);
  return Number.isFinite(ms) ? ms : null;
}

export function formatTime(ms: number): string {
  return new Date(ms).toISOString().replace(".000Z", "Z");
}
