// The requests and policies tabs' pure part (src/dashboard/views/environment/edge-model.ts): a
// StreamRequests entry as a row (served, refused, cut short, a marker), and the request each kind
// of policy form makes (lists split on commas and spaces, numbers as typed for ctrl to judge).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { LogEntrySchema, LogMarkerKind } from "../../../src/gen/krane/ctrl/v1/logs_pb.js";
import { EMPTY_POLICY_FORM, policyRequest, requestRow } from "../../../src/dashboard/views/environment/edge-model.js";

const T = BigInt(Date.UTC(2026, 10, 30, 1, 2, 3, 456)) * 1_000_000n;

describe("requestRow", () => {
  it("names the revision and instance that answered, or the policy that refused", () => {
    const served = create(LogEntrySchema, {
      timeUnixNano: T,
      region: "eu",
      instance: "web-1",
      revision: 3n,
      entry: {
        case: "request",
        value: { method: "GET", path: "/a?x=…", status: 200, latencyMs: 12.6, client: "192.0.2.7", key: "ci" },
      },
    });
    assert.deepEqual(requestRow(served, 4), {
      n: 4,
      time: "01:02:03.456",
      region: "eu",
      method: "GET",
      status: "200",
      latency: "13 ms",
      path: "/a?x=…",
      by: "r3 web-1",
      client: "192.0.2.7",
      key: "ci",
    });
    const refused = create(LogEntrySchema, {
      timeUnixNano: T,
      region: "eu",
      entry: { case: "request", value: { method: "DELETE", path: "/a", status: 405, latencyMs: 0.25, policy: "ro" } },
    });
    assert.deepEqual([requestRow(refused, 0).by, requestRow(refused, 0).latency], ["refused by ro", "0.3 ms"]);
    const cut = create(LogEntrySchema, { timeUnixNano: T, entry: { case: "request", value: { status: 0 } } });
    assert.deepEqual([requestRow(cut, 0).status, requestRow(cut, 0).by], ["cut short", "sentinel"]);
  });

  it("an upgraded connection's close says how long it was open", () => {
    const closed = create(LogEntrySchema, {
      timeUnixNano: T,
      region: "eu",
      instance: "web-1",
      revision: 3n,
      entry: { case: "request", value: { method: "GET", path: "/chat", status: 101, latencyMs: 2, openMs: 61_000 } },
    });
    assert.equal(requestRow(closed, 0).by, "r3 web-1, closed after 61 s");
  });

  it("a marker's message goes in the path column, with its count", () => {
    const m = create(LogEntrySchema, {
      timeUnixNano: T,
      region: "eu",
      entry: { case: "marker", value: { kind: LogMarkerKind.DROPPED, dropped: 12n, message: "requests not shown" } },
    });
    assert.deepEqual([requestRow(m, 0).path, requestRow(m, 0).method], ["12 requests not shown", ""]);
  });
});

describe("policyRequest", () => {
  it("makes each kind's message from the form", () => {
    const f = { ...EMPTY_POLICY_FORM, name: " office " };
    assert.deepEqual(policyRequest({ ...f, allow: "192.0.2.0/24, 2001:db8::/32", deny: "" }), {
      name: "office",
      kind: { case: "ip", value: { allow: ["192.0.2.0/24", "2001:db8::/32"], deny: [] } },
    });
    assert.deepEqual(policyRequest({ ...f, kind: "limits", methods: "GET POST", pathPrefixes: "/api" }), {
      name: "office",
      kind: { case: "limits", value: { methods: ["GET", "POST"], pathPrefixes: ["/api"] } },
    });
    assert.deepEqual(
      policyRequest({ ...f, kind: "ratelimit", per: "header", header: "x-t", limit: "100", windowSeconds: "60" }),
      {
        name: "office",
        kind: { case: "rateLimit", value: { key: "header", header: "x-t", limit: 100n, windowSeconds: 60n } },
      },
    );
    assert.deepEqual(
      policyRequest({ ...f, kind: "ratelimit", limit: "x" }).kind,
      { case: "rateLimit", value: { key: "address", header: "", limit: 0n, windowSeconds: 60n } },
      "not a number: 0, which ctrl refuses naming the limit",
    );
    assert.deepEqual(policyRequest({ ...f, kind: "apikey" }).kind, { case: "apiKey", value: { header: "" } });
  });
});
