// Instance events on real nodes: containers really die (under gVisor, on a real kubelet) and
// each reaches status with the right reason, through the agent's report and ctrl's
// InstanceEventService:
//  - a container over its memory limit → OOMKilled;
//  - exit 3 in a loop → CrashLoopBackOff with exit code 3, and its restarts in the metrics history;
//  - an image that does not exist → a pull error naming the image;
//  - a readiness probe that starts failing (the hello app's HELLO_UNREADY_AFTER_MS) → unready;
//  - an eviction through the API, as a node drain makes it → evicted, with its reason.
// For the last two, `krane status` shows the instance's last event and `krane logs --events`
// prints it among the instance's lines, in time order.
// One cluster and one agent for the environments; the workloads are the hello image (its app, or
// its node with a command of their own).
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Agent } from "../../src/agent/agent.js";
import { toJson } from "@bufbuild/protobuf";
import { describeInstanceEvent, renderEnvironmentStatus } from "../../src/cli/status-view.js";
import {
  GetEnvironmentStatusResponseSchema,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import {
  InstanceEventSchema,
  InstanceEventService,
  type InstanceEvent,
} from "../../src/gen/krane/ctrl/v1/events_pb.js";
import { MetricsService } from "../../src/gen/krane/ctrl/v1/live_pb.js";
import { eventually } from "../support/cluster.js";
import { krane, kubectlOk, realNodesSkip, useRealCluster } from "../support/real-nodes.js";
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
  // Ready at first, then /healthz answers 503. The probe is also the liveness probe, so the
  // kubelet restarts the container; its SIGTERM leaves the app serving (unready) for the 30 s
  // grace period, which keeps the unready state long enough to be seen.
  unready: {
    image: "krane.local/hello:v1",
    command: [],
    memoryMib: 128n,
    env: { HELLO_UNREADY_AFTER_MS: "8000", HELLO_SHUTDOWN_DELAY_MS: "60000" },
    healthCheck: { path: "/healthz", intervalSeconds: 1, failureThreshold: 3 },
  },
  // Terminates slowly once evicted (the grace period), so its instance stays while it goes.
  evict: {
    image: "krane.local/hello:v1",
    command: [],
    memoryMib: 128n,
    env: { HELLO_SHUTDOWN_DELAY_MS: "60000" },
  },
} as const;

