// Exposure in ctrl, the pure parts: domain and path validation, hostname generation, prefix
// overlap (segment-wise), the domain check schedule, and the routes/edge auth built from rows.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { DEFAULT_DOMAIN_CHECKS, NEVER, nextCheck, lookUp } from "../../../src/ctrl/domain/domains.js";
import {
  checkExposureSettings,
  DEFAULT_EXPOSURE,
  disambiguated,
  hostLabel,
  isPlatformHostname,
} from "../../../src/ctrl/domain/exposure.js";
import { edgeAuthPolicy, exposureRoutes, gatewayK8sName } from "../../../src/ctrl/payloads/gateway.js";
import type { DomainRow, EndpointRow } from "../../../src/ctrl/db/schema.js";
import { domainName, pathPrefix, prefixesOverlap } from "../../../src/ctrl/validate/exposure.js";
import { addressReadiness } from "../../../src/ctrl/api/exposure.js";
import { isDnsLabel } from "../../../src/contracts/labels.js";

describe("validation", () => {
  it("domains: lowercased, trailing dot dropped, punycode accepted, Unicode, wildcards and bad labels refused", () => {
    assert.equal(domainName("h", "WWW.Example.COM."), "www.example.com");
    assert.equal(domainName("h", "xn--bcher-kva.example"), "xn--bcher-kva.example");
    assert.throws(() => domainName("h", "bücher.example"), /give the internationalized name as xn--bcher-kva\.example/);
    assert.throws(() => domainName("h", "*.example.com"), /wildcard/);
    assert.throws(() => domainName("h", "-a.example.com"), /RFC 1123/);
    assert.throws(() => domainName("h", `${"a".repeat(64)}.example.com`), /RFC 1123/);
    assert.throws(() => domainName("h", "xn--zz--.example"), /internationalized|RFC 1123/);
  });

  it("path prefixes and their overlap, segment-wise like Gateway API's PathPrefix", () => {
    assert.equal(pathPrefix("p", "/shop/prod"), "/shop/prod");
    for (const bad of ["shop", "/", "/a//b", "/a/", "/a/..", "/a b"])
      assert.throws(() => pathPrefix("p", bad), /^Error: p:|p:/);
    assert.equal(prefixesOverlap("/shop", "/shop/prod"), true);
    assert.equal(prefixesOverlap("/shop/prod", "/shop/production"), false);
    assert.equal(prefixesOverlap("/a", "/b"), false);
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom("a", "b", "c"), { minLength: 1, maxLength: 4 }),
        fc.array(fc.constantFrom("a", "b", "c"), { minLength: 1, maxLength: 4 }),
        (x, y) => {
          const a = `/${x.join("/")}`;
          const b = `/${y.join("/")}`;
          assert.equal(prefixesOverlap(a, b), prefixesOverlap(b, a));
          // Overlap means one is a segment prefix of the other.
          const shorter = x.length <= y.length ? x : y;
          const longer = x.length <= y.length ? y : x;
          assert.equal(
            prefixesOverlap(a, b),
            shorter.every((s, i) => longer[i] === s),
          );
        },
      ),
    );
  });
});

describe("hostnames", () => {
  it("fill the pattern, stay one DNS label when cut, and can be made unique", () => {
    assert.equal(
      hostLabel("{env}-{project}-{workspace}", { env: "prod", project: "shop", workspace: "acme" }, "env_1"),
      "prod-shop-acme",
    );
    fc.assert(
      fc.property(
        fc.stringMatching(/^[a-z][a-z0-9-]{0,38}[a-z0-9]$/),
        fc.stringMatching(/^[a-z][a-z0-9-]{0,38}[a-z0-9]$/),
        fc.stringMatching(/^[a-z][a-z0-9-]{0,38}[a-z0-9]$/),
        (env, project, workspace) => {
          const l = hostLabel("{env}-{project}-{workspace}", { env, project, workspace }, "env_x");
          assert.ok(isDnsLabel(l), l);
          assert.ok(isDnsLabel(disambiguated(l, "env_y")));
          assert.notEqual(disambiguated(l, "env_y"), l);
        },
      ),
    );
    assert.equal(isPlatformHostname(DEFAULT_EXPOSURE, "a.krane.localhost"), true);
    assert.equal(isPlatformHostname(DEFAULT_EXPOSURE, "krane.localhost.evil.com"), false);
    assert.throws(
      () => checkExposureSettings({ ...DEFAULT_EXPOSURE, hostPattern: "{env}.{project}" }),
      /one DNS label/,
    );
    assert.throws(
      () => checkExposureSettings({ ...DEFAULT_EXPOSURE, publicApex: "Apps.Example" }),
      /lowercase DNS name/,
    );
    assert.ok(isDnsLabel(gatewayK8sName("a".repeat(40), "b".repeat(40), "env_1")));
  });
});

