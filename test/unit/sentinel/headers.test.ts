// The proxy's header rules, error classes, settings and protocol sniffing (pure parts).
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { resolveSentinelSettings } from "../../../src/sentinel/config.js";
import { causeOf, classifyUpstreamError, countsAgainstInstance, errorAnswer } from "../../../src/sentinel/errors.js";
import {
  downstreamHeaders,
  http1HasNoBody,
  isIdempotent,
  isSaneRequestId,
  isValidHost,
  upstreamHeaders,
} from "../../../src/sentinel/headers.js";
import { sniffProtocol } from "../../../src/sentinel/server.js";

const ctx = { clientAddress: "192.0.2.9", proto: "http", host: "shop.example.com", requestId: "rid-1" };

function toMap(flat: string[]): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (let i = 0; i < flat.length; i += 2) {
    const k = (flat[i] ?? "").toLowerCase();
    m.set(k, [...(m.get(k) ?? []), flat[i + 1] ?? ""]);
  }
  return m;
}

test("upstream headers: hop-by-hop and Connection-listed names dropped, forwarding headers set", () => {
  const out = toMap(
    upstreamHeaders(
      [
        "Host",
        "shop.example.com",
        "Connection",
        "keep-alive, X-Secret-Hop",
        "X-Secret-Hop",
        "1",
        "Keep-Alive",
        "timeout=5",
        "Transfer-Encoding",
        "chunked",
        "TE",
        "trailers",
        "Upgrade",
        "h2c",
        "Expect",
        "100-continue",
        "Proxy-Authorization",
        "Basic eA==",
        "X-Forwarded-For",
        "203.0.113.1",
        "X-Forwarded-For",
        "198.51.100.2",
        "X-Request-Id",
        "from-client",
        "Accept",
        "text/html",
        "Cookie",
        "a=1",
      ],
      ctx,
    ),
  );
  for (const gone of [
    "connection",
    "x-secret-hop",
    "keep-alive",
    "transfer-encoding",
    "te",
    "upgrade",
    "expect",
    "proxy-authorization",
  ]) {
    assert.equal(out.has(gone), false, `${gone} is not forwarded`);
  }
  assert.deepEqual(out.get("host"), ["shop.example.com"]);
  assert.deepEqual(out.get("x-forwarded-for"), ["203.0.113.1, 198.51.100.2, 192.0.2.9"]);
  assert.deepEqual(out.get("x-forwarded-proto"), ["http"]);
  assert.deepEqual(out.get("x-forwarded-host"), ["shop.example.com"]);
  assert.deepEqual(
    out.get("x-request-id"),
    ["rid-1"],
    "the proxy's id replaces the raw header (the caller keeps a sane one)",
  );
  assert.deepEqual(out.get("accept"), ["text/html"]);
  assert.deepEqual(out.get("cookie"), ["a=1"]);
});

test("upstream headers: a gateway's X-Forwarded-Proto/Host are kept; HTTP/2 pseudo-headers become host", () => {
  const out = toMap(
    upstreamHeaders(
      [
        ":method",
        "GET",
        ":authority",
        "h2.example.com",
        ":path",
        "/",
        "x-forwarded-proto",
        "https",
        "x-forwarded-host",
        "www.example.com",
      ],
      {
        ...ctx,
        host: "h2.example.com",
      },
    ),
  );
  assert.equal(
    [...out.keys()].some((k) => k.startsWith(":")),
    false,
  );
  assert.deepEqual(out.get("host"), ["h2.example.com"]);
  assert.deepEqual(out.get("x-forwarded-proto"), ["https"]);
  assert.deepEqual(out.get("x-forwarded-host"), ["www.example.com"]);
});

test("upstream headers never carry a hop-by-hop header, whatever the client sends", () => {
  const names = fc.constantFrom(
    "Connection",
    "connection",
    "Keep-Alive",
    "Transfer-Encoding",
    "Upgrade",
    "TE",
    "Expect",
    "X-A",
    "x-b",
    "Host",
    "X-Forwarded-For",
  );
  fc.assert(
    fc.property(fc.array(fc.tuple(names, fc.string({ maxLength: 20 })), { maxLength: 20 }), (pairs) => {
      const out = toMap(upstreamHeaders(pairs.flat(), ctx));
      for (const k of ["connection", "keep-alive", "transfer-encoding", "upgrade", "te", "expect"])
        assert.equal(out.has(k), false);
      assert.equal(out.get("x-request-id")?.length, 1);
      assert.equal(out.get("x-forwarded-for")?.length, 1);
      assert.ok((out.get("host")?.length ?? 0) <= 1, "one Host");
    }),
  );
});

test("downstream headers: hop-by-hop dropped, request id added unless the app set one", () => {
  const out = downstreamHeaders(
    {
      connection: "close, x-hop",
      "x-hop": "1",
      "keep-alive": "timeout=5",
      "transfer-encoding": "chunked",
      "content-type": "text/plain",
      "set-cookie": ["a=1", "b=2"],
    },
    "rid",
  );
  assert.deepEqual(out, { "content-type": "text/plain", "set-cookie": ["a=1", "b=2"], "x-request-id": "rid" });
  assert.equal(downstreamHeaders({ "x-request-id": "app" }, "rid")["x-request-id"], "app");
});

