// A gRPC app on a real node, through the whole of krane: ctrl takes `--protocol grpc`, the fenced
// agent runs the hello app's gRPC mode (HELLO_PROTOCOL=grpc: a connect-node gRPC server on h2c,
// HTTP/1.1 beside it) as a real container and writes the routing table with the port's
// appProtocol kubernetes.io/h2c, and krane's own sentinel (a container of krane's image) speaks
// HTTP/2 to it. A standard gRPC client (connect-node's gRPC transport) makes unary, server-streaming
// and bidirectional calls through the sentinel's Service, a deadline is exceeded, and HTTP/1.1 and
// a WebSocket go through the same sentinel to the same container. Then the same calls through
// the Gateway: Traefik (the local cluster's Gateway, built from its Go module) → the sentinel
// Service's h2c port (the HTTPRoute's gRPC rule) → the sentinel → the container; first in h2c on
// the plain listener, then over HTTPS (ALPN h2) on the environment's own HTTPS listener, whose
// certificate cert-manager's controllers issued from the local CA.
import assert from "node:assert/strict";
import { join } from "node:path";
import * as http from "node:http";
import * as http2 from "node:http2";
import type { TLSSocket } from "node:tls";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { WebSocket } from "ws";
import type { Agent } from "../../src/agent/agent.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { InstanceStatus } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { EchoRequestSchema, HelloService } from "../../src/gen/krane/hello/v1/hello_pb.js";
import { SENTINEL_NAMESPACE, SENTINEL_PORT } from "../../src/contracts/cluster.js";
import { APP_PROTOCOL_H2C } from "../../src/contracts/protocols.js";
import { applySentinelRbac } from "../../src/sentinel/rbac.js";
import { eventually } from "../support/cluster.js";
import { kubectl, kubectlJson, realNodesSkip, useRealCluster } from "../support/real-nodes.js";
import { parseGatewayRef, parseIssuer } from "../../src/agent/config.js";
import { EndpointService } from "../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { routingAgent } from "./agent/support.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./ctrl/support.js";

const skip = await realNodesSkip();
const REGION = "local";
const REF = { workspace: "acme", project: "rpc", environment: "production" };
const PUBLIC_HOST = "production-rpc-acme.apps.test";

