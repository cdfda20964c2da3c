// Entry point of a builder pod's gate container (`node /app/dist/builds/gate-main.js` in krane's
// image): serves ./gate.ts on the pod's network until the pod ends.
import { readFile } from "node:fs/promises";
import { BUILDER_GATE_PORT, BUILDER_KEY_FILE, BUILDER_SOCKET } from "../contracts/builds.js";
import { parseGateKey, serveGate } from "./gate.js";

const key = parseGateKey(await readFile(process.env.KRANE_BUILDER_KEY_FILE ?? BUILDER_KEY_FILE, "utf8"));
const gate = await serveGate({ port: BUILDER_GATE_PORT, socket: BUILDER_SOCKET, key });
process.stdout.write(`builder gate listening on :${gate.port}, passing to ${BUILDER_SOCKET}\n`);
const stop = (): void => void gate.close().then(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
