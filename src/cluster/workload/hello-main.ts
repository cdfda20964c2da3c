// Entry point of the hello app in its image (`node /app/hello.js`, bundled by scripts/build.mjs
// into dist/cluster/workload/hello.js): listens on $PORT (default 8080), logs JSON lines.
// HELLO_PROTOCOL=grpc serves the gRPC test service over h2c instead (./hello-grpc.ts).
import { helloGrpcBeside } from "./hello-grpc.js";
import { HelloApp, identityFromEnv, settingsFromEnv } from "./hello.js";

const log = (o: Record<string, unknown>): void => {
  process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), ...o })}\n`);
};
const port = Number(process.env.PORT ?? "8080");

async function serveGrpc(): Promise<void> {
  const id = identityFromEnv(process.env, port);
  const app = new HelloApp(id, settingsFromEnv(process.env), { log });
  const grpc = helloGrpcBeside(id, app);
  process.on("SIGTERM", () => {
    // Readiness turns 503 for the shutdown delay (the time to leave the routing tables) first.
    void app
      .terminate()
      .then(() => grpc.close())
      .then(() => process.exit(0));
  });
  process.on("SIGINT", () => process.exit(0));
  await grpc.listen(port);
  log({ msg: "hello listening (gRPC over h2c, HTTP/1.1 beside it)", port });
}

async function serveHttp(): Promise<void> {
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
  // When the process started, too: the cold-start bench splits the runtime's start from Node.js's own.
  log({ msg: "hello listening", port, started: new Date(performance.timeOrigin).toISOString(), ...app.settings });
}

await (process.env.HELLO_PROTOCOL === "grpc" ? serveGrpc() : serveHttp());
