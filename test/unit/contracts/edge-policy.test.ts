// Edge policies (src/contracts/edge-policy.ts): CIDR parsing and matching, the client address
// behind trusted proxies, each kind's decisions, rate limits' form, and bad input named by field.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  CidrSet,
  cidrContains,
  clientAddress,
  compileEdgePolicy,
  decideAll,
  describeEdgePolicy,
  isStateless,
  edgePolicyJson,
  parseAddress,
  parseCidr,
  parseEdgePolicies,
  PolicyFieldError,
  safePath,
  underPrefix,
  type Cidr,
  type EdgeRequest,
} from "../../../src/contracts/edge-policy.js";

function cidr(t: string): Cidr {
  const c = parseCidr(t);
  assert.notEqual(typeof c, "string", `${t}: ${String(c)}`);
  return c as Cidr;
}

function addr(t: string) {
  const a = parseAddress(t);
  assert.ok(a, t);
  return a;
}

function req(over: Partial<EdgeRequest> = {}): EdgeRequest {
  return { method: "GET", path: "/", peer: "203.0.113.7", rawHeaders: ["Host", "x"], hasBody: false, ...over };
}

function fieldOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof PolicyFieldError, String(err));
    return err.field;
  }
  assert.fail("no error");
}

describe("addresses and CIDRs", () => {
  it("parses IPv4, IPv6 and IPv4-mapped IPv6 addresses", () => {
    assert.deepEqual(parseAddress("10.1.2.3"), { v6: false, value: 0x0a010203n });
    assert.deepEqual(parseAddress("::ffff:10.1.2.3"), { v6: false, value: 0x0a010203n });
    assert.deepEqual(parseAddress("2001:db8::1"), { v6: true, value: (0x20010db8n << 96n) | 1n });
    assert.deepEqual(parseAddress("[::1]"), { v6: true, value: 1n });
    assert.equal(parseAddress("fe80::1%eth0"), undefined);
    assert.equal(parseAddress("10.0.0"), undefined);
    assert.equal(parseAddress("example.com"), undefined);
  });

  it("matches CIDRs of either family, and only their own", () => {
    assert.ok(cidrContains(cidr("10.0.0.0/8"), addr("10.255.1.2")));
    assert.ok(!cidrContains(cidr("10.0.0.0/8"), addr("11.0.0.0")));
    assert.ok(cidrContains(cidr("2001:db8::/32"), addr("2001:db8:ffff::5")));
    assert.ok(!cidrContains(cidr("2001:db8::/32"), addr("2001:db9::")));
    assert.ok(cidrContains(cidr("0.0.0.0/0"), addr("1.2.3.4")));
    assert.ok(!cidrContains(cidr("0.0.0.0/0"), addr("::1")));
    assert.ok(cidrContains(cidr("192.0.2.1"), addr("192.0.2.1")));
    assert.ok(!cidrContains(cidr("192.0.2.1"), addr("192.0.2.2")));
  });

  it("refuses CIDRs with host bits, a bad length or no address", () => {
    assert.match(String(parseCidr("10.0.0.1/8")), /past its prefix/);
    assert.match(String(parseCidr("10.0.0.0/33")), /prefix length/);
    assert.match(String(parseCidr("::/129")), /prefix length/);
    assert.match(String(parseCidr("10.0.0.0/")), /prefix length/);
    assert.match(String(parseCidr("nope/8")), /not an IPv4 or IPv6/);
  });

  it("an IPv4 address is in a /n exactly when its first n bits agree (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 0, max: 32 }), (ip, bits) => {
        const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
        const net = (ip & mask) >>> 0;
        const text = (n: number) => [24, 16, 8, 0].map((s) => (n >>> s) & 255).join(".");
        const c = cidr(`${text(net)}/${bits}`);
        assert.ok(cidrContains(c, addr(text(ip))));
        if (bits > 0) assert.ok(!cidrContains(c, addr(text((ip ^ (1 << (32 - bits))) >>> 0))));
      }),
    );
  });
});

describe("the client address", () => {
  const trusted = CidrSet.of(["10.0.0.0/8"]);

  it("is the peer's unless the peer is a trusted proxy", () => {
    assert.deepEqual(clientAddress("198.51.100.9", "1.1.1.1", trusted), addr("198.51.100.9"));
    assert.deepEqual(clientAddress("10.0.0.5", "1.1.1.1", trusted), addr("1.1.1.1"));
    assert.deepEqual(clientAddress("10.0.0.5", undefined, trusted), addr("10.0.0.5"));
    assert.deepEqual(clientAddress("10.0.0.5", "1.1.1.1", CidrSet.of([])), addr("10.0.0.5"));
  });

  it("is the rightmost untrusted hop: what the client wrote itself proves nothing", () => {
    // The client sent "X-Forwarded-For: 1.1.1.1" and the proxy appended what it saw.
    assert.deepEqual(clientAddress("10.0.0.5", "1.1.1.1, 198.51.100.9", trusted), addr("198.51.100.9"));
    assert.deepEqual(clientAddress("10.0.0.5", "198.51.100.9, 10.0.0.7", trusted), addr("198.51.100.9"));
    // Garbage ends the walk at the last trusted hop.
    assert.deepEqual(clientAddress("10.0.0.5", "evil, 10.0.0.7", trusted), addr("10.0.0.7"));
  });
});

