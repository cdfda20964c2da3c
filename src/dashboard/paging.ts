// Following List pages: ctrl answers a List call at most a page at a time.

/** Every item of a paged List call, following next_page_token (at most `maxPages` pages). */
export async function all<T>(
  page: (pageToken: string) => Promise<{ items: T[]; next: string }>,
  maxPages = 1_000,
): Promise<T[]> {
  const out: T[] = [];
  let token = "";
  let pages = 0;
  do {
    const { items, next } = await page(token);
    out.push(...items);
    token = next;
  } while (token !== "" && ++pages < maxPages);
  return out;
}
