// Sign-in through a real OpenID provider (test/support/oidc-provider.ts: the `oidc-provider`
// package on a loopback port) into ctrl's sign-in core (src/ctrl/auth/oidc.ts) and its sessions
// (src/ctrl/domain/member-sessions.ts), on a real SQLite database: an invited member gets their
// role; discovery, key rotation, and each broken answer refused with nothing made.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Authenticator } from "../../../../src/ctrl/auth/authenticator.js";
import { OidcSignIn, ProviderUnavailable, SignInRefused } from "../../../../src/ctrl/auth/oidc.js";
import { checkRedirectUri, groupRoleIn, parseGroupRole } from "../../../../src/ctrl/auth/oidc-rules.js";
import { answerSignIn } from "../../../../src/ctrl/dashboard/sign-in.js";
import { SignInLimiter } from "../../../../src/ctrl/dashboard/limiter.js";
import { Store } from "../../../../src/ctrl/db/store.js";
import { removeMember } from "../../../../src/ctrl/domain/access.js";
import { deleteMemberSession, listMemberSessions } from "../../../../src/ctrl/domain/member-sessions.js";
import { findMember, inviteMember } from "../../../../src/ctrl/domain/members.js";
import { createWorkspace } from "../../../../src/ctrl/domain/tenancy.js";
import { DomainError } from "../../../../src/ctrl/errors.js";
import {
  CLIENT_ID,
  CLIENT_SECRET,
  newSigningKey,
  TestProvider,
  type SigningKey,
} from "../../../support/oidc-provider.js";

const REDIRECT = "http://127.0.0.1:53682/callback";

