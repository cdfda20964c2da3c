// The API port speaks HTTP/1.1 next to h2c: Connect JSON from curl and fetch (a browser's
// protocol to a plain-http origin), while agents (gRPC and Connect over HTTP/2, watch streams)
// keep working on the same port. Every test goes over real sockets to a real ctrl.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import * as net from "node:net";
import { after, before, describe, it } from "node:test";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { WorkspaceService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { ClusterService } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { bearer, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

describe("HTTP/1.1 on the API port", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"));
  });
  after(async () => {
    await ctrl.close();
    dir.remove();
  });

  it("answers a Connect unary call sent by curl over HTTP/1.1 (docs/using.md's example)", async () => {
    // curl runs as a child process: ctrl answers from this one, so nothing here may block.
    const { stdout: out } = await promisify(execFile)(
      "curl",
      [
        "-sS",
        "--http1.1",
        "-w",
        "\n%{http_version} %{http_code}",
        "-H",
        `Authorization: Bearer ${ctrl.adminToken}`,
        "-H",
        "Content-Type: application/json",
        "-d",
        '{"slug":"by-hand"}',
        `${ctrl.url}/krane.ctrl.v1.WorkspaceService/CreateWorkspace`,
      ],
      { encoding: "utf8", timeout: 20_000 },
    );
    const [body, status] = out.split("\n");
    assert.equal(status, "1.1 200");
    assert.equal((JSON.parse(body ?? "") as { workspace?: { slug?: string } }).workspace?.slug, "by-hand");
  });

  it("answers fetch (HTTP/1.1) with Connect errors and 404 for unknown paths", async () => {
    const res = await fetch(`${ctrl.url}/krane.ctrl.v1.WorkspaceService/ListWorkspaces`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(res.status, 401);
    assert.equal(((await res.json()) as { code?: string }).code, "unauthenticated");
    assert.equal((await fetch(`${ctrl.url}/no/such/path`, { method: "POST" })).status, 404);
  });

  it("takes calls as POST only, reads too (Connect would take a NO_SIDE_EFFECTS read over GET)", async () => {
    const query = `encoding=json&message=${encodeURIComponent("{}")}`;
    const res = await fetch(`${ctrl.url}/krane.ctrl.v1.WorkspaceService/ListWorkspaces?${query}`, {
      headers: { authorization: `Bearer ${ctrl.adminToken}` },
    });
    assert.equal(res.status, 405);
    assert.equal(res.headers.get("allow"), "POST");
  });

  it("serves Connect over HTTP/1.1 and HTTP/2 from the same port to clients of the library", async () => {
    for (const httpVersion of ["1.1", "2"] as const) {
      const api = createClient(
        WorkspaceService,
        createConnectTransport({ baseUrl: ctrl.url, httpVersion, interceptors: [bearer(ctrl.adminToken)] }),
      );
      const listed = await api.listWorkspaces({});
      assert.ok(
        listed.workspaces.some((w) => w.slug === "by-hand"),
        httpVersion,
      );
    }
  });

  it("keeps gRPC over h2c and agents' watch streams working, also while HTTP/1.1 calls run", async () => {
    const token = await ctrl.agentToken("eu");
    const grpc = ctrl.client(ClusterService, token, "grpc");
    await grpc.heartbeat({ region: "eu", agentId: "h2c-agent" });
    const abort = new AbortController();
    const stream = grpc.watchDeployments({ region: "eu" }, { signal: abort.signal });
    const it = stream[Symbol.asyncIterator]();
    const [first] = await Promise.all([
      it.next(),
      fetch(`${ctrl.url}/krane.ctrl.v1.WorkspaceService/ListWorkspaces`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${ctrl.adminToken}` },
        body: "{}",
      }).then((r) => assert.equal(r.status, 200)),
    ]);
    assert.equal(first.done, false);
    abort.abort();
    await it.return?.().catch(() => undefined);
  });

  it("serves a server-streaming call over HTTP/1.1 (Connect's streaming protocol)", async () => {
    const token = await ctrl.agentToken("us");
    const api = createClient(
      ClusterService,
      createConnectTransport({ baseUrl: ctrl.url, httpVersion: "1.1", interceptors: [bearer(token)] }),
    );
    const abort = new AbortController();
    const it = api.watchDeployments({ region: "us" }, { signal: abort.signal })[Symbol.asyncIterator]();
    const first = await it.next();
    assert.equal(first.done, false);
    assert.equal(first.value?.state.case, "bookmark");
    abort.abort();
    await it.return?.().catch(() => undefined);
  });

  it("closes a connection that never says which protocol it speaks once its peer ends it", async () => {
    const port = Number(new URL(ctrl.url).port);
    const sock = net.connect(port, "127.0.0.1");
    await new Promise<void>((r) => sock.once("connect", () => r()));
    // "PRI" alone could still become the HTTP/2 preface; then the peer hangs up.
    sock.end("PRI");
    await new Promise<void>((r) => sock.once("close", () => r()));
    // The server is still serving.
    const res = await fetch(`${ctrl.url}/x`, { method: "POST" });
    assert.equal(res.status, 404);
  });
});
