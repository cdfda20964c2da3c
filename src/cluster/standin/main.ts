// Entry point of the pod stand-in process that a local cluster started with stand-ins runs as
// one of its components (cluster.ts): `node --import tsx main.ts --kubeconfig F --dir D
// --pod-network-slot S --krane-bin B`. Writes D/pod-standin.ready once it serves the pods that
// exist; SIGTERM stops every stand-in (sentinels drain) and exits.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { pino } from "pino";
import { podNetworkForSlot } from "../pod-network.js";
import { PodStandins } from "./standin.js";

const { values } = parseArgs({
  options: {
    kubeconfig: { type: "string" },
    dir: { type: "string" },
    "pod-network-slot": { type: "string" },
    "krane-bin": { type: "string" },
  },
});
const { kubeconfig, dir } = values;
const slot = Number(values["pod-network-slot"]);
const kraneBin = values["krane-bin"];
if (!kubeconfig || !dir || !kraneBin || !Number.isInteger(slot)) {
  console.error("usage: main.ts --kubeconfig FILE --dir DIR --pod-network-slot S --krane-bin FILE");
  process.exit(2);
}
const log = pino({ base: { component: "pod-standin" } });
const standins = new PodStandins({ kubeconfigPath: kubeconfig, dir, network: podNetworkForSlot(slot), kraneBin, log });
let stopping = false;
const stop = (): void => {
  if (stopping) return;
  stopping = true;
  standins.stop().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
await standins.start();
writeFileSync(join(dir, "pod-standin.ready"), String(process.pid));
log.info({}, "pod stand-in ready");