describe("domain checks", () => {
  const base = { state: "pending", created_at: 0, verified_at: null, lost_since: null, last_checked_at: null } as const;
  const p = DEFAULT_DOMAIN_CHECKS;

  it("pending claims are checked often, then less, and fail after the timeout", () => {
    const first = nextCheck(base, { ok: false, error: "x" }, 1_000, p);
    assert.equal(first.state, "pending");
    assert.equal(first.nextCheckAt - 1_000, p.pendingFirstMs);
    const later = nextCheck(base, { ok: false, error: "x" }, 3600_000, p);
    assert.equal(later.nextCheckAt - 3600_000, p.pendingMaxMs);
    const failed = nextCheck(base, { ok: false, error: "x" }, p.pendingTimeoutMs, p);
    assert.deepEqual([failed.state, failed.nextCheckAt], ["failed", NEVER]);
    const ok = nextCheck(base, { ok: true }, 5, p);
    assert.deepEqual([ok.state, ok.verifiedAt, ok.nextCheckAt], ["verified", 5, 5 + p.verifiedIntervalMs]);
  });

  it("a verified domain whose record is lost stays routed through the grace period, then fails", () => {
    const v = { ...base, state: "verified", verified_at: 10 } as const;
    const lost = nextCheck(v, { ok: false, error: "gone" }, 100, p);
    assert.deepEqual([lost.state, lost.lostSince, lost.nextCheckAt - 100], ["verified", 100, p.lostIntervalMs]);
    const still = nextCheck({ ...v, lost_since: 100 }, { ok: false, error: "gone" }, 100 + p.lostGraceMs - 1, p);
    assert.equal(still.state, "verified");
    const gone = nextCheck({ ...v, lost_since: 100 }, { ok: false, error: "gone" }, 100 + p.lostGraceMs, p);
    assert.equal(gone.state, "failed");
    const back = nextCheck({ ...v, lost_since: 100 }, { ok: true }, 200, p);
    assert.deepEqual([back.state, back.lostSince, back.verifiedAt], ["verified", null, 10]);
  });

  it("lookUp joins TXT chunks and says what is wrong", async () => {
    const resolver = (records: string[][] | Error) => ({
      resolveTxt: async () => (records instanceof Error ? Promise.reject(records) : records),
    });
    assert.deepEqual(await lookUp(resolver([["krane-domain-verify=", "tok"]]), "a.example", "tok"), { ok: true });
    assert.match(
      (await lookUp(resolver([["krane-domain-verify=other"]]), "a.example", "tok")).ok ? "" : "does not hold",
      /does not hold/,
    );
    const nodata = Object.assign(new Error("x"), { code: "ENODATA" });
    assert.deepEqual(await lookUp(resolver(nodata), "a.example", "tok"), {
      ok: false,
      error: "no TXT record at _krane-challenge.a.example",
    });
    const timeout = Object.assign(new Error("x"), { code: "ETIMEOUT" });
    assert.match(((await lookUp(resolver(timeout), "a.example", "tok")) as { error: string }).error, /ETIMEOUT/);
  });
});

describe("routes from rows", () => {
  const endpoint = (visibility: string, hostname: string, auth: object | null): EndpointRow => ({
    id: `ept_${visibility}`,
    environment_id: "env_1",
    workspace_id: "ws_1",
    project_id: "prj_1",
    visibility,
    hostname,
    path_prefix: "/",
    auth: auth ? JSON.stringify(auth) : null,
    created_at: 0,
    updated_at: 0,
  });
  const domain = (hostname: string, state: string): DomainRow => ({
    id: `dom_${hostname}`,
    environment_id: "env_1",
    workspace_id: "ws_1",
    project_id: "prj_1",
    hostname,
    token: "t",
    state,
    last_error: null,
    last_checked_at: null,
    verified_at: null,
    lost_since: null,
    next_check_at: 0,
    created_at: 0,
  });
  const auth = {
    jwksUrl: "https://idp/jwks",
    issuer: "",
    audiences: [],
    operations: [{ method: "GET", path: "/x", scopes: ["s"] }],
    defaultAction: "deny",
  };

  it("verified domains only, taking the public endpoint's auth; the edge policy denies unknown hosts once a token is needed", () => {
    const routes = exposureRoutes(
      [endpoint("public", "p.apps", auth), endpoint("organization", "o.internal", null)],
      [domain("b.example", "verified"), domain("a.example", "pending")],
    );
    assert.deepEqual(
      routes.map((r) => [
        r.name.startsWith("domain-") ? "domain" : r.name,
        r.hostnames[0],
        r.certificate,
        r.auth.jwt !== null,
      ]),
      [
        ["domain", "b.example", true, true],
        ["organization", "o.internal", false, false],
        ["public", "p.apps", false, true],
      ],
    );
    assert.equal(edgeAuthPolicy(routes)?.unmatchedHosts, "deny");
    assert.equal(edgeAuthPolicy(exposureRoutes([endpoint("public", "p.apps", null)], [])), null);
  });
});

describe("address readiness", () => {
  const ok = { status: "True", reason: "", message: "" };
  const route = (listener: { status: string; reason: string; message: string } | null | undefined) => ({
    name: "domain-1",
    visibility: "public",
    gateway: "platform/external",
    accepted: ok,
    resolvedRefs: ok,
    certificates: [
      { hostname: "www.shop.example", secretName: "s", ready: ok, ...(listener === undefined ? {} : { listener }) },
    ],
    problem: "",
  });

  it("a domain whose certificate is issued is ready only once its HTTPS listener is programmed", () => {
    assert.deepEqual(addressReadiness(route(ok), null), { readiness: "ready", message: "" });
    assert.deepEqual(addressReadiness(route({ status: "", reason: "", message: "" }), null), {
      readiness: "pending",
      message: "HTTPS listener for www.shop.example: not programmed by the Gateway yet",
    });
    assert.deepEqual(
      addressReadiness(
        route({ status: "False", reason: "InvalidCertificateRef", message: "secret s not found" }),
        null,
      ),
      {
        readiness: "pending",
        message: "HTTPS listener for www.shop.example: InvalidCertificateRef: secret s not found",
      },
    );
    assert.equal(
      addressReadiness(route({ status: "False", reason: "NoListener", message: "x" }), null).readiness,
      "rejected",
    );
    // An agent serving no HTTPS reports no listener (null), and reports stored before listeners
    // were reported have none: the certificate decides, as before.
    assert.equal(addressReadiness(route(null), null).readiness, "ready");
    assert.equal(addressReadiness(route(undefined), null).readiness, "ready");
  });
});
