// Entry point of the hello app in its image (`node /app/hello.js`, bundled by scripts/build.mjs
// into dist/cluster/workload/hello.js): listens on $PORT (default 8080), logs JSON lines.
import { HelloApp, identityFromEnv, settingsFromEnv } from "./hello.js";

const log = (o: Record<string, unknown>): void => {
  process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), ...o })}\n`);
};
const port = Number(process.env.PORT ?? "8080");
let app: HelloApp;
try {
  app = new HelloApp(identityFromEnv(process.env, port), settingsFromEnv(process.env), { log });
} catch (err) {
  log({ msg: "bad settings", err: err instanceof Error ? err.message : String(err) });
  process.exit(2);
}
process.on("SIGTERM", () => {
  void app.terminate().then(() => process.exit(0));
});
process.on("SIGINT", () => {
  void app.close().then(() => process.exit(0));
});
await app.start();
log({ msg: "hello listening", port, ...app.settings });