type Workload = {
  image: string;
  command: readonly string[];
  memoryMib: bigint;
  env?: Record<string, string>;
  healthCheck?: { path: string; intervalSeconds: number; failureThreshold: number };
};

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
      agent = await routingAgent(cluster, ctrl, REGION, { usageIntervalMs: 2_000 });
      await agent.start();
      for (const [slug, w] of Object.entries(WORKLOADS) as [string, Workload][]) {
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
          env: Object.entries(w.env ?? {}).map(([name, value]) => ({ name, value })),
          healthCheck: w.healthCheck,
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
    const eventsJson = events.map((x) => toJson(InstanceEventSchema, x));
    return [
      e,
      renderEnvironmentStatus(toJson(GetEnvironmentStatusResponseSchema, status), Date.now(), undefined, eventsJson),
    ];
  };

  it("a container over its memory limit shows OOMKilled", { timeout: 5 * 60_000 }, async () => {
    const [e, text] = await lastEvent("oom", (x) => x.reason === "OOMKilled");
    // The exit code is the runtime's: runc reports 137 (SIGKILL), gVisor's runsc 128.
    assert.ok(e.exitCode === 137 || e.exitCode === 128, `exit code ${e.exitCode}`);
    assert.match(describeInstanceEvent(toJson(InstanceEventSchema, e)), new RegExp(`^OOMKilled \\(exit ${e.exitCode}`));
    assert.match(text, new RegExp(`OOMKilled \\(exit ${e.exitCode}`));
  });

  it("exit 3 in a loop shows CrashLoopBackOff with exit code 3", { timeout: 5 * 60_000 }, async () => {
    // The container cycles between waiting in CrashLoopBackOff and a short run ending in Error:
    // status is read again until it shows the back-off (it lasts 10 s and more, the run less).
    let last = "";
    const [e, text] = await eventually(
      "status showing the back-off",
      async () => {
        const got = await lastEvent("crash", (x) => x.reason === "CrashLoopBackOff");
        last = got[1];
        return /CrashLoopBackOff/.test(got[1]) ? got : undefined;
      },
      120_000,
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}; last status:\n${last}`);
    });
    assert.equal(e.exitCode, 3);
    assert.ok(e.restarts >= 1, `restarts: ${e.restarts}`);
    assert.match(text, /CrashLoopBackOff, exit 3, \d+ restarts?/);
    // The metrics history counts the restarts per instance (the agent's usage reader).
    await eventually(
      "the instance's restarts in the metrics history",
      async () => {
        const { series } = await ctrl.client(MetricsService, ctrl.adminToken).getMetricsHistory({
          workspace: WS,
          project: PROJECT,
          environment: "crash",
        });
        const n = series.filter((x) => x.instance !== "").reduce((a, x) => a + Number(x.total?.restarts ?? 0n), 0);
        return n >= 1 ? n : undefined;
      },
      60_000,
    );
  });

  it("an image that does not exist shows a pull error naming it", { timeout: 5 * 60_000 }, async () => {
    const [e, text] = await lastEvent("pull", (x) => /ErrImagePull|ImagePullBackOff/.test(x.reason));
    assert.equal(e.image, "krane.local/nope:1");
    assert.match(text, /(ErrImagePull|ImagePullBackOff): krane\.local\/nope:1/);
  });

  const cliEnv = (): Record<string, string> => ({
    KRANE_CTRL_URL: ctrl.url,
    KRANE_TOKEN: ctrl.adminToken,
    KRANE_WORKSPACE: WS,
    NO_COLOR: "1",
  });

  /**
   * `krane logs --events --timestamps` of one instance once its output is `ok` (the event is among
   * the lines), and everything is in time order.
   */
  const logsWithEvent = async (
    env: string,
    instance: string,
    ok: (printed: string[]) => boolean,
  ): Promise<string[]> => {
    const out = await eventually(
      `${env}: the event among the lines of krane logs --events`,
      async () => {
        const o = await krane(cliEnv(), [
          "logs",
          `${PROJECT}/${env}`,
          "--events",
          "--instance",
          instance,
          "--timestamps",
        ]);
        return ok(o.split("\n").filter(Boolean)) ? o : undefined;
      },
      60_000,
    );
    const printed = out.split("\n").filter(Boolean);
    const times = printed.map((l) => /^(\S+Z) /.exec(l)?.[1] ?? "");
    assert.ok(
      times.every((t) => t !== ""),
      out,
    );
    assert.deepEqual(times, [...times].sort(), "events and lines are printed in time order");
    return printed;
  };

  it(
    "a readiness probe that starts failing shows as unready, in status and among the lines",
    { timeout: 5 * 60_000 },
    async () => {
      const [e, text] = await lastEvent("unready", (x) => x.kind === "unready");
      assert.equal(e.reason, "ReadinessProbeFailing");
      // The instance's last event, as krane status prints it under the instance.
      assert.match(text, /\n[^\n]*readiness probe failing/);
      // The events of earlier containers come too (their lines do not: only the running
      // container's log is read); the current container says it fails before the probe's verdict.
      const saidFirst = (printed: string[]): boolean => {
        const said = printed.findLastIndex((l) => l.includes("readiness failing from now on"));
        return said >= 0 && said < printed.findLastIndex((l) => /r1: readiness probe failing ---$/.test(l));
      };
      await logsWithEvent("unready", e.instance, saidFirst);
    },
  );

  it(
    "an eviction through the API (a node drain) shows as evicted, in status and among the lines",
    { timeout: 5 * 60_000 },
    async () => {
      const ref = { workspace: WS, project: PROJECT, environment: "evict" };
      const pod = await eventually(
        "a running instance to evict",
        async () => {
          const s = await ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(ref);
          return s.deployments.flatMap((d) => d.regions.flatMap((r) => r.instances.map((i) => i.k8sName)))[0];
        },
        240_000,
      );
      // As `kubectl drain` does it: the eviction subresource.
      await kubectlOk(
        h.cluster,
        ["create", "--raw", `/api/v1/namespaces/ws-${WS}/pods/${pod}/eviction`, "-f", "-"],
        JSON.stringify({ apiVersion: "policy/v1", kind: "Eviction", metadata: { name: pod, namespace: `ws-${WS}` } }),
      );
      const [e, text] = await lastEvent("evict", (x) => x.kind === "evicted" && x.instance === pod);
      assert.equal(e.reason, "EvictionByEvictionAPI");
      // Still there while it terminates (its grace period): krane status shows why it goes.
      assert.match(text, /terminating[^\n]*\n[^\n]*Evicted \(EvictionByEvictionAPI\): Eviction API/);
      const listenedFirst = (printed: string[]): boolean => {
        const listening = printed.findIndex((l) => l.includes("hello listening"));
        return listening >= 0 && listening < printed.findIndex((l) => /r1: Evicted \(EvictionByEvictionAPI\)/.test(l));
      };
      await logsWithEvent("evict", pod, listenedFirst);
    },
  );
});