describe("OpenID sign-in against a real provider", () => {
  let store: Store;
  let provider: TestProvider;
  let keyA: SigningKey;
  let oidc: OidcSignIn;

  before(async () => {
    store = await Store.open({ url: ":memory:" });
    keyA = await newSigningKey("key-a");
    provider = await TestProvider.start(
      [
        { sub: "ana-1", email: "ana@example.com", email_verified: true, name: "Ana" },
        { sub: "bo-1", email: "bo@example.com", email_verified: true, name: "Bo" },
        { sub: "eve-1", email: "cy@example.com", email_verified: false, name: "Eve" },
        { sub: "gus-1", email: "gus@example.com", email_verified: true, name: "Gus", groups: ["ops"] },
      ],
      [keyA],
    );
    await createWorkspace(store, { slug: "acme", name: "Acme" });
    await createWorkspace(store, { slug: "other", name: "Other" });
    await inviteMember(store, "acme", "ana@example.com", "developer", "installation");
    await inviteMember(store, "acme", "cy@example.com", "admin", "installation");
    await inviteMember(store, "other", "bo@example.com", "owner", "installation");
    oidc = new OidcSignIn(store, {
      issuer: provider.issuer,
      clientId: CLIENT_ID,
      clientSecret: CLIENT_SECRET,
      groupRoles: [parseGroupRole("ops=acme:viewer")],
      jwksCooldownMs: 0,
    });
  });

  after(async () => {
    await provider.stop();
    await store.close();
  });

  async function signIn(sub: string, workspace = ""): Promise<string> {
    const { authorizationUrl } = await oidc.begin({ redirectUri: REDIRECT, workspace });
    const u = new URL(authorizationUrl);
    assert.equal(u.origin, provider.issuer, "discovery gave the provider's own authorization endpoint");
    assert.equal(u.searchParams.get("code_challenge_method"), "S256");
    return provider.signIn(authorizationUrl, sub);
  }

  async function refused(p: Promise<unknown>, kind: typeof SignInRefused | typeof DomainError, text: RegExp) {
    await assert.rejects(p, (err: unknown) => {
      assert.ok(err instanceof kind, `expected ${kind.name}, got ${String(err)}`);
      assert.match(err.message, text);
      return true;
    });
  }

  it("signs an invited member in with the role they were invited with, accepting the invitation", async () => {
    const callback = await signIn("ana-1");
    assert.ok(callback.startsWith(`${REDIRECT}?`), callback);
    const done = await oidc.complete(callback, "cli");
    assert.equal(done.workspace.slug, "acme");
    assert.equal(done.member.role, "developer");
    assert.equal(done.member.subject, `${provider.issuer}#ana-1`);
    const row = await findMember(store.db, done.workspace.id, "ana@example.com");
    assert.equal(row?.subject, `${provider.issuer}#ana-1`);
    assert.notEqual(row?.joined_at, null);

    // The access token is a bearer token of that member, in that workspace only.
    const auth = new Authenticator(store, { cacheTtlMs: 0 });
    const p = await auth.authenticate(`Bearer ${done.tokens.accessToken}`);
    assert.ok(p && p.kind === "user");
    assert.equal(p.workspace?.slug, "acme");
    assert.equal(p.role, "developer");
    assert.equal(p.member?.subject, `${provider.issuer}#ana-1`);
    assert.equal(p.tokenId, done.tokens.sessionId);

    // A refresh replaces both tokens; the old ones stop working.
    const next = await oidc.refresh(done.tokens.refreshToken);
    assert.ok(next);
    assert.equal(await auth.authenticate(`Bearer ${done.tokens.accessToken}`), undefined);
    assert.equal(await oidc.refresh(done.tokens.refreshToken), undefined, "a refresh token works once");
    assert.ok(await auth.authenticate(`Bearer ${next.accessToken}`));

    // Listed, then revoked: refused at once.
    const listed = await listMemberSessions(store.db, done.workspace.id, Date.now());
    assert.deepEqual(
      listed.map((s) => [s.id, s.email, s.client]),
      [[done.tokens.sessionId, "ana@example.com", "cli"]],
    );
    await store.write((tx) => deleteMemberSession(tx, done.tokens.sessionId));
    assert.equal(await auth.authenticate(`Bearer ${next.accessToken}`), undefined);
    assert.equal(await oidc.refresh(next.refreshToken), undefined);
  });

  it("finds a returning member by their subject, and a removed member's sessions end with them", async () => {
    const done = await oidc.complete(await signIn("ana-1", "acme"), "cli");
    assert.equal(done.member.role, "developer");
    const auth = new Authenticator(store, { cacheTtlMs: 0 });
    assert.ok(await auth.authenticate(`Bearer ${done.tokens.accessToken}`));
    const { ended } = await removeMember(store, "acme", "ana@example.com", "installation");
    assert.ok(ended.tokenIds.includes(done.tokens.sessionId));
    assert.equal(await auth.authenticate(`Bearer ${done.tokens.accessToken}`), undefined);
    await inviteMember(store, "acme", "ana@example.com", "developer", "installation");
  });

  it("gives a session of the workspace it was made for only", async () => {
    await refused(oidc.complete(await signIn("bo-1", "acme"), "cli"), DomainError, /no member of workspace "acme"/);
    const done = await oidc.complete(await signIn("bo-1"), "cli");
    assert.equal(done.workspace.slug, "other");
    assert.equal(done.member.role, "owner");
  });

  it("accepts no invitation for an address the provider does not vouch for", async () => {
    await refused(oidc.complete(await signIn("eve-1"), "cli"), DomainError, /does not vouch/);
  });

  it("gives the role the provider's groups map to", async () => {
    const done = await oidc.complete(await signIn("gus-1", "acme"), "cli");
    assert.equal(done.member.role, "viewer");
    assert.equal(done.member.grantedRole, null);
  });

  it("refuses a replayed state", async () => {
    const callback = await signIn("bo-1");
    await oidc.complete(callback, "cli");
    await refused(oidc.complete(callback, "cli"), SignInRefused, /unknown, already used or expired/);
  });

  it("refuses an expired ID token, another audience and a nonce mismatch, making no session", async () => {
    const cases: [string, (c: Record<string, unknown>) => Record<string, unknown>, RegExp][] = [
      [
        "expired",
        (c) => ({ ...c, iat: Math.floor(Date.now() / 1000) - 7200, exp: Math.floor(Date.now() / 1000) - 3600 }),
        /"exp".*expiration is past/,
      ],
      ["audience", (c) => ({ ...c, aud: "someone-else" }), /"aud" \(audience\)/],
      ["nonce", (c) => ({ ...c, nonce: "not-the-one-sent" }), /"nonce" claim/],
    ];
    const ws = (await findMember(
      store.db,
      (await store.db.selectFrom("workspaces").select("id").where("slug", "=", "other").executeTakeFirstOrThrow()).id,
      "bo@example.com",
    ))!;
    for (const [name, change, text] of cases) {
      const before = (await listMemberSessions(store.db, ws.workspace_id, Date.now())).length;
      const callback = await signIn("bo-1");
      provider.rewrite(change);
      try {
        await refused(oidc.complete(callback, "cli"), SignInRefused, text);
      } finally {
        provider.tamper = null;
      }
      assert.equal((await listMemberSessions(store.db, ws.workspace_id, Date.now())).length, before, name);
    }
  });

  it("finds a key the provider rotated in, and refuses one it never published", async () => {
    const keyB = await newSigningKey("key-b");
    // The documented rotation: the new key published, then signing.
    await provider.restart([keyB, keyA]);
    const done = await oidc.complete(await signIn("bo-1"), "cli");
    assert.equal(done.member.role, "owner");

    const stranger = await newSigningKey("key-x");
    const callback = await signIn("bo-1");
    provider.rewrite((c) => c, stranger);
    try {
      await refused(oidc.complete(callback, "cli"), SignInRefused, /no applicable key found in the JSON Web Key Set/);
    } finally {
      provider.tamper = null;
    }
    // The provider's own key, kid and all, but another's signature.
    const forged = await signIn("bo-1");
    provider.rewrite((c) => c, { ...stranger, jwk: { ...stranger.jwk, kid: "key-b" } });
    try {
      await refused(oidc.complete(forged, "cli"), SignInRefused, /signature verification failed/);
    } finally {
      provider.tamper = null;
    }
  });

  it("signs in over ctrl's HTTP sign-in endpoints, and refreshes there", async () => {
    const limiter = new SignInLimiter();
    const server = createServer((req, res) => {
      void answerSignIn(req, res, (req.url ?? "").split("?")[0] ?? "", oidc, limiter);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const post = async (what: string, body: object) => {
      const res = await fetch(`${base}/auth/oidc/${what}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    try {
      const bad = await post("begin", { redirect_uri: "https://evil.example/cb", workspace: "" });
      assert.equal(bad.status, 400);
      assert.match(String(bad.body.message), /redirect_uri/);
      const begun = await post("begin", { redirect_uri: REDIRECT, workspace: "other" });
      assert.equal(begun.status, 200);
      const callback = await provider.signIn(String(begun.body.authorization_url), "bo-1");
      const done = await post("complete", { callback_url: callback });
      assert.equal(done.status, 200, JSON.stringify(done.body));
      assert.deepEqual(done.body.member, {
        email: "bo@example.com",
        role: "owner",
        subject: `${provider.issuer}#bo-1`,
      });
      assert.equal((await post("complete", { callback_url: callback })).status, 401, "the state is good once");
      const refreshed = await post("refresh", { refresh_token: done.body.refresh_token });
      assert.equal(refreshed.status, 200);
      assert.notEqual(refreshed.body.access_token, done.body.access_token);
      assert.equal((await post("refresh", { refresh_token: done.body.refresh_token })).status, 401);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("says so when the issuer does not answer its discovery", async () => {
    const dead = new OidcSignIn(store, { issuer: "http://127.0.0.1:9/", clientId: CLIENT_ID });
    await assert.rejects(dead.begin({ redirectUri: REDIRECT, workspace: "" }), ProviderUnavailable);
  });
});

describe("sign-in rules", () => {
  it("parses group mappings, naming the flag when malformed", () => {
    assert.deepEqual(parseGroupRole("eng=developer"), { group: "eng", role: "developer" });
    assert.deepEqual(parseGroupRole("ops=acme:admin"), { group: "ops", workspace: "acme", role: "admin" });
    assert.throws(() => parseGroupRole("eng=root"), /--oidc-group-role/);
    assert.throws(() => parseGroupRole("eng"), /--oidc-group-role/);
    const map = [parseGroupRole("eng=developer"), parseGroupRole("ops=acme:admin")];
    assert.equal(groupRoleIn(["eng", "ops"], "acme", map), "admin");
    assert.equal(groupRoleIn(["eng", "ops"], "other", map), "developer");
    assert.equal(groupRoleIn(["sales"], "acme", map), null);
  });

  it("takes loopback redirect URIs and the ones allowed, nothing else", () => {
    assert.equal(checkRedirectUri("http://127.0.0.1:4000/callback"), "http://127.0.0.1:4000/callback");
    assert.throws(() => checkRedirectUri("http://evil.example/callback"), /redirect_uri/);
    assert.throws(() => checkRedirectUri("https://127.0.0.1.evil.example/cb"), /redirect_uri/);
    assert.throws(() => checkRedirectUri("http://127.0.0.1:4000/cb?x=1"), /redirect_uri/);
    assert.equal(
      checkRedirectUri("https://krane.example/dashboard/oidc/callback", [
        "https://krane.example/dashboard/oidc/callback",
      ]),
      "https://krane.example/dashboard/oidc/callback",
    );
  });
});
