// Entry point the cluster's reaper runs after the owning process died: `node cleanup-main.ts
// --slot S [--dir D]` removes what slot S's real nodes left on this machine (host.ts).
import { parseArgs } from "node:util";
import { cleanupRealNodes } from "./host.js";

const { values } = parseArgs({ options: { slot: { type: "string" }, dir: { type: "string" } } });
const slot = Number(values.slot);
if (!Number.isInteger(slot)) {
  console.error("usage: cleanup-main.ts --slot S [--dir DIR]");
  process.exit(2);
}
await cleanupRealNodes(slot, values.dir);
