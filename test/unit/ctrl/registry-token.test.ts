// ctrl as the build registry's token issuer (src/ctrl/builds/registry-token.ts): what a scope
// request is granted — a workspace's pull identity gets pull on its own repositories and nothing
// else, whatever it asks — and the tokens verify against the JWKS `krane ctrl registry-jwks`
// prints, with the audience, issuer and access the registry checks.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { test } from "node:test";
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from "jose";
import {
  CTRL_PUSH_SUBJECT,
  grantAccess,
  parseScope,
  RegistryTokens,
  registryJwks,
  TOKEN_ISSUER,
  workspacePrefix,
} from "../../../src/ctrl/builds/registry-token.js";

const acme = workspacePrefix("acme");

test("a pull identity gets pull on its workspace's repositories", () => {
  assert.deepEqual(grantAccess(["repository:acme/shop:pull"], acme, ["pull"]), [
    { type: "repository", name: "acme/shop", actions: ["pull"] },
  ]);
  assert.deepEqual(grantAccess(["repository:acme/team/api:pull"], acme, ["pull"]), [
    { type: "repository", name: "acme/team/api", actions: ["pull"] },
  ]);
});

test("a workspace never gets another workspace's repository, nor one whose name only starts like its own", () => {
  for (const name of ["globex/shop", "acme-evil/shop", "acmex/shop", "acme", "shop"])
    assert.deepEqual(grantAccess([`repository:${name}:pull`], acme, ["pull"]), [], name);
});

test("push (and delete, *) is never granted to a pull identity; what is allowed is still granted", () => {
  assert.deepEqual(grantAccess(["repository:acme/shop:push"], acme, ["pull"]), []);
  assert.deepEqual(grantAccess(["repository:acme/shop:*"], acme, ["pull"]), []);
  assert.deepEqual(grantAccess(["repository:acme/shop:delete"], acme, ["pull"]), []);
  assert.deepEqual(grantAccess(["repository:acme/shop:pull,push,delete"], acme, ["pull"]), [
    { type: "repository", name: "acme/shop", actions: ["pull"] },
  ]);
  // Allowed both: granted in a fixed order, whatever order was asked.
  assert.deepEqual(grantAccess(["repository:acme/shop:push,pull"], acme, ["pull", "push"]), [
    { type: "repository", name: "acme/shop", actions: ["pull", "push"] },
  ]);
});

test("malformed scopes and other resource types are ignored; the rest of the request still counts", () => {
  const bad = [
    "registry:catalog:*",
    "repository(plugin):acme/shop:pull",
    "repository:acme/../globex/shop:pull",
    "repository:acme//shop:pull",
    "repository:Acme/Shop:pull",
    "repository:acme/shop",
    "repository:acme/shop:pull:extra",
    `repository:acme/${"a".repeat(260)}:pull`,
    "",
  ];
  for (const s of bad) assert.deepEqual(grantAccess([s], acme, ["pull"]), [], JSON.stringify(s));
  assert.equal(parseScope("repository:acme/..:pull"), undefined);
  // Several scopes in one parameter (space-separated), and repeats merged.
  assert.deepEqual(
    grantAccess(
      ["repository:globex/shop:pull repository:acme/shop:pull", "repository:acme/shop:pull", "registry:catalog:*"],
      acme,
      ["pull"],
    ),
    [{ type: "repository", name: "acme/shop", actions: ["pull"] }],
  );
  // No prefix: nothing (a workspace is always named).
  assert.deepEqual(grantAccess(["repository:acme/shop:pull"], "", ["pull"]), []);
});

function ecPem(curve: string): string {
  return generateKeyPairSync("ec", { namedCurve: curve })
    .privateKey.export({ type: "pkcs8", format: "pem" })
    .toString();
}

test("tokens verify against the printed JWKS with the service as audience, and carry the access granted", async () => {
  const pem = ecPem("prime256v1");
  const other = ecPem("prime256v1");
  const tokens = await RegistryTokens.fromPem(pem, "krane-build-registry");
  const access = grantAccess(["repository:acme/shop:pull"], acme, ["pull"]);
  const { token, expiresIn } = await tokens.sign("krane-pull-ws_1", access);
  assert.equal(expiresIn, 300);
  const jwks = await registryJwks([pem, other]);
  assert.equal(jwks.keys.length, 2);
  assert.equal(decodeProtectedHeader(token).kid, jwks.keys[0]?.kid);
  assert.equal(jwks.keys[0]?.d, undefined, "the JWKS holds no private part");
  const { payload } = await jwtVerify(token, createLocalJWKSet(jwks), {
    issuer: TOKEN_ISSUER,
    audience: "krane-build-registry",
    algorithms: ["ES256"],
  });
  assert.equal(payload.sub, "krane-pull-ws_1");
  assert.deepEqual(payload.access, [{ type: "repository", name: "acme/shop", actions: ["pull"] }]);
  assert.ok((payload.exp ?? 0) - (payload.iat ?? 0) === 300);
  // A JWKS of another key does not verify it.
  await assert.rejects(jwtVerify(token, createLocalJWKSet(await registryJwks([other]))));
});

test("ctrl's own push authorization: a fresh token per request, for that one repository", async () => {
  const pem = ecPem("prime256v1");
  const tokens = await RegistryTokens.fromPem(pem, "svc");
  const header = await tokens.bearerFor(CTRL_PUSH_SUBJECT, ["pull", "push"])("acme/shop");
  assert.match(header, /^Bearer /);
  const { payload } = await jwtVerify(header.slice("Bearer ".length), createLocalJWKSet(await registryJwks([pem])), {
    issuer: TOKEN_ISSUER,
    audience: "svc",
  });
  assert.equal(payload.sub, CTRL_PUSH_SUBJECT);
  assert.deepEqual(payload.access, [{ type: "repository", name: "acme/shop", actions: ["pull", "push"] }]);
});

test("a key that is not EC P-256 is refused naming the setting", async () => {
  await assert.rejects(
    RegistryTokens.fromPem(ecPem("secp384r1"), "s"),
    /build registry token key: must be an EC P-256/,
  );
  await assert.rejects(RegistryTokens.fromPem("not a key", "s"), /build registry token key: not a private key/);
  await assert.rejects(registryJwks([ecPem("secp384r1")]), /EC P-256/);
});
