// How a deployment's protocol travels (ctrl's validation → the pod label → the routing slice's
// appProtocol → the sentinel's table) and the sentinel's gRPC answers, pure.
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { create } from "@bufbuild/protobuf";
import { CreateDeploymentRequestSchema } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { deploymentFrom, validateCreateDeployment } from "../../../src/ctrl/validate/api.js";
import { DomainError } from "../../../src/ctrl/errors.js";
import { renderReplicaSet } from "../../../src/agent/deployments/render.js";
import { validateApplyDeployment } from "../../../src/agent/deployments/validate.js";
import { renderRevisionSlices } from "../../../src/agent/sentinels/routing.js";
import { APP_PROTOCOL_H2C, LABEL_APP_PROTOCOL } from "../../../src/contracts/protocols.js";
import { LABEL_DEPLOYMENT_ID } from "../../../src/contracts/labels.js";
import { defaultRoutingPolicy } from "../../../src/contracts/routing.js";
import type { KubeObject } from "../../../src/kube/object.js";
import { buildTable } from "../../../src/sentinel/table.js";
import { encodeGrpcMessage, grpcAnswerHeaders, grpcStatusOf, isGrpcRequest } from "../../../src/sentinel/grpc.js";
import { h2RequestHeaders } from "../../../src/sentinel/h2-upstream.js";
import { ownAnswer } from "../../../src/sentinel/request-path.js";
import { sampleDeployment } from "../agent/deployments/fixtures.js";
import { sampleSentinel } from "../agent/sentinels/fixtures.js";

const request = (protocol: string) =>
  create(CreateDeploymentRequestSchema, {
    workspace: "acme",
    project: "web",
    environment: "prod",
    image: "app:1",
    protocol,
  });

test("ctrl: --protocol defaults to http1, takes http1/h2c/grpc, and refuses anything else naming the field", () => {
  assert.equal(deploymentFrom(validateCreateDeployment(request("")), null).protocol, "http1");
  for (const p of ["http1", "h2c", "grpc"]) assert.equal(validateCreateDeployment(request(p)).protocol, p);
  for (const bad of ["HTTP1", "h2", "http2", "grpc ", "http3", "h2c\u0000"]) {
    assert.throws(
      () => validateCreateDeployment(request(bad)),
      (e) => e instanceof DomainError && e.field === "protocol",
      bad,
    );
  }
});

function podOf(rs: KubeObject, ip: string): KubeObject {
  const template = (rs.spec as { template: { metadata: { labels: Record<string, string> }; spec: unknown } }).template;
  return {
    metadata: { name: "p-1", namespace: "ws-a", labels: template.metadata.labels },
    spec: { ...(template.spec as object), nodeName: "n-1" },
    status: {
      phase: "Running",
      podIP: ip,
      conditions: [
        { type: "ContainersReady", status: "True" },
        { type: "Ready", status: "True" },
      ],
    },
  };
}

test("agent → sentinel: grpc and h2c pods get slices whose port says kubernetes.io/h2c, which the sentinel dials in HTTP/2", () => {
  for (const [protocol, appProtocol, upstream] of [
    ["", undefined, "http1"],
    ["http1", undefined, "http1"],
    ["h2c", APP_PROTOCOL_H2C, "h2c"],
    ["grpc", APP_PROTOCOL_H2C, "h2c"],
  ] as const) {
    const d = sampleDeployment({ protocol });
    assert.equal(validateApplyDeployment(d, "local", true), undefined);
    const rs = renderReplicaSet(d, "local");
    const pod = podOf(rs, "10.1.0.7");
    assert.equal(
      pod.metadata.labels?.[LABEL_APP_PROTOCOL],
      protocol === "" || protocol === "http1" ? undefined : protocol,
    );
    const [slice] = renderRevisionSlices(sampleSentinel(), "local", "dep_1", [pod], () => "zone-a");
    assert.ok(slice);
    const port = (slice.ports as { appProtocol?: string }[])[0];
    assert.equal(port?.appProtocol, appProtocol, protocol);
    const { table, problems } = buildTable([slice], defaultRoutingPolicy("env_a"));
    assert.deepEqual(problems, []);
    assert.equal(table.revisions[0]?.endpoints[0]?.protocol, upstream);
  }
});

