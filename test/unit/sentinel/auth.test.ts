// API authentication at the edge (src/sentinel/auth.ts): operation matching and path handling
// (pure), and the gate against a real JWKS served over HTTP on loopback, with tokens signed by
// jose: valid, missing, expired, wrong scope, wrong signature, wrong issuer, rotated keys, and an
// identity provider that goes down.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import fc from "fast-check";
import { exportJWK, generateKeyPair, SignJWT, type JWK, type JWTPayload } from "jose";
import type { EdgeAuthPolicy } from "../../../src/contracts/routing.js";
import { parseEdgeAuth } from "../../../src/contracts/routing.js";
import {
  EdgeAuth,
  authAnswer,
  bearerToken,
  compareSpecificity,
  compileOperation,
  hostOnly,
  matchOperation,
  pathSegments,
  scopesOf,
  type AuthDecision,
} from "../../../src/sentinel/auth.js";

const ops = (list: [string, string, string[]][]) =>
  list.map(([method, path, scopes]) => compileOperation({ method, path, scopes })).sort(compareSpecificity);

describe("operation matching", () => {
  const sorted = ops([
    ["GET", "/books/{id}", ["books:read"]],
    ["GET", "/books/featured", ["public"]],
    ["*", "/books/{id}", ["books:any"]],
    ["DELETE", "/books/{id}", ["books:delete"]],
    ["GET", "/books", ["books:list"]],
  ]);
  const m = (method: string, path: string) => matchOperation(sorted, method, pathSegments(path) ?? [])?.spec;

  it("prefers literal segments, then exact methods, whatever the order written", () => {
    assert.deepEqual(m("GET", "/books/featured")?.scopes, ["public"]);
    assert.deepEqual(m("GET", "/books/42")?.scopes, ["books:read"]);
    assert.deepEqual(m("DELETE", "/books/42")?.scopes, ["books:delete"]);
    assert.deepEqual(m("PUT", "/books/42")?.scopes, ["books:any"]);
    assert.deepEqual(m("GET", "/books")?.scopes, ["books:list"]);
    assert.equal(m("GET", "/authors"), undefined);
    assert.equal(m("GET", "/books/42/pages"), undefined);
  });

  it("matches HEAD as GET unless HEAD is listed, and ignores query, repeated and trailing slashes", () => {
    assert.deepEqual(m("HEAD", "/books"), { method: "GET", path: "/books", scopes: ["books:list"] });
    assert.deepEqual(m("GET", "//books/?q=1")?.scopes, ["books:list"]);
    assert.deepEqual(m("GET", "/%62ooks/42")?.scopes, ["books:read"]);
  });

  it("refuses paths that cannot be read unambiguously", () => {
    for (const p of ["/books/..", "/books/%2e%2e/admin", "/a%2Fb", "/a%5Cb", "/%zz", "/a/./b"])
      assert.equal(pathSegments(p), undefined, p);
  });

  it("the winner never depends on the order operations are given in (property)", () => {
    const specs: [string, string, string[]][] = [
      ["GET", "/a/{x}", ["1"]],
      ["GET", "/a/b", ["2"]],
      ["*", "/a/b", ["3"]],
      ["GET", "/{y}/b", ["4"]],
      ["POST", "/a/{x}", ["5"]],
    ];
    fc.assert(
      fc.property(
        fc.shuffledSubarray(specs, { minLength: specs.length, maxLength: specs.length }),
        fc.constantFrom("GET", "POST", "PUT"),
        fc.constantFrom("/a/b", "/a/c", "/z/b"),
        (order, method, path) => {
          const a = matchOperation(ops(order), method, pathSegments(path) ?? [])?.spec.scopes;
          const b = matchOperation(ops(specs), method, pathSegments(path) ?? [])?.spec.scopes;
          assert.deepEqual(a, b);
        },
      ),
    );
  });

  it("reads scopes from scope and scp, hosts without ports, bearer tokens", () => {
    assert.deepEqual([...scopesOf({ scope: "a b  c", scp: ["d", 1, "a"] } as JWTPayload)].sort(), ["a", "b", "c", "d"]);
    assert.deepEqual([...scopesOf({ scp: "x y" })].sort(), ["x", "y"]);
    assert.equal(hostOnly("API.Example.com:8443"), "api.example.com");
    assert.equal(hostOnly("[::1]:80"), "::1");
    assert.equal(bearerToken("Bearer abc.def-_~+/="), "abc.def-_~+/=");
    assert.equal(bearerToken("Basic abc"), undefined);
    assert.equal(bearerToken("Bearer a b"), undefined);
  });
});

