// Withdrawing a signing key, through a real sentinel (`krane sentinel` in a pod stand-in on the
// real local cluster) whose routing policy asks for JWTs from a real JWKS served over HTTP on
// loopback: a token the sentinel has verified and remembers is refused once its key has left
// the JWKS and the refresh interval has passed (not when the remembered entry ages out, up to
// 60 s later), tokens of the keys that stay keep passing, and a flood of tokens naming unknown
// key ids makes the sentinel fetch the JWKS at most once per cooldown.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { exportJWK, generateKeyPair, SignJWT, type JWK } from "jose";
import type { Pool } from "undici";
import { SENTINEL_NAMESPACE } from "../../../src/contracts/cluster.js";
import { formatRoutingPolicy, POLICY_KEY, type EdgeAuthPolicy } from "../../../src/contracts/routing.js";
import type { KubeClient } from "../../../src/kube/client.js";
import { resources } from "../../../src/kube/resources.js";
import { eventually, useCluster } from "../../support/cluster.js";
import {
  createAppPod,
  createSentinelPod,
  hit,
  kubeFor,
  proxyClient,
  RoutingWriter,
  routingLabels,
  prepareAppNamespace,
} from "./support.js";

const h = useCluster({ standins: true });
const ENV = "env_auth";
const HOST = "shop.example.com";
// The sentinel's JWKS refresh interval and its cooldown between early refetches (unknown keys).
const REFRESH_MS = 2_000;
const COOLDOWN_MS = 60_000;
type Pair = Awaited<ReturnType<typeof generateKeyPair>>;
let kube: KubeClient;
let jwks: Server;
let jwksUrl = "";
let published: JWK[] = [];
let fetches = 0;
let k1: Pair;
let k2: Pair;
let pool: Pool;

function sign(key: Pair, kid: string, alg: string): Promise<string> {
  return new SignJWT({ scope: "books:read" })
    .setProtectedHeader({ alg, kid })
    .setIssuer("https://issuer.example")
    .setIssuedAt()
    .setExpirationTime("10m")
    .sign(key.privateKey);
}

before(
  async () => {
    k1 = await generateKeyPair("ES256");
    k2 = await generateKeyPair("ES256");
    published = [
      { ...(await exportJWK(k1.publicKey)), kid: "k1", alg: "ES256", use: "sig" },
      { ...(await exportJWK(k2.publicKey)), kid: "k2", alg: "ES256", use: "sig" },
    ];
    jwks = createServer((_req, res) => {
      fetches++;
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: published }));
    });
    await new Promise<void>((r) => jwks.listen(0, "127.0.0.1", r));
    jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`;

    const cluster = await h.ready();
    kube = kubeFor(cluster);
    await prepareAppNamespace(cluster, kube);
    const app = await createAppPod(cluster, kube, "auth-1", "dep-a");
    const routes = new RoutingWriter(kube, ENV);
    const auth: EdgeAuthPolicy = {
      rules: [
        {
          hosts: [HOST],
          jwt: { jwksUrl, issuer: "https://issuer.example", audiences: [] },
          operations: [{ method: "GET", path: "/books/{id}", scopes: ["books:read"] }],
          defaultAction: "deny",
        },
      ],
      unmatchedHosts: "deny",
    };
    await kube.apply(resources.configMaps, {
      metadata: { name: routes.sliceName("policy"), namespace: SENTINEL_NAMESPACE, labels: routingLabels(ENV) },
      data: {
        [POLICY_KEY]: formatRoutingPolicy({
          version: 1,
          environmentId: ENV,
          mode: "instances",
          revisions: [{ deploymentId: "dep-a", weight: 100 }],
          auth,
        }),
      },
    });
    await routes.slice("dep-a", [{ ip: app.ip, pod: app.name }]);
    const s = await createSentinelPod(cluster, kube, "snt-auth", ENV, {
      KRANE_SENTINEL_JWKS_CACHE_MS: String(REFRESH_MS),
      KRANE_SENTINEL_JWKS_COOLDOWN_MS: String(COOLDOWN_MS),
    });
    pool = proxyClient(s, 4);
  },
  { timeout: 10 * 60_000 },
);

after(async () => {
  await pool?.close();
  kube?.close();
  await new Promise<void>((r) => (jwks ? jwks.close(() => r()) : r()));
});

const get = async (token: string): Promise<number> =>
  (await hit(pool, "/books/1", { authorization: `Bearer ${token}` })).status;

test("a remembered token is refused once its key left the JWKS and the refresh interval passed; unknown kids cost one fetch per cooldown", async () => {
  const t1 = await sign(k1, "k1", "ES256");
  const t2 = await sign(k2, "k2", "ES256");
  await eventually("the sentinel to enforce its policy", async () => ((await get(t1)) === 200 ? true : undefined));
  assert.equal((await hit(pool, "/books/1")).status, 401, "no token");
  // Remembered now: repeated calls pass without the keys being fetched again.
  const fetchedBefore = fetches;
  for (let i = 0; i < 5; i++) assert.equal(await get(t1), 200);
  assert.equal(await get(t2), 200);
  assert.ok(fetches - fetchedBefore <= 1, "remembered tokens cost no JWKS fetch");

  // k1 is withdrawn. Within one refresh interval (and a margin for the loaded machine) its token
  // is refused, although the sentinel remembers a verified token for up to 60 s.
  published = published.filter((k) => k.kid !== "k1");
  await sleep(REFRESH_MS + 500);
  assert.equal(await get(t1), 401, "the withdrawn key's token is refused after the refresh interval");
  assert.equal(await get(t2), 200, "a key that stays keeps its tokens");
  assert.equal(await get(t1), 401);

  // A flood of tokens naming key ids the JWKS does not have: refused, and the JWKS URL is not
  // hammered (one early refetch at most in the cooldown, plus at most the periodic refresh).
  const stranger = await generateKeyPair("ES256");
  const floodStart = fetches;
  const started = Date.now();
  const flood = await Promise.all(
    Array.from({ length: 10 }, async (_, worker) => {
      const out: number[] = [];
      for (let i = 0; i < 20; i++) out.push(await get(await sign(stranger, `kid-${worker}-${i}`, "ES256")));
      return out;
    }),
  );
  assert.deepEqual(new Set(flood.flat()), new Set([401]));
  const periodic = Math.ceil((Date.now() - started) / REFRESH_MS) + 1;
  assert.ok(
    fetches - floodStart <= 1 + periodic,
    `${fetches - floodStart} JWKS fetches for 200 unknown key ids in ${Date.now() - started} ms`,
  );
});
