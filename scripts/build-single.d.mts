// Types of build-single.mjs for the TypeScript tests that import it.
export function singleFileName(platform?: NodeJS.Platform, arch?: string): string;
export function bunPath(): string | undefined;
export const PLATFORMS: Record<string, string>;
export function hostPlatform(): string;
export function parsePlatforms(text: string | undefined): string[];
export function buildSingleFile(
  root: string,
  outDir: string,
  stamp: { version: string; commit: string; date: string },
  listing: string,
  platform?: string,
): string;
