// Serving details: the ops port (/healthz, /readyz, /metrics over HTTP/1.1) and TLS on the API
// port with the same protocols.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { WorkspaceService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { ClusterService } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { bearer, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

describe("ops endpoints", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"));
  });
  after(async () => {
    await ctrl.close();
    dir.remove();
  });

  it("answers health, readiness and Prometheus metrics over HTTP/1.1", async () => {
    await ctrl.client(WorkspaceService, ctrl.adminToken).listWorkspaces({});
    await ctrl
      .client(WorkspaceService, null)
      .listWorkspaces({})
      .catch(() => undefined);
    const base = ctrl.opsUrl ?? "";
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    assert.match(metrics, /krane_ctrl_rpc_total\{service="WorkspaceService",method="ListWorkspaces",code="ok"\} 1/);
    assert.match(
      metrics,
      /krane_ctrl_rpc_total\{service="WorkspaceService",method="ListWorkspaces",code="Unauthenticated"\} 1/,
    );
    assert.equal((await fetch(`${base}/nope`)).status, 404);
  });
});

describe("TLS", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  let ca: Buffer;
  before(async () => {
    const key = join(dir.path, "key.pem");
    const cert = join(dir.path, "cert.pem");
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        key,
        "-out",
        cert,
        "-days",
        "1",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=IP:127.0.0.1,DNS:localhost",
      ],
      { stdio: "ignore" },
    );
    ca = readFileSync(cert);
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { tls: { certFile: cert, keyFile: key } });
  });
  after(async () => {
    await ctrl.close();
    dir.remove();
  });

  it("serves Connect and gRPC over TLS", async () => {
    assert.match(ctrl.url, /^https:/);
    const opts = { baseUrl: ctrl.url, httpVersion: "2" as const, nodeOptions: { ca } };
    const api = createClient(
      WorkspaceService,
      createConnectTransport({ ...opts, interceptors: [bearer(ctrl.adminToken)] }),
    );
    const created = await api.createWorkspace({ slug: "secure" });
    assert.equal(created.workspace?.slug, "secure");
    const token = await ctrl.agentToken("eu");
    const grpc = createClient(ClusterService, createGrpcTransport({ ...opts, interceptors: [bearer(token)] }));
    await grpc.heartbeat({ region: "eu", agentId: "tls-agent" });
  });
});