describe("ip policies", () => {
  const [ip] = parseEdgePolicies("policies", [
    { name: "office", kind: "ip", allow: ["192.0.2.0/24", "2001:db8::/32"], deny: ["192.0.2.66"] },
  ]);

  it("allows listed addresses, refuses denied and unlisted ones (403)", () => {
    assert.ok(ip && isStateless(ip));
    const p = compileEdgePolicy(ip);
    assert.equal(p.decide(req({ peer: "192.0.2.10" })), undefined);
    assert.equal(p.decide(req({ peer: "::ffff:192.0.2.10" })), undefined);
    assert.equal(p.decide(req({ peer: "2001:db8::9" })), undefined);
    assert.equal(p.decide(req({ peer: "192.0.2.66" }))?.status, 403);
    assert.equal(p.decide(req({ peer: "198.51.100.1" }))?.status, 403);
    assert.equal(p.decide(req({ peer: "2001:db9::1" }))?.status, 403);
  });

  it("a spoofed forwarding header from outside the trusted range gets no other address's allowance", () => {
    const [behind] = parseEdgePolicies("policies", [
      { name: "lb", kind: "ip", allow: ["192.0.2.0/24"], trustedProxies: ["10.0.0.0/8"] },
    ]);
    assert.ok(behind && isStateless(behind));
    const p = compileEdgePolicy(behind);
    const xff = (peer: string, v: string) => req({ peer, rawHeaders: ["X-Forwarded-For", v] });
    assert.equal(p.decide(xff("198.51.100.1", "192.0.2.10"))?.status, 403);
    assert.equal(p.decide(xff("10.1.1.1", "192.0.2.10")), undefined);
    assert.equal(p.decide(xff("10.1.1.1", "192.0.2.10, 198.51.100.1"))?.status, 403);
  });
});

describe("limits policies", () => {
  const [lim] = parseEdgePolicies("policies", [
    {
      name: "api",
      kind: "limits",
      maxBodyBytes: 10,
      maxHeaderBytes: 200,
      methods: ["GET", "POST"],
      pathPrefixes: ["/api", "/health"],
    },
  ]);
  assert.ok(lim && isStateless(lim));
  const p = compileEdgePolicy(lim);

  it("passes what fits", () => {
    assert.equal(p.decide(req({ path: "/api/books?x=1" })), undefined);
    assert.equal(p.decide(req({ path: "/health" })), undefined);
    assert.equal(
      p.decide(req({ method: "POST", path: "/api", hasBody: true, rawHeaders: ["Content-Length", "10"] })),
      undefined,
    );
  });

  it("refuses each excess with its status", () => {
    const m = p.decide(req({ method: "DELETE", path: "/api" }));
    assert.equal(m?.status, 405);
    assert.equal(m?.headers?.allow, "GET, POST");
    assert.equal(p.decide(req({ path: "/apix" }))?.status, 404);
    assert.equal(p.decide(req({ path: "/admin" }))?.status, 404);
    assert.equal(p.decide(req({ path: "/api/../admin" }))?.status, 400);
    assert.equal(p.decide(req({ path: "/api/%2e%2e/admin" }))?.status, 400);
    assert.equal(p.decide(req({ path: "/api/a%2fb" }))?.status, 400);
    assert.equal(p.decide(req({ path: "/api", rawHeaders: ["X-Big", "a".repeat(300)] }))?.status, 431);
    const body = (cl: string | undefined) =>
      p.decide(
        req({
          method: "POST",
          path: "/api",
          hasBody: true,
          rawHeaders: cl === undefined ? [] : ["content-length", cl],
        }),
      );
    assert.equal(body("11")?.status, 413);
    assert.equal(body(undefined)?.status, 411);
  });

  it("prefixes match segment by segment", () => {
    assert.ok(underPrefix("/api", "/api"));
    assert.ok(underPrefix("/api/x", "/api/"));
    assert.ok(!underPrefix("/apix", "/api"));
    assert.ok(underPrefix("/anything", "/"));
    assert.equal(safePath("/a/%zz"), undefined);
  });
});

