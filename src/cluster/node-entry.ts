// How the local cluster starts one of krane's own files as a separate Node process: from the
// sources (a checkout, tests) the `.ts` file through tsx; from the build (`dist/`, the npm package,
// the image — where tsx is not installed) the compiled `.js` beside it. `from` is the caller's
// import.meta.url, `rel` the file relative to it without extension.
import { fileURLToPath } from "node:url";

export function nodeEntryArgs(from: string, rel: string): string[] {
  if (from.endsWith(".ts")) return ["--import", import.meta.resolve("tsx"), fileURLToPath(new URL(`${rel}.ts`, from))];
  return [fileURLToPath(new URL(`${rel}.js`, from))];
}
