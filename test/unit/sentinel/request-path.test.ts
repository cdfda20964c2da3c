// The runtime-neutral request path (src/sentinel/request-path.ts) on its own: what is refused at
// admission and how, which failed attempts are tried again elsewhere, and what is counted.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Registry } from "prom-client";
import { silentLogger } from "../../../src/base/log.js";
import { Balancer } from "../../../src/sentinel/balancer.js";
import { createSentinelMetrics } from "../../../src/sentinel/metrics.js";
import { originPath, RequestPath, type RequestHead } from "../../../src/sentinel/request-path.js";
import type { RoutingTable } from "../../../src/sentinel/table.js";
import { SENTINEL_LIVE_PATH, SENTINEL_READY_PATH } from "../../../src/contracts/routing.js";

function table(revisions: Record<string, number>, preview?: string): RoutingTable {
  return {
    version: 1,
    mode: "instances",
    revisions: Object.entries(revisions).map(([id, n], k) => ({
      deploymentId: id,
      weight: null,
      endpoints: Array.from({ length: n }, (_, i) => {
        const address = `10.0.${k}.${i + 1}`;
        return {
          key: `${address}:8080`,
          address,
          port: 8080,
          dialHost: address,
          deploymentId: id,
          pod: `${id}-${i}`,
          protocol: "http1" as const,
        };
      }),
    })),
    ...(preview ? { preview } : {}),
  };
}

function setup(t: RoutingTable | null = table({ a: 3 })) {
  const balancer = new Balancer();
  if (t) balancer.setTable(t);
  const metrics = createSentinelMetrics(() => [], new Registry(), false);
  let ready = true;
  const path = new RequestPath({
    balancer,
    metrics,
    log: silentLogger,
    hasTable: () => t !== null,
    isReady: () => ready,
  });
  return { path, balancer, metrics, setReady: (r: boolean) => (ready = r) };
}

function head(over: Partial<RequestHead> = {}): RequestHead {
  return {
    method: "GET",
    target: "/p?q=1",
    host: "shop.example.com",
    hostRequired: true,
    rawHeaders: ["host", "shop.example.com", "x-forwarded-for", "203.0.113.7"],
    clientAddress: "127.0.0.1",
    hasBody: false,
    requestId: undefined,
    preview: undefined,
    authorization: undefined,
    ...over,
  };
}

const refused = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
const reset = Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
const gone = Object.assign(new Error("left the routing table"), { code: "KRANE_INSTANCE_GONE" });

test("admission: Host, request-target and the routing table decide the sentinel's own answers", () => {
  const { path, metrics } = setup();
  const noHost = path.begin(head({ host: undefined }));
  assert.equal(noHost.refused?.status, 400);
  assert.equal(noHost.refused?.headers["x-krane-sentinel-error"], "invalid-host");
  assert.equal(noHost.refused?.closeConnection, true);
  const accepted = (h: Partial<RequestHead>): string => {
    const trip = path.begin(head(h));
    assert.equal(trip.refused, undefined);
    trip.finish("2xx");
    return trip.path;
  };
  accepted({ host: undefined, hostRequired: false }); // HTTP/1.0 may omit Host
  assert.equal(path.begin(head({ host: "bad host" })).refused?.status, 400);
  assert.equal(path.begin(head({ target: "*" })).refused?.headers["x-krane-sentinel-error"], "bad-request");
  assert.equal(accepted({ target: "http://other.example/x?y" }), "/x?y", "absolute-form");
  assert.equal(accepted({ target: "http://other.example" }), "/");
  assert.equal(setup(null).path.begin(head()).refused?.status, 503);
  assert.equal(path.inFlight, 0, "every refusal is finished");
  assert.equal(metrics.stats.count("none", "4xx"), 3);
  assert.equal(originPath("/a"), "/a");
  assert.equal(originPath("example.com:443"), undefined);
});

test("admission: the request id is kept when sane, forwarding headers are set", () => {
  const { path } = setup();
  const kept = path.begin(head({ requestId: "trace-1" }));
  assert.equal(kept.requestId, "trace-1");
  assert.match(path.begin(head({ requestId: "bad id" })).requestId, /^[0-9a-f-]{36}$/);
  const h = kept.headers;
  const get = (n: string): string | undefined => h[h.indexOf(n) + 1];
  assert.equal(get("x-forwarded-for"), "203.0.113.7, 127.0.0.1");
  assert.equal(get("x-request-id"), "trace-1");
  assert.equal(get("x-forwarded-host"), "shop.example.com");
});

