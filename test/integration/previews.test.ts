// Preview environments end to end, real parts only: a signed GitHub pull-request delivery to ctrl's
// webhook listener (HTTP/1.1) → ctrl (SQLite, HTTP/2) → the agent (its RBAC, behind the fence) →
// the real local Kubernetes, whose Traefik Gateway routes the preview's generated hostname to its
// own sentinel (a real `krane sentinel` in a pod stand-in) and on to its instance (a stand-in
// answering with its image). The preview's URL and state go back through a local server
// implementing GitHub's commit-status API. Closing the pull request deletes everything the preview
// made in the cluster (every object labelled with its environment, in every namespace and region)
// and in ctrl; a preview whose TTL passes goes the same way on its own. An unsigned delivery is
// refused and creates nothing.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { Agent } from "../../src/agent/agent.js";
import { parseGatewayRef } from "../../src/agent/config.js";
import { LABEL_ENVIRONMENT_ID } from "../../src/contracts/labels.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { EndpointService } from "../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { PreviewService } from "../../src/gen/krane/ctrl/v1/preview_pb.js";
import type { KubeClient } from "../../src/kube/client.js";
import { resources, type ResourceType } from "../../src/kube/resources.js";
import { Keyring } from "../../src/ctrl/secrets/keyring.js";
import { applySentinelRbac } from "../../src/sentinel/rbac.js";
import { eventually, useCluster } from "../support/cluster.js";
import { deliver, githubDelivery, startFakeProviders, type FakeProviders } from "../support/git-providers.js";
import { adminKube, routingAgent } from "./agent/support.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./ctrl/support.js";

const handle = useCluster({ standins: true, gateway: true });
const REGION = "local";
const BASE = { workspace: "acme", project: "shop", environment: "production" };
const SECRET = "github-webhook-secret-0123456789";
const SHA = "5a1b2c3d4e5f60718293a4b5c6d7e8f901234567";
const dir = tempDir("krane-previews-e2e-");
let ctrl: TestCtrl;
let agent: Agent;
let kube: KubeClient;
let providers: FakeProviders;
let hookUrl = "";

/** Everything krane makes for an environment in a cluster, found by its label. */
const KINDS: ResourceType[] = [
  resources.replicaSets,
  resources.pods,
  resources.deployments,
  resources.services,
  resources.configMaps,
  resources.secrets,
  resources.endpointSlices,
  resources.ciliumNetworkPolicies,
  resources.httpRoutes,
];

async function objectsOf(environmentId: string): Promise<string[]> {
  const out: string[] = [];
  for (const r of KINDS) {
    const { items } = await kube.list(r, { labelSelector: `${LABEL_ENVIRONMENT_ID}=${environmentId}` });
    for (const o of items) out.push(`${r.kind} ${o.metadata.namespace ?? ""}/${o.metadata.name ?? ""}`);
  }
  return out;
}

function get(port: number, host: string, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, path, headers: { host }, timeout: 10_000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end();
  });
}

/** The image the preview's instance answered with at its URL, once it answers 200. */
async function answeredImage(host: string, timeoutMs: number): Promise<string> {
  const gws = handle.cluster.gateways;
  assert.ok(gws);
  return eventually(
    `${host} answered by the preview's instance through the Gateway`,
    async () => {
      const a = await get(gws.public.port, host, "/").catch(() => undefined);
      return a?.status === 200 ? (JSON.parse(a.body) as { image: string }).image : undefined;
    },
    timeoutMs,
  );
}

before(
  async () => {
    const cluster = await handle.ready();
    const gws = cluster.gateways;
    assert.ok(gws, "the cluster runs Gateways");
    await applySentinelRbac(cluster.kubeConfig());
    kube = adminKube(cluster);
    providers = await startFakeProviders({
      githubToken: "status-token",
      gitlabToken: "unused",
      githubRepos: ["acme/shop"],
      gitlabProjects: [],
    });
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      keyring: new Keyring(randomBytes(32)),
      exposure: { publicApex: "preview.test", scheme: "http" },
      rolloutSweepIntervalMs: 300,
      deletionSweepIntervalMs: 500,
      previews: {
        webhookListen: { host: "127.0.0.1", port: 0 },
        expiryIntervalMs: 500,
        statusSweepIntervalMs: 200,
        statusRecheckMs: 500,
      },
    });
    const t = ctrl.adminToken;
    await ctrl.client(RegionService, t).createRegion({ name: REGION });
    await ctrl.client(WorkspaceService, t).createWorkspace({ slug: BASE.workspace });
    await ctrl.client(ProjectService, t).createProject({ workspace: BASE.workspace, slug: BASE.project });
    await ctrl.client(EnvironmentService, t).createEnvironment({
      ...BASE,
      slug: BASE.environment,
      regions: [{ region: REGION, replicas: 2 }],
      sentinel: { image: "", replicas: 1, cpuMillicores: 100n, memoryMib: 128n },
    });
    await ctrl.client(EndpointService, t).setEndpoint({ ...BASE, visibility: "public" });
    await ctrl.client(DeploymentService, t).createDeployment({ ...BASE, image: "ghcr.io/acme/shop:1", port: 8080 });
    const { hook } = await ctrl.client(PreviewService, t).createPreviewHook({
      workspace: BASE.workspace,
      project: BASE.project,
      baseEnvironment: BASE.environment,
      provider: "github",
      repository: "acme/shop",
      secret: SECRET,
      imageTemplate: "ghcr.io/acme/shop:{short_sha}",
      statusApiUrl: providers.githubUrl,
      statusToken: "status-token",
    });
    assert.ok(hook && ctrl.webhookUrl);
    hookUrl = `${ctrl.webhookUrl}${hook.path}`;
    agent = await routingAgent(cluster, ctrl, REGION, {
      resyncPeriodMs: 5_000,
      gateway: { public: parseGatewayRef(gws.public.ref), organization: parseGatewayRef(gws.organization.ref) },
    });
    await agent.start();
  },
  { timeout: 30 * 60_000 },
);

