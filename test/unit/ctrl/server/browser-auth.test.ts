// The session cookie and the cross-site checks of browser calls (src/ctrl/auth/browser.ts).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { crossSiteRefusal, readCookie, sessionCookie } from "../../../../src/ctrl/auth/browser.js";

describe("session cookie", () => {
  it("reads the named cookie among others, and only ids of the expected shape", () => {
    assert.equal(readCookie("a=1; krane_session=abc_DEF-9; b=2", "krane_session"), "abc_DEF-9");
    assert.equal(readCookie("xkrane_session=abc", "krane_session"), undefined);
    assert.equal(readCookie("krane_session=a%20b", "krane_session"), undefined);
    assert.equal(readCookie("krane_session=", "krane_session"), undefined);
    assert.equal(readCookie(null, "krane_session"), undefined);
    fc.assert(
      fc.property(fc.string(), (junk) => {
        const v = readCookie(junk, "krane_session");
        return v === undefined || /^[A-Za-z0-9_-]{1,128}$/.test(v);
      }),
    );
  });

  it("is HttpOnly and SameSite=Strict always, Secure with the __Host- prefix under TLS", () => {
    assert.equal(
      sessionCookie("id", { secure: false, maxAgeMs: 3_600_000 }),
      "krane_session=id; Path=/; HttpOnly; SameSite=Strict; Max-Age=3600",
    );
    assert.equal(
      sessionCookie("id", { secure: true, maxAgeMs: 0 }),
      "__Host-krane_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0; Secure",
    );
  });
});

describe("crossSiteRefusal", () => {
  const own = "http://127.0.0.1:7070";
  it("lets the dashboard's own calls through", () => {
    assert.equal(crossSiteRefusal({ ownOrigin: own, origin: own, secFetchSite: "same-origin" }), undefined);
    assert.equal(crossSiteRefusal({ ownOrigin: own, origin: own, secFetchSite: null }), undefined);
  });
  it("refuses every other origin, a missing one, and any Sec-Fetch-Site but same-origin", () => {
    assert.match(crossSiteRefusal({ ownOrigin: own, origin: null, secFetchSite: null }) ?? "", /Origin/);
    assert.match(crossSiteRefusal({ ownOrigin: own, origin: own, secFetchSite: "same-site" }) ?? "", /same-site/);
    assert.match(crossSiteRefusal({ ownOrigin: own, origin: own, secFetchSite: "none" }) ?? "", /none/);
    fc.assert(
      fc.property(fc.webUrl(), (url) => {
        const origin = new URL(url).origin;
        return origin === own || crossSiteRefusal({ ownOrigin: own, origin, secFetchSite: null }) !== undefined;
      }),
    );
  });
});
