#!/usr/bin/env node
// The `krane` executable. It runs the compiled build in dist/ (`npm run build`); tsx is only a
// dev and test tool. In a source checkout (src/ next to dist/) whose build is missing or older
// than the sources, it runs the sources through tsx instead, so a changed tree never runs stale
// code: `krane version` then says "running from source". An installed package has no src/.
import { existsSync } from "node:fs";

const root = new URL("../", import.meta.url);
const checkout = existsSync(new URL("src/cli/main.ts", root));
if (checkout && !(await import("../scripts/freshness.mjs")).buildIsFresh(root)) {
  // Bun runs TypeScript itself (`bun bin/krane.js sentinel` runs the sentinel on Bun).
  if (process.versions.bun === undefined) {
    const { register } = await import("tsx/esm/api");
    register();
  }
  await import("../src/cli/main.ts");
} else {
  if (!existsSync(new URL("dist/cli/main.js", root))) {
    console.error("krane: the compiled build (dist/) is missing; run `npm run build` in the package");
    process.exit(1);
  }
  await import("../dist/cli/main.js");
}
