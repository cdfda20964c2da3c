// The dashboard's sign-in, as an attacker would try it: a token traded for an HttpOnly,
// SameSite=Strict cookie; calls with the cookie only from ctrl's own origin; forged, expired,
// signed-out and revoked sessions refused; the token never echoed. Real ctrl, real HTTP/1.1.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import * as https from "node:https";
import { after, before, describe, it } from "node:test";
import { join } from "node:path";
import { ApiTokenService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const LIST = "/krane.ctrl.v1.WorkspaceService/ListWorkspaces";
const CREATE = "/krane.ctrl.v1.WorkspaceService/CreateWorkspace";

describe("dashboard sessions", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  let origin: string;
  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { dashboard: { sessionTtlMs: 60_000 } });
    origin = ctrl.url;
  });
  after(async () => {
    await ctrl.close();
    dir.remove();
  });

  async function signIn(token: string, headers: Record<string, string> = { origin }): Promise<Response> {
    return fetch(`${ctrl.url}/dashboard/session`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify({ token }),
    });
  }

  function cookieOf(res: Response): string {
    const set = res.headers.get("set-cookie") ?? "";
    return set.split(";", 1)[0] ?? "";
  }

  async function call(path: string, cookie: string, headers: Record<string, string> = { origin }, body = "{}") {
    return fetch(`${ctrl.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", cookie, ...headers },
      body,
    });
  }

  it("trades a token for an HttpOnly, SameSite=Strict cookie that the API then accepts", async () => {
    const res = await signIn(ctrl.adminToken);
    assert.equal(res.status, 200);
    const set = res.headers.get("set-cookie") ?? "";
    assert.match(set, /^krane_session=[A-Za-z0-9_-]{40,}; /);
    assert.match(set, /; HttpOnly/);
    assert.match(set, /; SameSite=Strict/);
    assert.match(set, /; Path=\//);
    assert.match(set, /; Max-Age=60/);
    assert.doesNotMatch(set, /Secure/, "plain http: a Secure cookie would never come back");
    const text = await res.text();
    assert.ok(!text.includes(ctrl.adminToken) && !set.includes(ctrl.adminToken), "the token is never echoed");
    assert.equal((JSON.parse(text) as { name: string }).name, "admin");
    const cookie = cookieOf(res);
    const created = await call(CREATE, cookie, { origin }, '{"slug":"from-browser"}');
    assert.equal(created.status, 200, await created.clone().text());
    const who = await fetch(`${ctrl.url}/dashboard/session`, { headers: { cookie } });
    assert.deepEqual(await who.json(), { name: "admin", workspace: null, role: null, member: null });
  });

  it("refuses a cross-site sign-in and sets no cookie", async () => {
    for (const headers of [
      { origin: "http://evil.example" },
      { origin, "sec-fetch-site": "cross-site" },
      { origin, "sec-fetch-site": "same-site" },
      {} as Record<string, string>,
    ]) {
      const res = await signIn(ctrl.adminToken, headers);
      assert.equal(res.status, 403, JSON.stringify(headers));
      assert.equal(res.headers.get("set-cookie"), null);
    }
  });

  it("refuses calls with the cookie that come from another site or state no origin (CSRF)", async () => {
    const cookie = cookieOf(await signIn(ctrl.adminToken));
    for (const headers of [
      { origin: "http://evil.example" },
      { origin: "null" },
      { origin, "sec-fetch-site": "cross-site" },
      {} as Record<string, string>,
    ]) {
      const res = await call(CREATE, cookie, headers, '{"slug":"csrf"}');
      assert.equal(res.status, 403, JSON.stringify(headers));
      assert.equal(((await res.json()) as { code: string }).code, "permission_denied");
    }
    const listed = (await (await call(LIST, cookie)).json()) as { workspaces?: { slug: string }[] };
    assert.ok(!(listed.workspaces ?? []).some((w) => w.slug === "csrf"), "nothing was created");
  });

  it("refuses forged, signed-out and revoked sessions, and bad tokens without saying more", async () => {
    // A forged id, and one that is not even an id.
    for (const cookie of ["krane_session=" + "A".repeat(43), "krane_session=../../etc", "krane_session="]) {
      const res = await call(LIST, cookie);
      assert.equal(res.status, 401, cookie);
    }
    for (const token of ["krane_user_nope", "", "x".repeat(600)]) {
      const res = await signIn(token);
      assert.ok(res.status === 401 || res.status === 400, `${token.slice(0, 10)}: ${res.status}`);
      const body = await res.text();
      if (token !== "") assert.ok(!body.includes(token), "the token is never echoed");
      assert.equal(res.headers.get("set-cookie"), null);
    }
    // Sign-out ends the session on the server, not only in the browser.
    const cookie = cookieOf(await signIn(ctrl.adminToken));
    assert.equal((await call(LIST, cookie)).status, 200);
    const out = await fetch(`${ctrl.url}/dashboard/session`, { method: "DELETE", headers: { cookie, origin } });
    assert.equal(out.status, 204);
    assert.match(out.headers.get("set-cookie") ?? "", /^krane_session=; .*Max-Age=0/);
    assert.equal((await call(LIST, cookie)).status, 401);
    // A revoked token's sessions end with it.
    const { token, apiToken } = await ctrl.client(ApiTokenService, ctrl.adminToken).createApiToken({ name: "ci" });
    const second = cookieOf(await signIn(token));
    assert.equal((await call(LIST, second)).status, 200);
    await ctrl.client(ApiTokenService, ctrl.adminToken).revokeApiToken({ tokenId: apiToken?.id ?? "" });
    assert.equal((await call(LIST, second)).status, 401);
  });

  it("never takes a token from the URL", async () => {
    const res = await fetch(`${ctrl.url}/dashboard/session?token=${encodeURIComponent(ctrl.adminToken)}`);
    assert.equal(res.status, 401);
    assert.equal(res.headers.get("set-cookie"), null);
  });
});

describe("dashboard session expiry", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { dashboard: { sessionTtlMs: 1_000 } });
  });
  after(async () => {
    await ctrl.close();
    dir.remove();
  });

  it("ends a session at its expiry, even one cached by the authenticator", async () => {
    const res = await fetch(`${ctrl.url}/dashboard/session`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: ctrl.url },
      body: JSON.stringify({ token: ctrl.adminToken }),
    });
    const cookie = (res.headers.get("set-cookie") ?? "").split(";", 1)[0] ?? "";
    const list = () =>
      fetch(`${ctrl.url}${LIST}`, {
        method: "POST",
        headers: { "content-type": "application/json", cookie, origin: ctrl.url },
        body: "{}",
      });
    assert.equal((await list()).status, 200);
    await new Promise((r) => setTimeout(r, 1_200));
    assert.equal((await list()).status, 401);
  });
});

describe("dashboard sessions under TLS", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  let ca: Buffer;
  before(async () => {
    const key = join(dir.path, "key.pem");
    const cert = join(dir.path, "cert.pem");
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        key,
        "-out",
        cert,
        "-days",
        "1",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=IP:127.0.0.1,DNS:localhost",
      ],
      { stdio: "ignore" },
    );
    ca = readFileSync(cert);
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { tls: { certFile: cert, keyFile: key } });
  });
  after(async () => {
    await ctrl.close();
    dir.remove();
  });

  it("sets a Secure __Host- cookie over HTTPS (HTTP/1.1 through ALPN)", async () => {
    const body = JSON.stringify({ token: ctrl.adminToken });
    const { status, setCookie } = await new Promise<{ status: number; setCookie: string }>((resolve, reject) => {
      const req = https.request(
        `${ctrl.url}/dashboard/session`,
        { method: "POST", ca, headers: { "content-type": "application/json", origin: ctrl.url } },
        (res) => {
          res.resume();
          resolve({ status: res.statusCode ?? 0, setCookie: (res.headers["set-cookie"] ?? []).join("\n") });
        },
      );
      req.on("error", reject);
      req.end(body);
    });
    assert.equal(status, 200);
    assert.match(
      setCookie,
      /^__Host-krane_session=[A-Za-z0-9_-]+; Path=\/; HttpOnly; SameSite=Strict; Max-Age=\d+; Secure$/,
    );
  });
});

describe("dashboard sign-in rate limit", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      dashboard: { signInLimit: { perAddress: { burst: 3, everyMs: 60_000 } } },
    });
  });
  after(async () => {
    await ctrl.close();
    dir.remove();
  });

  it("refuses an address past its attempts with 429 and Retry-After, before looking the token up", async () => {
    const attempt = (token: string) =>
      fetch(`${ctrl.url}/dashboard/session`, {
        method: "POST",
        headers: { "content-type": "application/json", origin: ctrl.url },
        body: JSON.stringify({ token }),
      });
    for (let i = 0; i < 3; i++) assert.equal((await attempt(`krane_user_guess${i}`)).status, 401);
    // Even the right token waits now: the limit is on attempts, not on failures.
    const limited = await attempt(ctrl.adminToken);
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers.get("retry-after")) > 0);
    assert.match(((await limited.json()) as { message: string }).message, /too many sign-in attempts/);
    assert.equal(limited.headers.get("set-cookie"), null);
  });
});