test("agent: an ApplyDeployment with an unknown protocol is refused", () => {
  assert.match(validateApplyDeployment(sampleDeployment({ protocol: "quic" }), "local", true) ?? "", /protocol/);
});

test("sentinel table: any other appProtocol is spoken to in HTTP/1.1", () => {
  const slice = (appProtocol: string): KubeObject => ({
    metadata: { name: "s", namespace: "sentinel", labels: { [LABEL_DEPLOYMENT_ID]: "d" } },
    addressType: "IPv4",
    ports: [{ name: "http", port: 8080, protocol: "TCP", appProtocol }],
    endpoints: [{ addresses: ["10.0.0.1"] }],
  });
  for (const a of ["http", "kubernetes.io/ws", "h2c", "KUBERNETES.IO/H2C"]) {
    assert.equal(buildTable([slice(a)], defaultRoutingPolicy("e")).table.revisions[0]?.endpoints[0]?.protocol, "http1");
  }
});

test("gRPC requests are told by content-type", () => {
  for (const ct of [
    "application/grpc",
    "application/grpc+proto",
    "application/grpc+json",
    "application/grpc-web",
    "Application/GRPC; charset=utf-8",
  ])
    assert.ok(isGrpcRequest(ct), ct);
  for (const ct of [undefined, "", "application/json", "application/grpcx", "text/plain; application/grpc"])
    assert.ok(!isGrpcRequest(ct), String(ct));
});

test("the sentinel's own answers map to gRPC statuses: UNAVAILABLE for no instance or a failed connect, DEADLINE_EXCEEDED for a timeout", () => {
  assert.equal(grpcStatusOf("no-instance", 503), 14);
  assert.equal(grpcStatusOf("all-instances-failing", 502), 14);
  assert.equal(grpcStatusOf("upstream-reset", 502), 14);
  assert.equal(grpcStatusOf("instance-gone", 502), 14);
  assert.equal(grpcStatusOf("not-ready", 503), 14);
  assert.equal(grpcStatusOf("upstream-timeout", 504), 4);
  assert.equal(grpcStatusOf("unauthorized", 401), 16);
  assert.equal(grpcStatusOf("forbidden", 403), 7);
  assert.equal(grpcStatusOf(undefined, 401), 16);
  assert.equal(grpcStatusOf(undefined, 503), 14);
  const a = ownAnswer("upstream-timeout", "req-1");
  const h = grpcAnswerHeaders(a.status, a.headers, a.body, a.headers["x-krane-sentinel-error"]);
  assert.equal(h["grpc-status"], "4");
  assert.equal(h["content-type"], "application/grpc");
  assert.equal(h["content-length"], undefined);
  assert.equal(h["x-request-id"], "req-1");
  assert.equal(h["x-krane-sentinel-error"], "upstream-timeout");
  assert.equal(decodeURIComponent(h["grpc-message"] ?? ""), a.body.trim());
});

test("grpc-message is percent-encoded printable ASCII that decodes back to the text", () => {
  fc.assert(
    fc.property(fc.string({ unit: "grapheme", maxLength: 60 }), (text) => {
      const enc = encodeGrpcMessage(text);
      assert.match(enc, /^[\x20-\x7e]*$/);
      assert.equal(decodeURIComponent(enc), text);
    }),
  );
});

test("HTTP/2 upstream headers: Host becomes :authority, connection-specific headers go, te: trailers is sent", () => {
  const h = h2RequestHeaders(
    {
      method: "POST",
      path: "/pkg.Svc/M",
      headers: [
        "Host",
        "shop.example.com",
        "content-type",
        "application/grpc",
        "cookie",
        "a=1",
        "cookie",
        "b=2",
        "x-a",
        "1",
        "x-a",
        "2",
        "grpc-timeout",
        "2S",
      ],
      body: null,
      headersTimeout: 1,
      bodyTimeout: 1,
    },
    "10.0.0.1:8080",
  );
  assert.equal(h[":authority"], "shop.example.com");
  assert.equal(h[":scheme"], "http");
  assert.equal(h.host, undefined);
  assert.equal(h.te, "trailers");
  assert.equal(h.cookie, "a=1; b=2");
  assert.deepEqual(h["x-a"], ["1", "2"]);
  assert.equal(h["grpc-timeout"], "2S");
});
