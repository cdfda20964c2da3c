// gRPC through the sentinel (part of `npm run bench -- gateway`): unary calls/s and latency of a
// standard gRPC client (connect-node's gRPC transport, 64 calls in flight on one HTTP/2
// connection) against the hello app's gRPC mode (a connect-node server on h2c, its own process),
// directly and through one `krane sentinel` process that routes to it by an EndpointSlice whose
// port says appProtocol kubernetes.io/h2c, in the same run. Everything shares this machine's
// cores, the client too, so the direct figure is the floor the sentinel is measured against.
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { startCluster } from "../../src/cluster/index.js";
import type { KubeClient } from "../../src/kube/client.js";
import { resources } from "../../src/kube/resources.js";
import { SENTINEL_NAMESPACE } from "../../src/contracts/cluster.js";
import {
  LABEL_COMPONENT,
  LABEL_DEPLOYMENT_ID,
  LABEL_ENVIRONMENT_ID,
  LABEL_MANAGED_BY,
  LABEL_REGION,
  MANAGED_BY,
} from "../../src/contracts/labels.js";
import { APP_PROTOCOL_H2C } from "../../src/contracts/protocols.js";
import { formatRoutingPolicy, POLICY_KEY, ROUTING_COMPONENT } from "../../src/contracts/routing.js";
import { HelloService } from "../../src/gen/krane/hello/v1/hello_pb.js";
import { sentinelKubeConfigFrom, applySentinelRbac } from "../../src/sentinel/rbac.js";
import { freePort, percentileOf, ROOT, until, spawnBenchSentinel } from "../support.js";

const ENV = "env_bench_grpc";
const REGION = "bench";
const SECONDS = Number(process.env.KRANE_BENCH_GATEWAY_SECONDS ?? 10);
const IN_FLIGHT = 64;

function labels(deploymentId?: string): Record<string, string> {
  return {
    [LABEL_MANAGED_BY]: MANAGED_BY,
    [LABEL_COMPONENT]: ROUTING_COMPONENT,
    [LABEL_ENVIRONMENT_ID]: ENV,
    [LABEL_REGION]: REGION,
    ...(deploymentId ? { [LABEL_DEPLOYMENT_ID]: deploymentId } : {}),
  };
}

interface Figures {
  readonly calls: number;
  readonly perSecond: number;
  readonly p50: number;
  readonly p99: number;
}

/** IN_FLIGHT unary calls kept in flight for `seconds`. */
async function load(client: Client<typeof HelloService>, seconds: number): Promise<Figures> {
  const latencies: number[] = [];
  const end = performance.now() + seconds * 1000;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    while (performance.now() < end) {
      const t = performance.now();
      await client.say({ text: "bench" });
      latencies.push(performance.now() - t);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  const elapsed = (performance.now() - started) / 1000;
  return {
    calls: latencies.length,
    perSecond: latencies.length / elapsed,
    p50: percentileOf(latencies, 50),
    p99: percentileOf(latencies, 99),
  };
}

export async function grpcUnary(
  cluster: Awaited<ReturnType<typeof startCluster>>,
  kube: KubeClient,
  dir: string,
  children: ChildProcess[],
): Promise<void> {
  const net = cluster.podNetwork;
  if (!net) throw new Error("no pod network");
  await applySentinelRbac(cluster.kubeConfig());
  const [appPort, sentinelPort, opsPort] = [await freePort(), await freePort(), await freePort()];
  const app = spawn(
    process.execPath,
    ["--import", import.meta.resolve("tsx"), join(ROOT, "src/cluster/workload/hello-main.ts")],
    {
      stdio: ["ignore", "pipe", "inherit"],
      env: { PATH: process.env.PATH, PORT: String(appPort), HELLO_PROTOCOL: "grpc", KRANE_INSTANCE_ID: "bench-grpc-0" },
    },
  );
  children.push(app);
  await new Promise<void>((r) => app.stdout?.once("data", () => r()));
  await kube.apply(resources.namespaces, { metadata: { name: SENTINEL_NAMESPACE } });
  await kube.apply(resources.endpointSlices, {
    metadata: { name: "bench-grpc-v1", namespace: SENTINEL_NAMESPACE, labels: labels("v1") },
    addressType: "IPv4",
    ports: [{ name: "http", port: appPort, protocol: "TCP", appProtocol: APP_PROTOCOL_H2C }],
    endpoints: [{ addresses: [`10.${net.slot}.9.2`], conditions: { ready: true } }],
  });
  await kube.apply(resources.configMaps, {
    metadata: { name: "bench-grpc-routes", namespace: SENTINEL_NAMESPACE, labels: labels() },
    data: { [POLICY_KEY]: formatRoutingPolicy({ version: 1, environmentId: ENV, mode: "instances", revisions: [] }) },
  });
  const kubeconfig = join(dir, "sentinel-grpc.kubeconfig");
  writeFileSync(kubeconfig, (await sentinelKubeConfigFrom(cluster.kubeConfig())).exportConfig(), { mode: 0o600 });
  const sentinel = spawnBenchSentinel({
    environmentId: ENV,
    region: REGION,
    port: sentinelPort,
    opsPort,
    kubeconfig,
    podNetwork: net,
  });
  children.push(sentinel);
  await until(
    "the gRPC bench's sentinel ready",
    async () => (await fetch(`http://127.0.0.1:${opsPort}/readyz`).catch(() => undefined))?.ok,
    60_000,
    20,
    true,
  );
  const direct = createClient(HelloService, createGrpcTransport({ baseUrl: `http://127.${net.slot}.9.2:${appPort}` }));
  const viaSentinel = createClient(HelloService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${sentinelPort}` }));
  await until(
    "the sentinel routes gRPC calls",
    async () => (await viaSentinel.say({ text: "ping" }).catch(() => undefined))?.pod,
    60_000,
    50,
    true,
  );
  await load(direct, 2);
  await load(viaSentinel, 2);
  const d = await load(direct, SECONDS);
  const s = await load(viaSentinel, SECONDS);
  const line = (name: string, f: Figures): string =>
    `gateway: gRPC unary, ${IN_FLIGHT} in flight, ${name.padEnd(15)} ${f.perSecond.toFixed(0).padStart(7)} calls/s  p50 ${f.p50.toFixed(1)} ms  p99 ${f.p99.toFixed(1)} ms  (${f.calls} calls)`;
  console.log(line("direct", d));
  console.log(line("via sentinel", s));
  console.log(`gateway: gRPC unary via sentinel / direct: ${(s.perSecond / d.perSecond).toFixed(2)}× the calls/s`);
}