test("probe paths answer on the proxy port", () => {
  const { path, setReady } = setup();
  assert.equal(path.probe(SENTINEL_LIVE_PATH)?.status, 200);
  setReady(false);
  assert.equal(path.probe(SENTINEL_READY_PATH)?.status, 503);
  assert.equal(path.probe("/other"), undefined);
});

test("a failed connect is tried once elsewhere, then answered 502; both count against the instances", () => {
  const { path, metrics } = setup();
  const trip = path.begin(head());
  const first = trip.next();
  assert.ok(first);
  assert.equal(first.outstanding, 1);
  assert.equal(trip.failed(refused, false), "retry");
  assert.equal(first.outstanding, 0);
  const second = trip.next();
  assert.notEqual(second?.key, first.key, "another instance");
  assert.deepEqual(trip.failed(refused, false), { cause: "all-instances-failing", closeConnection: false });
  const a = trip.answer("all-instances-failing");
  assert.equal(a.status, 502);
  assert.equal(path.inFlight, 0);
  assert.equal(metrics.stats.count("a", "5xx"), 1);
});

test("which failures are tried again: a failed connect for any method whose body was not read; a reset or a gone instance only for idempotent requests without a body", () => {
  const { path } = setup();
  const attempt = (h: Partial<RequestHead>, err: Error, bodyRead: boolean): unknown => {
    const trip = path.begin(head(h));
    trip.next();
    const r = trip.failed(err, bodyRead);
    trip.finish("aborted");
    return r === "retry" ? "retry" : r.cause;
  };
  // A refused connection delivered nothing: any method, as long as the body can still be sent whole.
  assert.equal(attempt({ method: "POST" }, refused, false), "retry");
  assert.equal(attempt({ method: "POST", hasBody: true }, refused, false), "retry");
  assert.equal(attempt({ method: "PATCH", hasBody: true }, refused, false), "retry");
  assert.equal(attempt({ method: "PUT", hasBody: true }, refused, false), "retry");
  assert.equal(attempt({ method: "POST", hasBody: true }, refused, true), "all-instances-failing");
  assert.equal(attempt({ method: "PUT", hasBody: true }, refused, true), "all-instances-failing");
  // A reset or a gone instance: the request may have arrived.
  assert.equal(attempt({ method: "GET" }, reset, false), "retry");
  assert.equal(attempt({ method: "PUT", hasBody: true }, reset, false), "upstream-reset");
  assert.equal(attempt({ method: "POST" }, reset, false), "upstream-reset");
  assert.equal(attempt({ method: "GET" }, gone, false), "retry");
  assert.equal(attempt({ method: "DELETE" }, gone, false), "retry");
  assert.equal(attempt({ method: "POST" }, gone, false), "instance-gone");
  assert.equal(attempt({ method: "PUT", hasBody: true }, gone, false), "instance-gone");
  assert.equal(
    attempt({}, Object.assign(new Error("t"), { code: "UND_ERR_HEADERS_TIMEOUT" }), false),
    "upstream-timeout",
  );
  assert.equal(path.inFlight, 0);
});

test("the preview header keeps retries on the preview revision; a failed connect ejects", () => {
  const { path, balancer } = setup(table({ blue: 2, green: 2 }, "green"));
  const trip = path.begin(head({ preview: "1" }));
  const inst = trip.next();
  assert.equal(inst?.endpoint.deploymentId, "green");
  trip.failed(refused, false);
  assert.equal(balancer.isEjected(inst ?? assert.fail()), true);
  const retry = trip.next();
  assert.equal(retry?.endpoint.deploymentId, "green");
  assert.notEqual(retry?.key, inst.key);
  trip.succeeded();
  trip.finish("2xx");
  // Without the header, traffic is spread over both revisions by instance ("instances" mode),
  // and the ejected instance gets none of it.
  const again = path.begin(head());
  const other = again.next();
  assert.ok(other);
  assert.notEqual(other.key, inst.key);
  again.succeeded();
  again.finish("2xx");
  assert.equal(path.inFlight, 0);
});
