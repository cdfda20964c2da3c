// The dashboard's hash routes: what each address opens, the address of each page, and the key
// the app mounts a page by (another object: another key, so a fresh page).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { ENV_TABS, envHash, formatRoute, parseRoute, routeKey, type Route } from "../../../src/dashboard/router.js";

const PROD = { workspace: "acme", project: "shop", environment: "production" };

describe("dashboard routes", () => {
  it("parses the overview, an environment's tab, and an audit chain", () => {
    for (const hash of ["", "#", "#/", "#//"]) assert.deepEqual(parseRoute(hash), { page: "overview" }, hash);
    assert.deepEqual(parseRoute("#/env/acme/shop/production"), { page: "env", env: PROD, tab: "status" });
    assert.deepEqual(parseRoute("#/env/acme/shop/production/logs"), { page: "env", env: PROD, tab: "logs" });
    assert.deepEqual(parseRoute("#/audit"), { page: "audit", chain: "" });
    assert.deepEqual(parseRoute("#/audit/acme"), { page: "audit", chain: "acme" });
    assert.deepEqual(parseRoute("#/audit/*"), { page: "audit", chain: "*" });
    assert.deepEqual(parseRoute("#/quotas"), { page: "quotas", workspace: "" });
    assert.deepEqual(parseRoute("#/quotas/acme"), { page: "quotas", workspace: "acme" });
  });

  it("decodes each part on its own: an escaped slash stays inside its name", () => {
    assert.deepEqual(parseRoute("#/env/a%2Fb/shop%20x/prod"), {
      page: "env",
      env: { workspace: "a/b", project: "shop x", environment: "prod" },
      tab: "status",
    });
  });

  it("opens an unknown tab as the status tab", () => {
    assert.deepEqual(parseRoute("#/env/acme/shop/production/nope"), { page: "env", env: PROD, tab: "status" });
  });

  it("has no page for an incomplete environment address, another page, or a malformed escape", () => {
    for (const hash of ["#/env", "#/env/acme/shop", "#/environments", "#/env/acme/shop/%E0%A4%A"])
      assert.deepEqual(parseRoute(hash), { page: "unknown" }, hash);
  });

  it("writes each page's address; without a tab an environment's is the bare one", () => {
    assert.equal(envHash(PROD), "#/env/acme/shop/production");
    assert.equal(envHash({ ...PROD, project: "a/b" }, "charts"), "#/env/acme/a%2Fb/production/charts");
    assert.equal(formatRoute({ page: "overview" }), "#/");
    assert.equal(formatRoute({ page: "unknown" }), "#/");
    assert.equal(formatRoute({ page: "audit", chain: "" }), "#/audit");
    assert.equal(formatRoute({ page: "audit", chain: "*" }), "#/audit/*");
    assert.deepEqual(
      ENV_TABS.map(([t]) => formatRoute({ page: "env", env: PROD, tab: t })),
      ENV_TABS.map(([t]) => `#/env/acme/shop/production/${t}`),
    );
  });

  it("reads back every address it writes (property)", () => {
    const name = fc.string({ minLength: 1, maxLength: 12 });
    const route: fc.Arbitrary<Route> = fc.oneof(
      fc.constant<Route>({ page: "overview" }),
      fc
        .record({
          workspace: name,
          project: name,
          environment: name,
          tab: fc.constantFrom(...ENV_TABS.map(([t]) => t)),
        })
        .map(({ tab, ...env }): Route => ({ page: "env", env, tab })),
      fc.oneof(name, fc.constant("*"), fc.constant("")).map((chain): Route => ({ page: "audit", chain })),
      fc.oneof(name, fc.constant("")).map((workspace): Route => ({ page: "quotas", workspace })),
    );
    fc.assert(fc.property(route, (r) => assert.deepEqual(parseRoute(formatRoute(r)), r)));
  });

  it("keys a page by the object it shows: a tab is the same page, another environment or chain is not", () => {
    const env = (e: typeof PROD, tab: "status" | "logs"): Route => ({ page: "env", env: e, tab });
    assert.equal(routeKey(env(PROD, "status")), routeKey(env(PROD, "logs")));
    assert.notEqual(routeKey(env(PROD, "status")), routeKey(env({ ...PROD, environment: "staging" }, "status")));
    // Names that would run together in a plain join are still apart.
    assert.notEqual(
      routeKey(env({ workspace: "a", project: "b/c", environment: "d" }, "status")),
      routeKey(env({ workspace: "a/b", project: "c", environment: "d" }, "status")),
    );
    assert.notEqual(routeKey({ page: "audit", chain: "acme" }), routeKey({ page: "audit", chain: "globex" }));
    assert.notEqual(routeKey({ page: "quotas", workspace: "acme" }), routeKey({ page: "quotas", workspace: "globex" }));
    assert.notEqual(routeKey({ page: "quotas", workspace: "acme" }), routeKey({ page: "audit", chain: "acme" }));
    assert.notEqual(routeKey({ page: "audit", chain: "" }), routeKey({ page: "audit", chain: "acme" }));
    // An unknown address shows the overview: the same page, not a fresh one.
    assert.equal(routeKey({ page: "unknown" }), routeKey({ page: "overview" }));
  });
});