test("request ids, hosts, bodies and idempotent methods", () => {
  assert.ok(isSaneRequestId("0f1e-2d3c_4b.5a:6/7+8=9@"));
  for (const bad of [undefined, "", "a b", "x".repeat(129), "a\u0000b", "é"])
    assert.equal(isSaneRequestId(bad), false, String(bad));
  for (const good of ["example.com", "example.com:8040", "10.0.0.1", "[fd00::1]:80", "xn--bcher-kva.example"])
    assert.ok(isValidHost(good), good);
  for (const bad of ["", "a b", "user@host", "exa/mple", "host:port", "x".repeat(256), "[::1"])
    assert.equal(isValidHost(bad), false, bad);
  assert.ok(http1HasNoBody({}));
  assert.ok(http1HasNoBody({ "content-length": "0" }));
  assert.equal(http1HasNoBody({ "content-length": "3" }), false);
  assert.equal(http1HasNoBody({ "transfer-encoding": "chunked" }), false);
  for (const m of ["GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"]) assert.ok(isIdempotent(m));
  for (const m of ["POST", "PATCH", "CONNECT"]) assert.equal(isIdempotent(m), false);
});

test("upstream errors are classified by code; each answer names its cause", () => {
  const e = (code: string, cause?: string) =>
    Object.assign(new Error(code), { code, ...(cause ? { cause: { code: cause } } : {}) });
  assert.equal(classifyUpstreamError(e("ECONNREFUSED")), "connect");
  assert.equal(classifyUpstreamError(e("UND_ERR_CONNECT_TIMEOUT")), "connect");
  assert.equal(classifyUpstreamError(e("UND_ERR_SOCKET", "ECONNREFUSED")), "connect");
  assert.equal(classifyUpstreamError(e("ECONNRESET")), "reset");
  assert.equal(classifyUpstreamError(e("UND_ERR_SOCKET")), "reset");
  assert.equal(classifyUpstreamError(e("UND_ERR_HEADERS_TIMEOUT")), "timeout");
  assert.equal(classifyUpstreamError(e("UND_ERR_ABORTED")), "client");
  assert.equal(classifyUpstreamError(e("KRANE_INSTANCE_GONE")), "gone");
  assert.equal(classifyUpstreamError(e("ECONNRESET", "KRANE_INSTANCE_GONE")), "gone");
  assert.equal(classifyUpstreamError(new Error("?")), "other");
  assert.equal(classifyUpstreamError("string"), "other");
  assert.deepEqual(
    [causeOf("connect"), causeOf("reset"), causeOf("timeout"), causeOf("gone")],
    ["all-instances-failing", "upstream-reset", "upstream-timeout", "instance-gone"],
  );
  assert.equal(errorAnswer("instance-gone").status, 502);
  assert.equal(countsAgainstInstance("gone"), false, "it left the table: nothing to eject");
  assert.equal(errorAnswer("no-instance").status, 503);
  assert.equal(errorAnswer("all-instances-failing").status, 502);
  assert.equal(errorAnswer("upstream-timeout").status, 504);
  assert.match(errorAnswer("no-instance").body, /no running instance/);
  assert.ok(countsAgainstInstance("connect") && countsAgainstInstance("reset"));
  assert.equal(countsAgainstInstance("timeout"), false, "a slow app is not a dead instance");
});

test("settings: flags beat environment beat defaults; each bad field is named", () => {
  const { settings } = resolveSentinelSettings(
    { port: "9000" },
    { KRANE_ENVIRONMENT_ID: "env_a", KRANE_REGION: "eu", KRANE_SENTINEL_PORT: "9100", KRANE_SENTINEL_OPS_PORT: "9101" },
  );
  assert.equal(settings?.port, 9000);
  assert.equal(settings?.opsPort, 9101);
  assert.equal(settings?.environmentId, "env_a");
  assert.equal(settings?.upstreamTimeoutMs, 60_000);
  assert.equal(settings?.kubeconfig, undefined);
  assert.equal(
    resolveSentinelSettings({}, { KRANE_ENVIRONMENT_ID: "e", KRANE_REGION: "r", KUBERNETES_SERVICE_HOST: "10.96.0.1" })
      .settings?.kubeconfig,
    "in-cluster",
  );
  const bad = resolveSentinelSettings(
    { port: "http", podAddressMap: "10.0.0.0/8", logLevel: "loud", opsPort: "8040" },
    {},
  );
  assert.equal(bad.settings, undefined);
  for (const field of ["environmentId", "region", "port", "podAddressMap", "logLevel"]) {
    assert.ok(
      bad.problems.some((p) => p.startsWith(field)),
      `${field} named in ${bad.problems.join(" | ")}`,
    );
  }
  assert.ok(
    resolveSentinelSettings({ environmentId: "e", region: "r", opsPort: "8040" }, {}).problems.some((p) =>
      p.includes("differ"),
    ),
  );
});

test("protocol sniffing: the HTTP/2 preface, anything else, and not yet decidable", () => {
  const preface = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  assert.equal(sniffProtocol(preface), "h2");
  assert.equal(sniffProtocol(Buffer.concat([preface, Buffer.from([0, 0, 0])])), "h2");
  assert.equal(sniffProtocol(preface.subarray(0, 10)), undefined);
  assert.equal(sniffProtocol(Buffer.from("GET / HTTP/1.1\r\n")), "h1");
  assert.equal(sniffProtocol(Buffer.from("P")), undefined);
  assert.equal(sniffProtocol(Buffer.from("POST")), "h1");
});
