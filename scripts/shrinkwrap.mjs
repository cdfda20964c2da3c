// `npm pack` hooks: ship the lockfile as npm-shrinkwrap.json, so `npm install -g krane` (and the
// image build) installs exactly the tested dependency tree — on Node 20 a floating range can pick
// a release that needs Node 22. `--remove` deletes the copy again after packing.
import { copyFileSync, rmSync } from "node:fs";
import { fileURLToPath } from "node:url";

const lock = fileURLToPath(new URL("../package-lock.json", import.meta.url));
const shrinkwrap = fileURLToPath(new URL("../npm-shrinkwrap.json", import.meta.url));
if (process.argv.includes("--remove")) rmSync(shrinkwrap, { force: true });
else copyFileSync(lock, shrinkwrap);
