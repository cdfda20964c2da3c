// Keyset pagination for the read model's list functions: a page is "at most `limit` rows after this
// key" in the list's stable order, read with one indexed range query (never OFFSET, which costs
// the skipped rows and shifts when rows are added between pages). The API layer turns the key of
// a page's last row into an opaque page token (../api/page-token.ts).

/** Which page to read: rows strictly after `after` in the list's order, at most `limit` of them. */
export interface PageQuery<K> {
  readonly limit: number;
  readonly after?: K;
}

export interface Page<T> {
  readonly items: T[];
  /** More rows follow the last item. */
  readonly more: boolean;
}

/** Rows were read with `limit + 1`: the extra row only says that more follow. */
export function takePage<T>(rows: T[], q: PageQuery<unknown> | undefined): Page<T> {
  if (q === undefined || rows.length <= q.limit) return { items: rows, more: false };
  return { items: rows.slice(0, q.limit), more: true };
}

/** How many rows to read for a page (one more than it holds, to know whether more follow). */
export function readLimit(q: PageQuery<unknown> | undefined): number | undefined {
  return q === undefined ? undefined : q.limit + 1;
}

/** `q` limited to what a page reads (unlimited without a page). */
export function limitToPage<Q extends { limit(n: number): Q }>(q: Q, page: PageQuery<unknown> | undefined): Q {
  const limit = readLimit(page);
  return limit === undefined ? q : q.limit(limit);
}
