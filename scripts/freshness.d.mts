// Types of freshness.mjs for the TypeScript tests that import it.
export function newestMtime(dir: string): number;
export function buildIsFresh(root: string | URL): boolean;
