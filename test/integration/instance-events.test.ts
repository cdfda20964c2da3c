// Instance events on real nodes: containers really die (under gVisor, on a real kubelet) and
// each reaches status with the right reason, through the agent's report and ctrl's
// InstanceEventService:
//  - a container over its memory limit → OOMKilled;
//  - exit 3 in a loop → CrashLoopBackOff with exit code 3;
//  - an image that does not exist → a pull error naming the image.
// One cluster and one agent for the three environments; the workloads are the hello image's
// node with a command of their own.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Agent } from "../../src/agent/agent.js";
import { describeInstanceEvent, renderEnvironmentStatus } from "../../src/cli/status-view.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { InstanceEventService, type InstanceEvent } from "../../src/gen/krane/ctrl/v1/events_pb.js";
import { eventually } from "../support/cluster.js";
import { realNodesSkip, useRealCluster } from "../support/real-nodes.js";
import { routingAgent } from "./agent/support.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./ctrl/support.js";

const skip = await realNodesSkip();
const REGION = "local";
const WS = "acme";
const PROJECT = "shop";

const WORKLOADS = {
  // Off-heap buffers grow past the 64 MiB limit: the kernel's OOM killer ends the container.
  oom: {
    image: "krane.local/hello:v1",
    command: ["node", "-e", "const a=[];setInterval(()=>a.push(Buffer.alloc(16<<20,1)),20)"],
    memoryMib: 64n,
  },
  crash: { image: "krane.local/hello:v1", command: ["node", "-e", "process.exit(3)"], memoryMib: 128n },
  pull: { image: "krane.local/nope:1", command: [], memoryMib: 128n },
} as const;

describe("instance events on real nodes", { skip }, () => {
  const h = useRealCluster(["untrusted"]);
  const dir = tempDir("krane-events-");
  let ctrl: TestCtrl;
  let agent: Agent;

  before(
    async () => {
      const cluster = await h.ready();
      ctrl = await startTestCtrl(join(dir.path, "ctrl.db"));
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: REGION });
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: WS });
      await ctrl.client(ProjectService, t).createProject({ workspace: WS, slug: PROJECT });
      agent = await routingAgent(cluster, ctrl, REGION);
      await agent.start();
      for (const [slug, w] of Object.entries(WORKLOADS)) {
        await ctrl.client(EnvironmentService, t).createEnvironment({
          workspace: WS,
          project: PROJECT,
          slug,
          regions: [{ region: REGION, replicas: 1 }],
        });
        await ctrl.client(DeploymentService, t).createDeployment({
          workspace: WS,
          project: PROJECT,
          environment: slug,
          image: w.image,
          command: [...w.command],
          port: 8080,
          cpuMillicores: 100n,
          memoryMib: w.memoryMib,
        });
      }
    },
    { timeout: 30 * 60_000 },
  );
  after(async () => {
    await agent?.stop();
    await ctrl?.close();
    dir.remove();
  });

  /** The environment's newest event per instance, once `ok` holds for one; and its status text. */
  const lastEvent = async (env: string, ok: (e: InstanceEvent) => boolean): Promise<[InstanceEvent, string]> => {
    const ref = { workspace: WS, project: PROJECT, environment: env };
    const e = await eventually(
      `${env}: the expected event`,
      async () => {
        const { events } = await ctrl.client(InstanceEventService, ctrl.adminToken).listInstanceEvents({
          ...ref,
          latest: true,
        });
        return events.find(ok);
      },
      240_000,
    );
    const status = await ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(ref);
    const { events } = await ctrl.client(InstanceEventService, ctrl.adminToken).listInstanceEvents({
      ...ref,
      latest: true,
    });
    return [e, renderEnvironmentStatus(status, Date.now(), undefined, events)];
  };

  it("a container over its memory limit shows OOMKilled", { timeout: 5 * 60_000 }, async () => {
    const [e, text] = await lastEvent("oom", (x) => x.reason === "OOMKilled");
    // The exit code is the runtime's: runc reports 137 (SIGKILL), gVisor's runsc 128.
    assert.ok(e.exitCode === 137 || e.exitCode === 128, `exit code ${e.exitCode}`);
    assert.match(describeInstanceEvent(e), new RegExp(`^OOMKilled \\(exit ${e.exitCode}`));
    assert.match(text, new RegExp(`OOMKilled \\(exit ${e.exitCode}`));
  });

  it("exit 3 in a loop shows CrashLoopBackOff with exit code 3", { timeout: 5 * 60_000 }, async () => {
    const [e, text] = await lastEvent("crash", (x) => x.reason === "CrashLoopBackOff");
    assert.equal(e.exitCode, 3);
    assert.ok(e.restarts >= 1, `restarts: ${e.restarts}`);
    assert.match(text, /CrashLoopBackOff, exit 3, \d+ restarts?/);
  });

  it("an image that does not exist shows a pull error naming it", { timeout: 5 * 60_000 }, async () => {
    const [e, text] = await lastEvent("pull", (x) => /ErrImagePull|ImagePullBackOff/.test(x.reason));
    assert.equal(e.image, "krane.local/nope:1");
    assert.match(text, /(ErrImagePull|ImagePullBackOff): krane\.local\/nope:1/);
  });
});
