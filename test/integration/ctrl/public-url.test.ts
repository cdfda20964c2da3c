// ctrl on plain HTTP behind a TLS-terminating proxy, with `--public-url` (a real OpenID provider,
// test/support/oidc-provider.ts, and a real ctrl on SQLite over sockets; the test is the proxy
// and the browser): the dashboard's sign-in sends the provider the public URL's https callback,
// whatever Host and X-Forwarded-* headers a request carries (so a forged header cannot send a
// sign-in's code elsewhere), its cookies are Secure, and the answer forwarded back to ctrl
// completes the sign-in. Without a public URL the callback is the request's own http origin.
import assert from "node:assert/strict";
import { request } from "node:http";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { MemberService } from "../../../src/gen/krane/ctrl/v1/access_pb.js";
import { WorkspaceService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { CLIENT_ID, CLIENT_SECRET, newSigningKey, PUBLIC_URL, TestProvider } from "../../support/oidc-provider.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./support.js";

interface Answer {
  status: number;
  location: string;
  cookies: string[];
}

/** A GET to ctrl as the proxy forwards it: any Host and headers (fetch would not send a Host of ours). */
function get(base: string, path: string, headers: Record<string, string>): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, base), { method: "GET", headers }, (res) => {
      res.resume();
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          location: res.headers.location ?? "",
          cookies: res.headers["set-cookie"] ?? [],
        }),
      );
    });
    req.on("error", reject);
    req.end();
  });
}

/** What an attacker can put on a request that reaches ctrl. */
const FORGED = { host: "evil.example", "x-forwarded-proto": "http", "x-forwarded-host": "evil.example" };

describe("ctrl behind a TLS-terminating proxy (--public-url)", () => {
  const dir = tempDir("krane-public-url-");
  let provider: TestProvider;
  let ctrl: TestCtrl;
  let plain: TestCtrl;

  before(async () => {
    provider = await TestProvider.start(
      [{ sub: "ana-1", email: "ana@example.com", email_verified: true, name: "Ana" }],
      [await newSigningKey("key-a")],
    );
    const oidc = { issuer: provider.issuer, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET };
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { oidc, publicUrl: PUBLIC_URL });
    plain = await startTestCtrl(join(dir.path, "plain.db"), { oidc });
    await ctrl.client(WorkspaceService, ctrl.adminToken).createWorkspace({ slug: "acme" });
    await ctrl
      .client(MemberService, ctrl.adminToken)
      .inviteMember({ workspace: "acme", email: "ana@example.com", role: "developer" });
  });

  after(async () => {
    await ctrl?.close();
    await plain?.close();
    await provider?.stop();
    dir.remove();
  });

  it("sends the provider the public https callback whatever the headers say, and completes the sign-in forwarded back", async () => {
    const start = await get(ctrl.url, "/auth/oidc/dashboard?workspace=acme", FORGED);
    assert.equal(start.status, 303);
    const authorization = new URL(start.location);
    assert.equal(authorization.origin, provider.issuer);
    assert.equal(authorization.searchParams.get("redirect_uri"), `${PUBLIC_URL}/auth/oidc/callback`);
    // The browser sees https: the pending sign-in's cookie is Secure (and __Host-).
    const pending = start.cookies.find((c) => c.startsWith("__Host-krane_signin="));
    assert.ok(pending, `a __Host- cookie among ${JSON.stringify(start.cookies)}`);
    assert.match(pending, /; Secure/);

    // The provider sends the browser to the public URL; the proxy forwards it to ctrl.
    const callback = new URL(await provider.signIn(start.location, "ana-1"));
    assert.equal(callback.origin, PUBLIC_URL);
    const done = await get(ctrl.url, `${callback.pathname}${callback.search}`, {
      host: new URL(PUBLIC_URL).host,
      cookie: pending.split(";")[0] ?? "",
    });
    assert.equal(done.status, 303, JSON.stringify(done));
    assert.equal(done.location, "/");
    const session = done.cookies.find((c) => c.startsWith("__Host-krane_session="));
    assert.ok(session, `a session cookie among ${JSON.stringify(done.cookies)}`);
    assert.match(session, /; Secure/);
  });

  it("without a public URL, the callback is the request's own http origin (no forwarded header is read)", async () => {
    const start = await get(plain.url, "/auth/oidc/dashboard?workspace=acme", {
      host: new URL(plain.url).host,
      "x-forwarded-proto": "https",
      "x-forwarded-host": "evil.example",
    });
    assert.equal(start.status, 303);
    assert.equal(
      new URL(start.location).searchParams.get("redirect_uri"),
      `${new URL(plain.url).origin}/auth/oidc/callback`,
    );
    assert.ok(start.cookies.some((c) => c.startsWith("krane_signin=") && !/; Secure/.test(c)));
  });
});
