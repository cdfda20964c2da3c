// A rate limit held across three real sentinels (`krane sentinel` processes in pod stand-ins on the
// real local cluster) that find each other on their Service's EndpointSlices and exchange signed
// counts (src/sentinel/peers.ts): under uneven load (60/30/10 %) at twice the limit, the count they
// admit together stays within the limit plus 5 % (each alone would admit up to the limit, 1,400 of
// 600 here); a forged exchange message, or one signed with another secret, is refused and counts
// nothing; a replica that goes away stops being a peer of the others.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import type { Pool } from "undici";
import { SENTINEL_NAMESPACE } from "../../../src/contracts/cluster.js";
import { parseEdgePolicies } from "../../../src/contracts/edge-policy.js";
import { COMPONENT, LABEL_COMPONENT, LABEL_ENVIRONMENT_ID } from "../../../src/contracts/labels.js";
import {
  formatRoutingPolicy,
  POLICY_KEY,
  SENTINEL_PEER_PORT,
  SENTINEL_PEER_PORT_NAME,
} from "../../../src/contracts/routing.js";
import type { KubeClient } from "../../../src/kube/client.js";
import { resources } from "../../../src/kube/resources.js";
import { encodeMessage, PEER_PATH, sign, SIGNATURE_HEADER } from "../../../src/sentinel/peer-messages.js";
import { eventually, useCluster } from "../../support/cluster.js";
import {
  createAppPod,
  createSentinelPod,
  deletePod,
  getJson,
  hit,
  kubeFor,
  metricValue,
  prepareAppNamespace,
  proxyClient,
  RoutingWriter,
  routingLabels,
  sentinelMetrics,
  sentinelStatus,
  type PodRef,
} from "./support.js";

const h = useCluster({ standins: true });
const ENV = "env_peers";
const SERVICE = "snt-peers";
const SECRET = randomBytes(32).toString("base64url");
const LIMIT = 600;
const WINDOW_S = 3600;
let kube: KubeClient;
const sentinels: PodRef[] = [];
const pools: Pool[] = [];

before(
  async () => {
    const cluster = await h.ready();
    kube = kubeFor(cluster);
    await prepareAppNamespace(cluster, kube);
    const app = await createAppPod(cluster, kube, "peers-1", "dep-peers");
    const routes = new RoutingWriter(kube, ENV);
    await kube.apply(resources.configMaps, {
      metadata: { name: routes.sliceName("policy"), namespace: SENTINEL_NAMESPACE, labels: routingLabels(ENV) },
      data: {
        [POLICY_KEY]: formatRoutingPolicy({
          version: 1,
          environmentId: ENV,
          mode: "instances",
          revisions: [],
          policies: parseEdgePolicies("policies", [
            {
              name: "per-tenant",
              kind: "ratelimit",
              key: "header",
              header: "x-tenant",
              limit: LIMIT,
              windowSeconds: WINDOW_S,
            },
          ]),
        }),
      },
    });
    await routes.slice("dep-peers", [{ ip: app.ip, pod: app.name }]);
    // The sentinel's Service as the agent renders it (the peers' port named): the endpoint slice
    // controller lists the pods on its EndpointSlices, which the sentinels watch.
    await kube.apply(resources.services, {
      metadata: { name: SERVICE, namespace: SENTINEL_NAMESPACE },
      spec: {
        type: "ClusterIP",
        selector: { [LABEL_COMPONENT]: COMPONENT.sentinel, [LABEL_ENVIRONMENT_ID]: ENV },
        ports: [{ name: SENTINEL_PEER_PORT_NAME, port: SENTINEL_PEER_PORT, targetPort: SENTINEL_PEER_PORT }],
      },
    });
    const env = { KRANE_SENTINEL_PEER_SERVICE: SERVICE, KRANE_SENTINEL_PEER_SECRET: SECRET };
    for (const name of ["snt-peers-a", "snt-peers-b", "snt-peers-c"])
      sentinels.push(await createSentinelPod(cluster, kube, name, ENV, env));
    for (const s of sentinels) pools.push(proxyClient(s, 8));
    await eventually(
      "every sentinel to hear the two others",
      async () => {
        for (const s of sentinels) if ((await sentinelStatus(s)).peers?.live.length !== 2) return undefined;
        return true;
      },
      60_000,
    );
  },
  { timeout: 10 * 60_000 },
);

after(async () => {
  await Promise.all(pools.map((p) => p.close()));
  kube?.close();
});