after(async () => {
  await agent?.stop();
  await ctrl?.close();
  await providers?.close();
  dir.remove();
});

test(
  "a signed pull request's preview answers at its URL; its status goes back; closing it deletes everything",
  { timeout: 10 * 60_000 },
  async () => {
    const previews = ctrl.client(PreviewService, ctrl.adminToken);
    // Unsigned: refused, nothing made.
    const opened = githubDelivery(SECRET, { action: "opened", number: 5, sha: SHA, repository: "acme/shop" });
    const { "x-hub-signature-256": _sig, ...unsigned } = opened.headers;
    void _sig;
    assert.equal((await deliver(hookUrl, { body: opened.body, headers: unsigned })).status, 401);
    assert.deepEqual((await previews.listPreviews({ workspace: "acme" })).previews, []);

    const sent = Date.now();
    const r = await deliver(hookUrl, opened);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const image = await answeredImage("pr-5-shop-acme.preview.test", 180_000);
    console.log(`webhook → the preview's URL answering: ${Date.now() - sent} ms`);
    assert.equal(image, `ghcr.io/acme/shop:${SHA.slice(0, 7)}`);
    const ready = await eventually(
      "the commit status says the preview is ready, with its URL",
      async () => providers.statuses.find((s) => s.sha === SHA && s.state === "success"),
      60_000,
    );
    assert.equal(ready.targetUrl, "http://pr-5-shop-acme.preview.test/");
    assert.ok(
      providers.statuses.findIndex((s) => s.sha === SHA && s.state === "pending") <
        providers.statuses.findIndex((s) => s.sha === SHA && s.state === "success"),
      "pending first, then success",
    );

    const [preview] = (await previews.listPreviews({ workspace: "acme" })).previews;
    assert.ok(preview);
    const envId = preview.environmentId;
    assert.ok((await objectsOf(envId)).length > 0, "the preview made objects in the cluster");
    // The base keeps running, untouched.
    assert.equal(await answeredImage("production-shop-acme.preview.test", 60_000), "ghcr.io/acme/shop:1");

    const closedAt = Date.now();
    const closed = await deliver(
      hookUrl,
      githubDelivery(SECRET, { action: "closed", number: 5, sha: SHA, repository: "acme/shop" }),
    );
    assert.equal(closed.status, 200);
    await eventually(
      "nothing of the preview left in the cluster",
      async () => ((await objectsOf(envId)).length === 0 ? true : undefined),
      300_000,
    ).catch(async (err: unknown) => {
      throw new Error(`${String(err)}: ${(await objectsOf(envId)).join(", ")}`);
    });
    await eventually(
      "nothing of the preview left in ctrl",
      async () => {
        const rows = await ctrl.store.db
          .selectFrom("desired_objects")
          .select("object_id")
          .where("environment_id", "=", envId)
          .execute();
        const env = await ctrl.store.db
          .selectFrom("environments")
          .select("id")
          .where("id", "=", envId)
          .executeTakeFirst();
        const p = await ctrl.store.db
          .selectFrom("previews")
          .select("id")
          .where("environment_id", "=", envId)
          .executeTakeFirst();
        return rows.length === 0 && !env && !p ? true : undefined;
      },
      60_000,
    );
    console.log(`close → everything deleted: ${Date.now() - closedAt} ms`);
    assert.equal(
      (await get(handle.cluster.gateways?.public.port ?? 0, "pr-5-shop-acme.preview.test", "/")).status,
      404,
    );
  },
);

test("a preview whose TTL passes is deleted on its own, in the cluster too", { timeout: 10 * 60_000 }, async () => {
  const { preview } = await ctrl.client(PreviewService, ctrl.adminToken).createPreview({
    workspace: "acme",
    project: "shop",
    baseEnvironment: "production",
    name: "short-lived",
    image: "ghcr.io/acme/shop:ttl",
    ttlSeconds: 45n,
  });
  assert.ok(preview);
  assert.equal(await answeredImage("short-lived-shop-acme.preview.test", 180_000), "ghcr.io/acme/shop:ttl");
  await eventually(
    "the expired preview gone from the cluster",
    async () => ((await objectsOf(preview.environmentId)).length === 0 ? true : undefined),
    300_000,
  );
  assert.deepEqual(
    (await ctrl.client(PreviewService, ctrl.adminToken).listPreviews({ workspace: "acme" })).previews,
    [],
  );
});