describe("the edge gate against a real JWKS", () => {
  let server: Server;
  let jwksUrl = "";
  let keys: JWK[] = [];
  let up = true;
  let fetches = 0;
  type Pair = Awaited<ReturnType<typeof generateKeyPair>>;
  let k1: Pair;
  let k2: Pair;
  let stranger: Pair;

  before(async () => {
    k1 = await generateKeyPair("ES256");
    k2 = await generateKeyPair("RS256");
    stranger = await generateKeyPair("ES256");
    keys = [{ ...(await exportJWK(k1.publicKey)), kid: "k1", alg: "ES256", use: "sig" }];
    server = createServer((req, res) => {
      fetches++;
      if (!up) return void res.writeHead(503).end();
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys }));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    jwksUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  const policy = (): EdgeAuthPolicy =>
    parseEdgeAuth({
      rules: [
        {
          hosts: ["api.example.com"],
          jwt: { jwksUrl, issuer: "https://issuer.example", audiences: ["shop"] },
          operations: [
            { method: "GET", path: "/books/{id}", scopes: ["books:read"] },
            { method: "POST", path: "/books", scopes: ["books:write"] },
          ],
          defaultAction: "deny",
        },
        { hosts: ["open.example.com"], jwt: null, operations: [], defaultAction: "allow" },
      ],
      unmatchedHosts: "deny",
    });

  async function token(
    o: {
      key?: Pair;
      kid?: string;
      alg?: string;
      scope?: string;
      exp?: number | string;
      iss?: string;
      aud?: string;
    } = {},
  ): Promise<string> {
    const t = new SignJWT({ scope: o.scope ?? "books:read" })
      .setProtectedHeader({ alg: o.alg ?? "ES256", kid: o.kid ?? "k1" })
      .setIssuer(o.iss ?? "https://issuer.example")
      .setAudience(o.aud ?? "shop")
      .setIssuedAt();
    if (o.exp !== undefined) t.setExpirationTime(o.exp);
    else t.setExpirationTime("5m");
    return t.sign((o.key ?? k1).privateKey);
  }

  const run = async (
    gate: EdgeAuth,
    method: string,
    host: string,
    path: string,
    authorization?: string,
  ): Promise<AuthDecision> => gate.check(method, host, path, authorization);
  const status = (d: AuthDecision): number => (d.type === "pass" ? 200 : d.status);

  it("valid token with the scope passes; missing, expired, wrong scope, wrong signature, issuer or audience do not", async () => {
    const gate = new EdgeAuth({ cooldownMs: 0 });
    gate.setPolicy(policy());
    assert.equal(status(await run(gate, "GET", "api.example.com", "/books/1", `Bearer ${await token()}`)), 200);
    assert.equal(status(await run(gate, "GET", "API.example.com:443", "/books/1", `Bearer ${await token()}`)), 200);
    assert.equal(status(await run(gate, "GET", "api.example.com", "/books/1")), 401);
    assert.equal(
      status(
        await run(
          gate,
          "GET",
          "api.example.com",
          "/books/1",
          `Bearer ${await token({ exp: Math.floor(Date.now() / 1000) - 120 })}`,
        ),
      ),
      401,
    );
    const scope = await run(gate, "POST", "api.example.com", "/books", `Bearer ${await token()}`);
    assert.equal(status(scope), 403);
    assert.match(
      authAnswer(scope as Extract<AuthDecision, { type: "deny" }>).headers["www-authenticate"] ?? "",
      /insufficient_scope.*scope="books:write"/,
    );
    assert.equal(
      status(await run(gate, "GET", "api.example.com", "/books/1", `Bearer ${await token({ key: stranger })}`)),
      401,
      "signed by another key under a known kid",
    );
    assert.equal(
      status(
        await run(gate, "GET", "api.example.com", "/books/1", `Bearer ${await token({ iss: "https://evil.example" })}`),
      ),
      401,
    );
    assert.equal(
      status(await run(gate, "GET", "api.example.com", "/books/1", `Bearer ${await token({ aud: "other" })}`)),
      401,
    );
    assert.equal(status(await run(gate, "GET", "api.example.com", "/books/1", "Bearer not.a.jwt")), 401);
    const alg = (await token()).split(".");
    const none = `${Buffer.from(JSON.stringify({ alg: "none" })).toString("base64url")}.${alg[1]}.`;
    assert.equal(status(await run(gate, "GET", "api.example.com", "/books/1", `Bearer ${none}`)), 401, "alg none");
  });

  it("default deny for unlisted operations, open hosts pass, unknown hosts are refused, ambiguous paths are 400", async () => {
    const gate = new EdgeAuth();
    gate.setPolicy(policy());
    assert.equal(status(await run(gate, "GET", "api.example.com", "/admin", `Bearer ${await token()}`)), 403);
    assert.equal(status(await run(gate, "GET", "open.example.com", "/anything")), 200);
    assert.equal(status(await run(gate, "GET", "other.example.com", "/books/1", `Bearer ${await token()}`)), 403);
    assert.equal(status(await run(gate, "GET", "api.example.com", "/books/%2e%2e/admin")), 400);
    gate.setPolicy(undefined);
    assert.equal(status(await run(gate, "GET", "other.example.com", "/x")), 200, "no policy: nothing is checked");
  });

  it("a token only needs one signature check while it is remembered", async () => {
    const gate = new EdgeAuth();
    gate.setPolicy(policy());
    const t = `Bearer ${await token()}`;
    assert.equal(status(await run(gate, "GET", "api.example.com", "/books/1", t)), 200);
    const again = gate.check("GET", "api.example.com", "/books/2", t);
    assert.ok(!(again instanceof Promise), "answered from the verified-token cache");
    assert.equal(status(again as AuthDecision), 200);
  });

  it("keys rotated at the JWKS are accepted within the cooldown, and an issuer outage keeps the last keys", async () => {
    const gate = new EdgeAuth({ cooldownMs: 300, cacheMaxAgeMs: 1000 });
    gate.setPolicy(policy());
    assert.equal(status(await run(gate, "GET", "api.example.com", "/books/1", `Bearer ${await token()}`)), 200);
    // Rotate: k2 published, k1 withdrawn.
    keys = [{ ...(await exportJWK(k2.publicKey)), kid: "k2", alg: "RS256", use: "sig" }];
    const rotated = `Bearer ${await token({ key: k2, kid: "k2", alg: "RS256" })}`;
    await new Promise((r) => setTimeout(r, 350));
    assert.equal(
      status(await run(gate, "GET", "api.example.com", "/books/1", rotated)),
      200,
      "the new key is fetched on first sight",
    );
    assert.equal(
      status(await run(gate, "GET", "api.example.com", "/books/1", `Bearer ${await token()}`)),
      401,
      "the withdrawn key is refused once the keys were refetched",
    );
    // The identity provider goes down past the cache age: the last keys keep working.
    up = false;
    await new Promise((r) => setTimeout(r, 1100));
    const before = fetches;
    assert.equal(
      status(
        await run(
          gate,
          "GET",
          "api.example.com",
          "/books/3",
          `Bearer ${await token({ key: k2, kid: "k2", alg: "RS256", scope: "books:read x" })}`,
        ),
      ),
      200,
    );
    assert.ok(fetches > before, "a refresh was attempted (and failed)");
    up = true;
  });

  it("a remembered token signed by a key withdrawn from the JWKS is refused at the next refresh; others verify again", async () => {
    const k1Jwk = { ...(await exportJWK(k1.publicKey)), kid: "k1", alg: "ES256", use: "sig" };
    const k2Jwk = { ...(await exportJWK(k2.publicKey)), kid: "k2", alg: "RS256", use: "sig" };
    keys = [k1Jwk, k2Jwk];
    const gate = new EdgeAuth({ cacheMaxAgeMs: 400, cooldownMs: 60_000 });
    gate.setPolicy(policy());
    const old = `Bearer ${await token()}`;
    const other = `Bearer ${await token({ key: k2, kid: "k2", alg: "RS256" })}`;
    assert.equal(status(await run(gate, "GET", "api.example.com", "/books/1", old)), 200);
    assert.equal(status(await run(gate, "GET", "api.example.com", "/books/1", other)), 200);
    const cached = gate.check("GET", "api.example.com", "/books/1", old);
    assert.ok(!(cached instanceof Promise), "remembered while the key set is current");
    // k1 leaves the JWKS. Its token is remembered (60 s by default) but tied to the key set.
    keys = [k2Jwk];
    const fetchesBefore = fetches;
    await new Promise((r) => setTimeout(r, 450));
    const after = gate.check("GET", "api.example.com", "/books/1", old);
    assert.ok(after instanceof Promise, "the key set is due: the remembered token is verified again");
    assert.equal(status(await after), 401);
    assert.equal(fetches, fetchesBefore + 1, "one refetch");
    assert.equal(status(await run(gate, "GET", "api.example.com", "/books/1", other)), 200, "k2's token still passes");
    const again = gate.check("GET", "api.example.com", "/books/1", other);
    assert.ok(!(again instanceof Promise), "and is remembered against the new key set");
    assert.equal(status(await run(gate, "GET", "api.example.com", "/books/1", old)), 401, "and stays refused");
  });

  it("a flood of unknown key ids or an unreachable JWKS URL costs one fetch per cooldown; the cache stays bounded", async () => {
    keys = [{ ...(await exportJWK(k1.publicKey)), kid: "k1", alg: "ES256", use: "sig" }];
    const gate = new EdgeAuth({ cooldownMs: 60_000, verifiedMax: 8 });
    gate.setPolicy(policy());
    assert.equal(status(await run(gate, "GET", "api.example.com", "/books/1", `Bearer ${await token()}`)), 200);
    let before = fetches;
    const flood = await Promise.all(
      Array.from({ length: 100 }, async (_, i) =>
        status(
          await run(
            gate,
            "GET",
            "api.example.com",
            "/books/1",
            `Bearer ${await token({ key: stranger, kid: `x${i}` })}`,
          ),
        ),
      ),
    );
    assert.deepEqual(new Set(flood), new Set([401]));
    assert.ok(fetches - before <= 1, `at most one early refetch, not ${fetches - before}`);

    // The JWKS URL down from the start: one attempt per cooldown, every request refused meanwhile.
    up = false;
    const cold = new EdgeAuth({ cooldownMs: 60_000 });
    cold.setPolicy(policy());
    before = fetches;
    // One after another (concurrent ones would share one fetch anyway).
    const refused: number[] = [];
    for (let i = 0; i < 50; i++)
      refused.push(status(await run(cold, "GET", "api.example.com", "/books/1", `Bearer ${await token()}`)));
    up = true;
    assert.deepEqual(new Set(refused), new Set([401]));
    assert.equal(fetches - before, 1);

    // Many distinct valid tokens: the remembered ones stay within verifiedMax.
    for (let i = 0; i < 30; i++)
      assert.equal(
        status(
          await run(gate, "GET", "api.example.com", "/books/1", `Bearer ${await token({ scope: `books:read n${i}` })}`),
        ),
        200,
      );
    assert.ok(gate.verifiedCount <= 8, `remembered ${gate.verifiedCount}`);
  });

  it("the policy document's auth section is checked field by field", () => {
    assert.throws(
      () =>
        parseEdgeAuth({
          rules: [
            {
              hosts: ["a.example"],
              jwt: { jwksUrl: "http://idp.example/jwks", issuer: "", audiences: [] },
              operations: [],
              defaultAction: "deny",
            },
          ],
          unmatchedHosts: "deny",
        }),
      /jwksUrl must be https/,
    );
    assert.throws(
      () =>
        parseEdgeAuth({
          rules: [
            {
              hosts: ["a.example"],
              jwt: null,
              operations: [{ method: "GET", path: "/x", scopes: [] }],
              defaultAction: "deny",
            },
          ],
          unmatchedHosts: "deny",
        }),
      /need jwt/,
    );
    assert.throws(
      () =>
        parseEdgeAuth({
          rules: [
            {
              hosts: ["a.example"],
              jwt: { jwksUrl, issuer: "", audiences: [] },
              operations: [{ method: "GET", path: "/x", scopes: ["a b"] }],
              defaultAction: "deny",
            },
          ],
          unmatchedHosts: "deny",
        }),
      /scopes\[0\]/,
    );
    assert.throws(() => parseEdgeAuth({ rules: [], unmatchedHosts: "maybe" }), /unmatchedHosts/);
  });
});