/** `rate` requests a second of key `tenant` for `seconds`, paced; the number answered by the app. */
async function paced(
  pool: Pool,
  tenant: string,
  rate: number,
  seconds: number,
): Promise<{ ok: number; limited: number }> {
  const started = performance.now();
  const all: Promise<number>[] = [];
  for (let i = 0; i < rate * seconds; i++) {
    const due = started + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    all.push(hit(pool, "/", { "x-tenant": tenant }).then((x) => (x.answer?.pod === "peers-1" ? 200 : x.status)));
  }
  const statuses = await Promise.all(all);
  const other = statuses.filter((s) => s !== 200 && s !== 429);
  assert.deepEqual(other, [], "every request admitted by the app or refused by the limit");
  return { ok: statuses.filter((s) => s === 200).length, limited: statuses.filter((s) => s === 429).length };
}

test("three replicas under uneven load admit the limit together, within 5 %", { timeout: 5 * 60_000 }, async (t) => {
  // One window for the whole load: not within a minute of a window's end.
  const left = WINDOW_S * 1000 - (Date.now() % (WINDOW_S * 1000));
  if (left < 60_000) await new Promise((r) => setTimeout(r, left + 1000));
  const tenant = `acme-${randomBytes(4).toString("hex")}`;
  // 100 requests a second in all for 12 s: twice the limit, 60/30/10 % across the replicas.
  const [a, b, c] = await Promise.all([
    paced(pools[0] as Pool, tenant, 60, 12),
    paced(pools[1] as Pool, tenant, 30, 12),
    paced(pools[2] as Pool, tenant, 10, 12),
  ]);
  const admitted = a.ok + b.ok + c.ok;
  const detail = `admitted ${a.ok}/${b.ok}/${c.ok} = ${admitted} of ${LIMIT}`;
  t.diagnostic(detail);
  assert.ok(admitted <= LIMIT * 1.05, `over the limit by more than 5 %: ${detail}`);
  assert.ok(admitted >= LIMIT * 0.9, `far below the limit: ${detail}`);
  assert.ok(a.ok > b.ok && b.ok > c.ok, `the budget follows the demand: ${detail}`);
  // Every decision counted where it was made.
  let denied = 0;
  for (const s of sentinels)
    denied += metricValue(await sentinelMetrics(s), "krane_sentinel_policy_decisions_total", {
      policy: "per-tenant",
      decision: "deny",
    });
  assert.equal(denied, a.limited + b.limited + c.limited);
});

test("a forged exchange message is refused and counts nothing; a replica gone stops being a peer", async () => {
  const [first, , third] = sentinels as [PodRef, PodRef, PodRef];
  const url = `http://${first.local}:${SENTINEL_PEER_PORT}${PEER_PATH}`;
  const tenant = `globex-${randomBytes(4).toString("hex")}`;
  // Claims the whole budget of a fresh key was spent elsewhere.
  const body = encodeMessage({
    environmentId: ENV,
    from: "intruder",
    seq: 1,
    at: Date.now(),
    limiters: [
      {
        id: "p:any",
        report: {
          window: Math.floor(Date.now() / (WINDOW_S * 1000)),
          keys: new Map([[tenant, { count: LIMIT, demand: 1 }]]),
        },
      },
    ],
  });
  const post = (headers: Record<string, string>): Promise<number> =>
    getJson(url, { method: "POST", body, headers: { "content-type": "application/json", ...headers } }).then(
      (r) => r.status,
    );
  assert.equal(await post({}), 401, "unsigned");
  assert.equal(await post({ [SIGNATURE_HEADER]: sign("another environment's secret, long enough", body) }), 401);
  assert.equal(await post({ [SIGNATURE_HEADER]: "v1=" + "0".repeat(64) }), 401);
  const refused = metricValue(await sentinelMetrics(first), "krane_sentinel_peer_messages_total", {
    direction: "received",
    result: "refused",
  });
  assert.ok(refused >= 3, `refused messages counted: ${refused}`);
  assert.ok(!(await sentinelStatus(first)).peers?.live.includes("intruder"));
  // The public port does not speak the exchange: the path is proxied to the app like any other.
  const viaProxy = await hit(pools[0] as Pool, PEER_PATH);
  assert.equal(viaProxy.answer?.pod, "peers-1");
  const fresh = await hit(pools[0] as Pool, "/", { "x-tenant": tenant });
  assert.equal(fresh.answer?.pod, "peers-1", "the forged counts did not spend the key's budget");

  await deletePod(kube, SENTINEL_NAMESPACE, third.name);
  await eventually(
    "the two others to stop counting the deleted replica as a peer",
    async () => {
      for (const s of sentinels.slice(0, 2)) if ((await sentinelStatus(s)).peers?.live.length !== 1) return undefined;
      return true;
    },
    90_000,
  );
});
