// External secrets for real: the Secrets Store CSI driver, built from its Go module, runs on the
// cluster's real node with the driver project's own test provider, registered with the node's
// kubelet; the agent renders each revision's SecretProviderClass and mounts it into the pods.
//  - A pod of a deployment (under gVisor, on the untrusted node) reads the store's value from the
//    mounted file, and as the environment variable the driver's synced Secret gives it.
//  - A key the store does not have keeps the pod from starting (its container waits for the
//    Secret the driver cannot sync), and `krane status` says which key and why, from the
//    driver's event reported by the agent.
//  - A store that does not answer (its provider stopped) fails the mount itself: the pod gets no
//    sandbox and no address, and `krane status` still shows it, failed, with the kubelet's reason.
// One cluster, one ctrl and one agent for both environments.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Agent } from "../../src/agent/agent.js";
import { toJson } from "@bufbuild/protobuf";
import { renderEnvironmentStatus } from "../../src/cli/status-view.js";
import { EXTERNAL_SECRETS_MOUNT } from "../../src/agent/deployments/settings.js";
import { COMPONENT, LABEL_COMPONENT } from "../../src/contracts/labels.js";
import {
  GetEnvironmentStatusResponseSchema,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { InstanceStatus } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { ConfigService } from "../../src/gen/krane/ctrl/v1/config_pb.js";
import { InstanceEventSchema, InstanceEventService } from "../../src/gen/krane/ctrl/v1/events_pb.js";
import { Keyring } from "../../src/ctrl/secrets/keyring.js";
import { eventually } from "../support/cluster.js";
import { kubectl, kubectlJson, realNodesSkip, useRealCluster } from "../support/real-nodes.js";
import { routingAgent } from "./agent/support.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./ctrl/support.js";

const skip = await realNodesSkip();
const REGION = "local";
const WS = "acme";
const PROJECT = "shop";
const VALUE = "s3cret from the store";

// Answers with the mounted file and the environment variable of DB_PASSWORD.
const SERVER = [
  "require('http').createServer((q, s) => {",
  "  let file = null;",
  `  try { file = require('fs').readFileSync('${EXTERNAL_SECRETS_MOUNT}/DB_PASSWORD', 'utf8'); } catch (e) { file = String(e.code); }`,
  "  s.end(JSON.stringify({ file, env: process.env.DB_PASSWORD ?? null }));",
  "}).listen(Number(process.env.PORT))",
].join("\n");

interface Pod {
  metadata: { name: string };
  spec: { nodeName?: string; runtimeClassName?: string };
  status: { containerStatuses?: { state?: Record<string, unknown> }[] };
}

describe("external secrets from the Secrets Store CSI driver on a real node", { skip }, () => {
  const h = useRealCluster(["untrusted"], { secretsStore: { objects: { DB_PASSWORD: VALUE } } });
  const dir = tempDir("krane-secrets-store-");
  let ctrl: TestCtrl;
  let agent: Agent;

  const deploy = async (env: string, external: Record<string, string>): Promise<void> => {
    const t = ctrl.adminToken;
    const ref = { workspace: WS, project: PROJECT, environment: env };
    await ctrl
      .client(EnvironmentService, t)
      .createEnvironment({ ...ref, slug: env, regions: [{ region: REGION, replicas: 1 }] });
    await ctrl.client(ConfigService, t).setSecrets({
      ...ref,
      secrets: Object.entries(external).map(([key, path]) => ({ key, source: { case: "externalPath", value: path } })),
    });
    await ctrl.client(DeploymentService, t).createDeployment({
      ...ref,
      image: "krane.local/hello:v1",
      command: ["node", "-e", SERVER],
      port: 8080,
      cpuMillicores: 100n,
      memoryMib: 128n,
    });
  };

  /** What a failed wait prints: the pods' Warning events, the pods, and what ctrl was told. */
  const diagnostics = async (ref: { workspace: string; project: string; environment: string }): Promise<string> => {
    const events = await kubectl(h.cluster, ["get", "events", "-A", "--field-selector", "type=Warning"]);
    const pods = await kubectl(h.cluster, ["get", "pods", "-A", "-o", "wide"]);
    const { events: reported } = await ctrl
      .client(InstanceEventService, ctrl.adminToken)
      .listInstanceEvents({ ...ref, latest: false });
    return [
      `Warning events:\n${events.stdout}${events.stderr}`,
      `pods:\n${pods.stdout}`,
      `reported: ${JSON.stringify(reported.map((e) => [e.instance, e.reason, String(e.atUnixMs), e.message]))}`,
    ].join("\n");
  };

  before(
    async () => {
      const cluster = await h.ready();
      const store = cluster.secretsStore;
      assert.ok(store, "the cluster runs the secret store");
      // Secrets need the installation's master key, external references too.
      ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { keyring: new Keyring(randomBytes(32)) });
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: REGION });
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: WS });
      await ctrl.client(ProjectService, t).createProject({ workspace: WS, slug: PROJECT });
      agent = await routingAgent(cluster, ctrl, REGION, { secretStore: { provider: store.provider, parameters: {} } });
      await agent.start();
      await deploy("stored", { DB_PASSWORD: "shop/db-password" });
      await deploy("missing", { DB_PASSWORD: "shop/db-password", API_KEY: "shop/api-key" });
    },
    { timeout: 30 * 60_000 },
  );
  after(async () => {
    await agent?.stop();
    await ctrl?.close();
    dir.remove();
  });

  it(
    "a pod under gVisor reads the store's value from the mount and from its environment",
    { timeout: 5 * 60_000 },
    async () => {
      const ref = { workspace: WS, project: PROJECT, environment: "stored" };
      const address = await eventually(
        "a running instance",
        async () => {
          const s = await ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(ref);
          return s.deployments
            .flatMap((d) => d.regions.flatMap((r) => r.instances))
            .find((i) => i.status === InstanceStatus.RUNNING && i.address !== "")?.address;
        },
        240_000,
      );
      const body = await eventually(
        "the instance's answer",
        async () => {
          const res = await fetch(`http://${address}/`).catch(() => undefined);
          return res?.ok ? ((await res.json()) as { file: string | null; env: string | null }) : undefined;
        },
        60_000,
      );
      assert.deepEqual(body, { file: VALUE, env: VALUE });
      // It ran where user code runs: gVisor on the untrusted node, mounted by the real driver.
      const pods = await kubectlJson<{ items: Pod[] }>(h.cluster, [
        "pods",
        "-A",
        "-l",
        `${LABEL_COMPONENT}=${COMPONENT.deployment}`,
      ]);
      const pod = pods.items.find(
        (p) => p.spec.nodeName === "untrusted-real" && p.status.containerStatuses?.[0]?.state?.running,
      );
      assert.equal(pod?.spec.runtimeClassName, "gvisor");
      const statuses = await kubectlJson<{ items: { metadata: { name: string } }[] }>(h.cluster, [
        "secretproviderclasspodstatuses.secrets-store.csi.x-k8s.io",
        "-A",
      ]);
      assert.ok(
        statuses.items.some((s) => s.metadata.name.startsWith(pod?.metadata.name ?? "?")),
        "the driver recorded the pod's mount",
      );
    },
  );

  it(
    "a key the store lacks keeps the pod from starting, and krane status says which and why",
    { timeout: 5 * 60_000 },
    async () => {
      const ref = { workspace: WS, project: PROJECT, environment: "missing" };
      const event = await eventually(
        "the driver's reason reported",
        async () => {
          const { events } = await ctrl.client(InstanceEventService, ctrl.adminToken).listInstanceEvents({
            ...ref,
            latest: true,
          });
          return events.find((e) => e.reason === "FailedToCreateSecret");
        },
        240_000,
      ).catch(async (err: unknown) => {
        throw new Error(`${String(err)}\n${await diagnostics(ref)}`);
      });
      assert.match(event.message, /^external secrets: .*API_KEY/);
      const status = await ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(ref);
      const instances = status.deployments.flatMap((d) => d.regions.flatMap((r) => r.instances));
      assert.equal(instances.length, 1);
      assert.equal(instances[0]?.status, InstanceStatus.FAILED, "there, not running");
      const { events } = await ctrl
        .client(InstanceEventService, ctrl.adminToken)
        .listInstanceEvents({ ...ref, latest: true });
      const text = renderEnvironmentStatus(
        toJson(GetEnvironmentStatusResponseSchema, status),
        Date.now(),
        undefined,
        events.map((e) => toJson(InstanceEventSchema, e)),
      );
      assert.match(text, /FailedToCreateSecret: external secrets: .*API_KEY/);
      // The container never ran: the kubelet holds it back until the Secret exists.
      const pods = await kubectlJson<{ items: Pod[] }>(h.cluster, [
        "pods",
        "-A",
        "-l",
        `${LABEL_COMPONENT}=${COMPONENT.deployment}`,
      ]);
      const stuck = pods.items.filter((p) => p.metadata.name === instances[0]?.k8sName);
      assert.equal(stuck.length, 1);
      assert.deepEqual(Object.keys(stuck[0]?.status.containerStatuses?.[0]?.state ?? {}), ["waiting"]);
    },
  );

  it(
    "a store that does not answer fails the mount, and the pod is shown failed with the kubelet's reason",
    { timeout: 5 * 60_000 },
    async () => {
      // Stop the test provider of this cluster's node (found by the directory it serves in).
      const providers = join(h.cluster.dir, "nodes");
      for (const pid of readdirSync("/proc").filter((e) => /^\d+$/.test(e))) {
        const cmd = (() => {
          try {
            return readFileSync(`/proc/${pid}/cmdline`, "utf8");
          } catch {
            return "";
          }
        })();
        if (cmd.includes("fake-provider") && cmd.includes(providers)) process.kill(Number(pid), "SIGTERM");
      }
      await deploy("unreachable", { DB_PASSWORD: "shop/db-password" });
      const ref = { workspace: WS, project: PROJECT, environment: "unreachable" };
      const event = await eventually(
        "the kubelet's mount failure reported",
        async () => {
          const { events } = await ctrl.client(InstanceEventService, ctrl.adminToken).listInstanceEvents({
            ...ref,
            latest: true,
          });
          return events.find((e) => e.reason === "FailedMount");
        },
        240_000,
      );
      assert.match(event.message, /^external secrets: /);
      const status = await ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(ref);
      const instances = status.deployments.flatMap((d) => d.regions.flatMap((r) => r.instances));
      assert.deepEqual(
        instances.map((i) => [i.status, i.address]),
        [[InstanceStatus.FAILED, ""]],
        "reported without an address (no sandbox was made), as failed",
      );
      const { events } = await ctrl
        .client(InstanceEventService, ctrl.adminToken)
        .listInstanceEvents({ ...ref, latest: true });
      assert.match(
        renderEnvironmentStatus(
          toJson(GetEnvironmentStatusResponseSchema, status),
          Date.now(),
          undefined,
          events.map((e) => toJson(InstanceEventSchema, e)),
        ),
        /failed[\s\S]*FailedMount: external secrets: /,
      );
    },
  );
});
