// Bounded fan-out for a kind's I/O: a release's objects written at once, the sentinel pods a
// region reads at once.

/**
 * Runs `fn` over `items`, at most `limit` at a time. Every item runs even when some fail; then it
 * rejects with the first error.
 */
export async function forEachLimit<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  let failed: { err: unknown } | undefined;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++] as T;
      try {
        await fn(item);
      } catch (err) {
        failed ??= { err };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failed) throw failed.err;
}