describe("the list", () => {
  it("the first refusal answers, in order", () => {
    const list = parseEdgePolicies("policies", [
      { name: "a", kind: "limits", methods: ["GET"] },
      { name: "b", kind: "ip", deny: ["203.0.113.0/24"] },
    ])
      .filter(isStateless)
      .map(compileEdgePolicy);
    assert.deepEqual(decideAll(list, req({ peer: "198.51.100.1" })), { passed: 2, refusal: undefined });
    const both = decideAll(list, req({ method: "PUT" }));
    assert.equal(both.passed, 0);
    assert.equal(both.refusal?.policy, "a");
    assert.equal(decideAll(list, req()).refusal?.policy, "b");
  });

  it("bad input is refused naming the field", () => {
    const bad = (v: unknown) => fieldOf(() => parseEdgePolicies("policies", v));
    assert.equal(bad([{ name: "x", kind: "ip", allow: ["10.0.0.0/33"] }]), "policies[0].allow[0]");
    assert.equal(bad([{ name: "x", kind: "ip", deny: ["banana"] }]), "policies[0].deny[0]");
    assert.equal(bad([{ name: "x", kind: "limits", maxBodyBytes: 0 }]), "policies[0].maxBodyBytes");
    assert.equal(bad([{ name: "x", kind: "limits", maxHeaderBytes: -5 }]), "policies[0].maxHeaderBytes");
    assert.equal(bad([{ name: "x", kind: "waf" }]), "policies[0].kind");
    assert.equal(bad([{ name: "X!", kind: "ip", deny: ["10.0.0.0/8"] }]), "policies[0].name");
    assert.equal(
      bad([
        { name: "x", kind: "ip", deny: ["10.0.0.0/8"] },
        { name: "x", kind: "ip", deny: ["10.0.0.0/8"] },
      ]),
      "policies[1].name",
    );
    assert.equal(bad([{ name: "x", kind: "limits", methods: ["get"] }]), "policies[0].methods[0]");
    assert.equal(bad([{ name: "x", kind: "limits", pathPrefixes: ["/a/../b"] }]), "policies[0].pathPrefixes[0]");
    assert.equal(bad([{ name: "x", kind: "limits" }]), "policies[0]");
    assert.equal(
      bad([{ name: "x", kind: "ip", clientHeader: "x-real-ip", deny: ["10.0.0.0/8"] }]),
      "policies[0].clientHeader",
    );
  });

  it("a policy that would lock out everything is refused", () => {
    const bad = (v: unknown) => fieldOf(() => parseEdgePolicies("policies", [v]));
    assert.equal(bad({ name: "x", kind: "ip", deny: ["0.0.0.0/0", "::/0"] }), "policies[0]");
    assert.equal(bad({ name: "x", kind: "ip", allow: ["10.0.0.0/8"], deny: ["10.0.0.0/7", "::/0"] }), "policies[0]");
    // One family closed is allowed (an IPv4-only service).
    assert.equal(parseEdgePolicies("p", [{ name: "x", kind: "ip", deny: ["::/0"] }]).length, 1);
  });
});

describe("rate limit policies", () => {
  it("parse, travel in their stored form and describe themselves", () => {
    const list = parseEdgePolicies("policies", [
      { name: "per-ip", kind: "ratelimit", key: "address", limit: 100, windowSeconds: 60 },
      { name: "per-tenant", kind: "ratelimit", key: "header", header: "x-tenant", limit: 5, windowSeconds: 1 },
      {
        name: "behind-lb",
        kind: "ratelimit",
        key: "address",
        limit: 10,
        windowSeconds: 3600,
        trustedProxies: ["10.0.0.0/8"],
      },
    ]);
    assert.deepEqual(parseEdgePolicies("again", list.map(edgePolicyJson)), list);
    assert.deepEqual(list.map(describeEdgePolicy), [
      "100 requests per 60 s per client address",
      "5 requests per 1 s per header x-tenant",
      "10 requests per 3600 s per client address (from x-forwarded-for via 10.0.0.0/8)",
    ]);
  });

  it("bad input is refused naming the field", () => {
    const bad = (v: Record<string, unknown>) =>
      fieldOf(() => parseEdgePolicies("policies", [{ name: "r", kind: "ratelimit", ...v }]));
    const ok = { key: "address", limit: 10, windowSeconds: 60 };
    assert.equal(bad({ ...ok, limit: 0 }), "policies[0].limit");
    assert.equal(bad({ ...ok, limit: -3 }), "policies[0].limit");
    assert.equal(bad({ ...ok, limit: undefined }), "policies[0].limit");
    assert.equal(bad({ ...ok, limit: 1.5 }), "policies[0].limit");
    assert.equal(bad({ ...ok, windowSeconds: 0 }), "policies[0].windowSeconds");
    assert.equal(bad({ ...ok, windowSeconds: 86_401 }), "policies[0].windowSeconds");
    assert.equal(bad({ ...ok, key: "cookie" }), "policies[0].key");
    assert.equal(bad({ ...ok, key: "header" }), "policies[0].header");
    assert.equal(bad({ ...ok, key: "header", header: "X-Tenant" }), "policies[0].header");
    assert.equal(bad({ ...ok, header: "x-tenant" }), "policies[0].header");
    assert.equal(bad({ ...ok, key: "jwt", trustedProxies: ["10.0.0.0/8"] }), "policies[0].trustedProxies");
    assert.equal(bad({ ...ok, trustedProxies: ["10.0.0.0/33"] }), "policies[0].trustedProxies[0]");
    assert.equal(bad({ ...ok, clientHeader: "x-real-ip" }), "policies[0].clientHeader");
  });
});
