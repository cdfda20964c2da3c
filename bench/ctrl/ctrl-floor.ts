// The floor for delivery in `npm run bench -- ctrl`: the least any server can do to deliver a
// change to 10 agent streams over the wire the agents speak (Connect streaming, binary protobuf,
// HTTP/2) — encode the change's DeploymentState once and write its frame to each stream — with no
// database, no outbox, no authentication and no RPC framework on the server. The receivers are the
// bench's own 10 Connect clients, exactly as for ctrl. Not a product: it tells how much of ctrl's
// delivery limit is the wire and the receiving side on this machine, and how much is ctrl.
// IPC as bench/ctrl/ctrl-server.ts: {write, rate, seconds, warmupSeconds, mark} → {done, commits},
// {stop} → exit. "Commit" time = the moment the change was handed to the streams.
import * as http2 from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import { ApplyDeploymentSchema, DeploymentStateSchema, EnvVarSchema } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { paced, type WriteCommand } from "./ctrl-delivery.js";
import { BENCH_REGION } from "./ctrl-store.js";

type Command = WriteCommand | { type: "stop" };

// The same fields, and so about the same size, as the deployments bench/ctrl/ctrl-store.ts desires.
const base = {
  workspaceId: "ws_bench0000000000000000",
  projectId: "prj_bench000000000000000",
  environmentId: "env_bench000000000000000",
  k8sNamespace: "ws-bench",
  image: "registry.example.com/app:1",
  command: ["node"],
  args: ["server.js"],
  port: 8080,
  env: [create(EnvVarSchema, { name: "MODE", value: "bench" })],
  cpuMillicores: 250n,
  memoryMib: 256n,
  buildId: "build-1",
  region: BENCH_REGION,
  workspaceSlug: "bench",
  projectSlug: "app",
  environmentSlug: "prod",
};

let version = 0n;
function frame(value: number): Uint8Array {
  version++;
  const apply = create(ApplyDeploymentSchema, {
    ...base,
    deploymentId: `dep_bench${String(value % 100).padStart(8, "0")}`,
    k8sName: `app-prod-b${String(value % 100).padStart(7, "0")}`,
    replicas: value,
    revision: version,
  });
  return encodeEnvelope(
    0,
    toBinary(DeploymentStateSchema, create(DeploymentStateSchema, { version, state: { case: "apply", value: apply } })),
  );
}

const streams = new Set<http2.ServerHttp2Stream>();
const server = http2.createServer();
server.on("stream", (stream, headers) => {
  if (!String(headers[":path"] ?? "").endsWith("/WatchDeployments")) {
    stream.respond({ ":status": 404 });
    stream.end();
    return;
  }
  stream.resume(); // the request (a region and a cursor) is not read: every watcher gets every change
  stream.respond({ ":status": 200, "content-type": "application/connect+proto" });
  stream.write(
    encodeEnvelope(
      0,
      toBinary(DeploymentStateSchema, create(DeploymentStateSchema, { state: { case: "snapshotStart", value: {} } })),
    ),
  );
  stream.write(
    encodeEnvelope(
      0,
      toBinary(
        DeploymentStateSchema,
        create(DeploymentStateSchema, { state: { case: "snapshotEnd", value: { headVersion: 0n } } }),
      ),
    ),
  );
  streams.add(stream);
  stream.on("close", () => streams.delete(stream));
  stream.on("error", () => streams.delete(stream));
});
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const address = server.address();
const port = typeof address === "object" && address ? address.port : 0;

async function write(value: number): Promise<void> {
  const f = frame(value);
  for (const s of streams) s.write(f);
}

process.on("message", (msg: Command) => {
  void (async () => {
    if (msg.type === "write") {
      if (msg.warmupSeconds > 0) await paced(write, msg.rate, msg.warmupSeconds, 0);
      const run = await paced(write, msg.rate, msg.seconds, msg.mark);
      process.send?.({ type: "done", commits: run.commits, lastCommitMs: run.lastCommitMs });
    } else {
      const end = encodeEnvelope(2, new TextEncoder().encode("{}"));
      for (const s of streams) s.end(end);
      server.close();
      process.disconnect?.();
      process.exit(0);
    }
  })();
});
process.send?.({ type: "ready", url: `http://127.0.0.1:${port}`, token: "floor" });