describe("a gRPC app in a container on a real node, through krane's sentinel", { skip }, () => {
  const h = useRealCluster(["untrusted", "sentinel"], { gateway: true, tls: true });
  const dir = tempDir("krane-grpc-");
  let ctrl: TestCtrl;
  let agent: Agent;
  let base = "";
  let client: Client<typeof HelloService>;

  const running = async (deploymentId: string): Promise<number> => {
    const s = await ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(REF);
    const d = s.deployments.find((x) => x.deployment?.id === deploymentId);
    return (d?.regions[0]?.instances ?? []).filter((i) => i.status === InstanceStatus.RUNNING).length;
  };
  const diagnose = async (): Promise<void> => {
    for (const args of [
      ["get", "pods", "-A", "-o", "wide"],
      ["get", "endpointslices", "-n", SENTINEL_NAMESPACE, "-o", "yaml"],
      ["logs", "-n", SENTINEL_NAMESPACE, "-l", "app.kubernetes.io/component=sentinel", "--prefix", "--tail=40"],
      ["logs", "-n", "ws-acme", "-l", "app.kubernetes.io/component=deployment", "--prefix", "--tail=20"],
    ])
      console.log(`$ kubectl ${args.join(" ")}\n${(await kubectl(h.cluster, args)).stdout}`);
  };

  before(
    async () => {
      const cluster = await h.ready();
      await applySentinelRbac(cluster.kubeConfig());
      ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
        rolloutSweepIntervalMs: 300,
        exposure: { publicApex: "apps.test", organizationApex: "internal.test", scheme: "http" },
      });
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: REGION });
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: REF.workspace });
      await ctrl.client(ProjectService, t).createProject({ workspace: REF.workspace, slug: REF.project });
      await ctrl.client(EnvironmentService, t).createEnvironment({
        workspace: REF.workspace,
        project: REF.project,
        slug: REF.environment,
        regions: [{ region: REGION, replicas: 1 }],
        sentinel: { image: "", replicas: 1, cpuMillicores: 1000n, memoryMib: 256n },
      });
      const gws = cluster.gateways;
      assert.ok(gws, "the cluster runs Gateways");
      agent = await routingAgent(cluster, ctrl, REGION, {
        sentinelImage: (await h.images()).krane.name,
        sentinelObserveIntervalMs: 500,
        gateway: {
          public: parseGatewayRef(gws.public.ref),
          organization: parseGatewayRef(gws.organization.ref),
          certificateIssuer: cluster.certificates ? parseIssuer(cluster.certificates.issuer) : undefined,
          endpointCertificates: true,
          https: gws.https,
        },
      });
      await agent.start();
    },
    { timeout: 30 * 60_000 },
  );
  after(async () => {
    await agent?.stop();
    await ctrl?.close();
    dir.remove();
  });

  it("refuses an unknown protocol, naming the field", async () => {
    await assert.rejects(
      ctrl
        .client(DeploymentService, ctrl.adminToken)
        .createDeployment({ ...REF, image: "krane.local/hello:v1", protocol: "http3" }),
      (err: unknown) => {
        assert.ok(err instanceof ConnectError);
        assert.equal(err.code, Code.InvalidArgument);
        assert.match(err.rawMessage, /protocol/);
        return true;
      },
    );
  });

  it(
    "serves unary, server-streaming and bidirectional calls, a deadline, HTTP/1.1 and a WebSocket",
    { timeout: 15 * 60_000 },
    async () => {
      const { deployment } = await ctrl.client(DeploymentService, ctrl.adminToken).createDeployment({
        ...REF,
        image: "krane.local/hello:v1",
        port: 8080,
        protocol: "grpc",
        env: [{ name: "HELLO_PROTOCOL", value: "grpc" }],
        cpuMillicores: 500n,
        memoryMib: 256n,
        // The kubelet probes in HTTP/1.1; the hello app answers it beside gRPC on the same port.
        healthCheck: { method: "GET", path: "/healthz", intervalSeconds: 1, timeoutSeconds: 2, failureThreshold: 3 },
      });
      assert.ok(deployment);
      assert.equal(deployment.protocol, "grpc");
      try {
        await eventually(
          "1 running instance",
          async () => ((await running(deployment.id)) === 1 ? true : undefined),
          300_000,
        );
        // The routing table says h2c where Kubernetes, the Gateway and the sentinel read it.
        const slices = await kubectlJson<{ items: { ports?: { appProtocol?: string }[] }[] }>(h.cluster, [
          "endpointslices",
          "-n",
          SENTINEL_NAMESPACE,
          "-l",
          `krane.dev/deployment-id=${deployment.id}`,
        ]);
        assert.equal(slices.items[0]?.ports?.[0]?.appProtocol, APP_PROTOCOL_H2C);
        const svc = await kubectlJson<{ items: { spec: { clusterIP: string } }[] }>(h.cluster, [
          "services",
          "-n",
          SENTINEL_NAMESPACE,
        ]);
        const ip = svc.items[0]?.spec.clusterIP;
        assert.ok(ip, "the sentinel's Service");
        base = `http://${ip}:${SENTINEL_PORT}`;
        client = createClient(HelloService, createGrpcTransport({ baseUrl: base }));
        await eventually(
          "the sentinel routes gRPC calls to the container",
          async () => (await client.say({ text: "ping" }).catch(() => undefined))?.pod || undefined,
          180_000,
        );

        // Unary.
        const said = await client.say({ text: "hello" });
        assert.equal(said.text, "hello");
        assert.equal(said.revision, "1");
        assert.match(said.requestId, /.+/);

        // Server streaming: 200 answers of 16 KiB, all of them, in order.
        const ns: number[] = [];
        for await (const m of client.count({ count: 200, bytes: 16 * 1024 })) ns.push(m.n);
        assert.deepEqual(
          ns,
          Array.from({ length: 200 }, (_, i) => i + 1),
        );

        // Bidirectional: each request answered before the next is sent.
        const replies: string[] = [];
        let next: ((t: string | undefined) => void) | undefined;
        async function* requests() {
          for (;;) {
            const text = await new Promise<string | undefined>((r) => (next = r));
            if (text === undefined) return;
            yield create(EchoRequestSchema, { text });
          }
        }
        const it = client.echo(requests())[Symbol.asyncIterator]();
        for (let i = 1; i <= 10; i++) {
          while (!next) await new Promise((r) => setTimeout(r, 5));
          const send = next;
          next = undefined;
          send(`m${i}`);
          const r = await it.next();
          assert.equal(r.value?.n, i);
          replies.push(r.value?.text ?? "");
        }
        while (!next) await new Promise((r) => setTimeout(r, 5));
        next(undefined);
        assert.equal((await it.next()).done, true);
        assert.equal(replies.join(","), Array.from({ length: 10 }, (_, i) => `m${i + 1}`).join(","));

        // A deadline shorter than the call: DEADLINE_EXCEEDED, and the next call still works.
        await assert.rejects(client.say({ text: "slow", delayMs: 10_000 }, { timeoutMs: 500 }), (err: unknown) => {
          assert.ok(err instanceof ConnectError);
          assert.equal(err.code, Code.DeadlineExceeded);
          return true;
        });
        // An app's own error status passes through.
        await assert.rejects(client.say({ text: "nope", failCode: Code.NotFound }), (err: unknown) => {
          assert.ok(err instanceof ConnectError);
          assert.equal(err.code, Code.NotFound);
          assert.equal(err.rawMessage, "nope");
          return true;
        });

        // HTTP/1.1 through the same sentinel to the same container.
        const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
          http
            .get(`${base}/plain?x=1`, (res) => {
              let b = "";
              res.setEncoding("utf8");
              res.on("data", (c: string) => (b += c));
              res.on("end", () => resolve({ status: res.statusCode ?? 0, body: b }));
            })
            .on("error", reject);
        });
        assert.equal(answer.status, 200);
        assert.equal((JSON.parse(answer.body) as { pod: string }).pod, said.pod);

        // A WebSocket through the same sentinel.
        const ws = new WebSocket(`${base.replace("http", "ws")}/ws`);
        const got: string[] = [];
        ws.on("message", (m: Buffer) => got.push(m.toString()));
        await new Promise((resolve, reject) => {
          ws.once("open", resolve);
          ws.once("error", reject);
        });
        ws.send("over the sentinel");
        await eventually(
          "the WebSocket echo",
          async () => (got.includes("over the sentinel") ? true : undefined),
          10_000,
        );
        ws.close();

        // Through the Gateway: the public endpoint's host on Traefik's port, resolved to this machine.
        await ctrl.client(EndpointService, ctrl.adminToken).setEndpoint({ ...REF, visibility: "public" });
        const gw = h.cluster.gateways;
        assert.ok(gw);
        const viaGateway = createClient(
          HelloService,
          createGrpcTransport({
            baseUrl: `http://${PUBLIC_HOST}:${gw.public.port}`,
            nodeOptions: {
              // The public host is this machine (Traefik's port); Node may ask for every address.
              lookup: (_host, opts, cb) => {
                const all = (opts as { all?: boolean }).all === true;
                const done = cb as (e: null, a: string | { address: string; family: number }[], f?: number) => void;
                if (all) done(null, [{ address: "127.0.0.1", family: 4 }]);
                else done(null, "127.0.0.1", 4);
              },
            },
          }),
        );
        let last: unknown;
        const first = await eventually(
          "a gRPC call answered through the Gateway",
          async () => {
            try {
              return await viaGateway.say({ text: "via the gateway" });
            } catch (err) {
              last = err;
              return undefined;
            }
          },
          180_000,
        ).catch((err: unknown) => {
          throw new Error(`${String(err)}; last error: ${String(last)}`);
        });
        assert.equal(first.text, "via the gateway");
        assert.equal(first.authority.split(":")[0], PUBLIC_HOST);
        const gns: number[] = [];
        for await (const m of viaGateway.count({ count: 50, bytes: 1024 })) gns.push(m.n);
        assert.equal(gns.length, 50);
        await assert.rejects(viaGateway.say({ text: "nope", failCode: Code.NotFound }), (err: unknown) => {
          assert.ok(err instanceof ConnectError);
          assert.equal(err.code, Code.NotFound);
          return true;
        });
        await assert.rejects(viaGateway.say({ text: "slow", delayMs: 10_000 }, { timeoutMs: 500 }), (err: unknown) => {
          assert.ok(err instanceof ConnectError);
          assert.equal(err.code, Code.DeadlineExceeded);
          return true;
        });
        // Over HTTPS: the environment's HTTPS listener (ALPN h2), trusting only the local CA.
        const https = gw.https;
        const caPem = h.cluster.certificates?.caPem;
        assert.ok(https && caPem, "the cluster serves HTTPS with the local CA");
        const lookup: NonNullable<http2.SecureClientSessionOptions["lookup"]> = (_host, opts, cb) => {
          const done = cb as (e: null, a: string | { address: string; family: number }[], f?: number) => void;
          if ((opts as { all?: boolean }).all === true) done(null, [{ address: "127.0.0.1", family: 4 }]);
          else done(null, "127.0.0.1", 4);
        };
        const tlsUrl = `https://${PUBLIC_HOST}:${https.port}`;
        const viaTls = createClient(
          HelloService,
          createGrpcTransport({ baseUrl: tlsUrl, nodeOptions: { ca: caPem, lookup } }),
        );
        const overTls = await eventually(
          "a gRPC call answered over HTTPS through the Gateway",
          async () => {
            try {
              return await viaTls.say({ text: "over tls" });
            } catch (err) {
              last = err;
              return undefined;
            }
          },
          180_000,
        ).catch((err: unknown) => {
          throw new Error(`${String(err)}; last error: ${String(last)}`);
        });
        assert.equal(overTls.text, "over tls");
        assert.equal(overTls.pod, said.pod);
        const tns: number[] = [];
        for await (const m of viaTls.count({ count: 50, bytes: 16 * 1024 })) tns.push(m.n);
        assert.deepEqual(
          tns,
          Array.from({ length: 50 }, (_, i) => i + 1),
        );
        await assert.rejects(viaTls.say({ text: "nope", failCode: Code.NotFound }), (err: unknown) => {
          assert.ok(err instanceof ConnectError);
          assert.equal(err.code, Code.NotFound);
          assert.equal(err.rawMessage, "nope");
          return true;
        });
        // The connection is HTTP/2 by ALPN, with the hostname's own certificate.
        const session = http2.connect(tlsUrl, { ca: caPem, lookup });
        try {
          await new Promise<void>((resolve, reject) => {
            session.once("connect", () => resolve());
            session.once("error", reject);
          });
          const socket = session.socket as TLSSocket;
          assert.equal(socket.alpnProtocol, "h2");
          assert.equal(socket.getPeerX509Certificate()?.subjectAltName, `DNS:${PUBLIC_HOST}`);
        } finally {
          session.close();
        }

        // HTTP/1.1 through the Gateway still goes to the sentinel's HTTP/1.1 port.
        const getPlain = (): Promise<{ status: number; body: string }> =>
          new Promise((resolve, reject) => {
            http
              .get(
                { host: "127.0.0.1", port: gw.public.port, path: "/plain", headers: { host: PUBLIC_HOST } },
                (res) => {
                  let b = "";
                  res.setEncoding("utf8");
                  res.on("data", (c: string) => (b += c));
                  res.on("end", () => resolve({ status: res.statusCode ?? 0, body: b }));
                },
              )
              .on("error", reject);
          });
        const answers: string[] = [];
        const plain = await eventually(
          "an HTTP/1.1 answer through the Gateway",
          async () => {
            const a = await getPlain();
            answers.push(`${a.status} ${a.body.slice(0, 80)}`);
            return a.status === 200 ? a : undefined;
          },
          30_000,
        ).catch((err: unknown) => {
          throw new Error(`${String(err)}; answers: ${[...new Set(answers)].join(" | ")}`);
        });
        assert.equal((JSON.parse(plain.body) as { pod: string }).pod, said.pod);
      } catch (err) {
        await diagnose();
        throw err;
      }
    },
  );
});
