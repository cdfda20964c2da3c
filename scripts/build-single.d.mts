// Types of build-single.mjs for the TypeScript tests that import it.
export function singleFileName(platform?: NodeJS.Platform, arch?: string): string;
export function bunPath(): string | undefined;
export function buildSingleFile(
  root: string,
  outDir: string,
  stamp: { version: string; commit: string; date: string },
  listing: string,
): string;
