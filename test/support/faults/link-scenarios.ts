// The agent↔ctrl link under faults, on the real processes (`krane ctrl serve`, `krane agent`) and
// a real local cluster, shared by test/integration/faults/link.test.ts (few kills, short
// keepalive, asserted) and `npm run bench -- outages` (20 kills, figures printed):
//  - ctrl killed with SIGKILL at chosen points (the agent quiet, a change in flight, the agent
//    taking its first snapshot, the agent reconnecting to a ctrl that just came back, the moment
//    ctrl listens again) and restarted after 0.1–30 s, with NO change after the restart: how long
//    after ctrl is ready every kind is connected and /readyz answers 200; then a change of every
//    kind made after the restarts reaches the cluster;
//  - ctrl frozen (SIGSTOP): how soon every kind is reported down, how soon after SIGCONT it is up;
//  - through the TCP fault proxy: a blackhole (nothing moves, nothing is reset) and a connection
//    reset in the middle of a frame;
//  - two ctrl replicas on PostgreSQL behind one address: the one the agent streams from killed.
// Every kind the agent runs (deployments, sentinels, jobs, releases) has desired state before the
// agent starts, so after a restart each resumes with a cursor and nothing to say: the case where
// the agent used to report its streams down forever. Scenarios never assert; they return what
// they saw (`problems`, timings).
import { connect } from "node:net";
import { join } from "node:path";
import type { DescService } from "@bufbuild/protobuf";
import type { KubeConfig } from "@kubernetes/client-node";
import { createClient, type Client } from "@connectrpc/connect";
import {
  DeploymentService,
  EnvironmentService,
  StatusService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { JobService } from "../../../src/gen/krane/ctrl/v1/job_pb.js";
import { ReleaseService } from "../../../src/gen/krane/ctrl/v1/release_pb.js";
import { DEFAULT_CTRL_TIMEOUT_MS } from "../../../src/agent/agent.js";
import { agentKubeConfigFrom } from "../../../src/agent/rbac.js";
import { STREAM_KEEPALIVE_SECONDS } from "../../../src/ctrl/server/config.js";
import type { LocalCluster } from "../../../src/cluster/index.js";
import { KubeClient } from "../../../src/kube/client.js";
import { resources } from "../../../src/kube/resources.js";
import { SENTINEL_NAMESPACE } from "../../../src/contracts/cluster.js";
import { LABEL_DEPLOYMENT_ID, LABEL_ENVIRONMENT_ID } from "../../../src/contracts/labels.js";
import { generateToken } from "../../../src/ctrl/domain/tokens.js";
import { transportFor } from "../../integration/ctrl/support.js";
import { TcpProxy } from "./tcp-proxy.js";
import {
  AgentChild,
  CtrlChild,
  freePort,
  metricSum,
  sleep,
  until,
  writeKubeconfig,
  type AgentReadiness,
} from "./processes.js";

/** The kinds the agent runs here (the gateway kind runs only with a Gateway configured). */
export const LINK_KINDS = ["deployments", "sentinels", "jobs", "releases"] as const;
export type LinkKind = (typeof LINK_KINDS)[number];

/** ctrl's name of each stream's kind (its metrics' `kind` label). */
const CTRL_KIND: Record<LinkKind, string> = {
  deployments: "deployment",
  sentinels: "sentinel",
  jobs: "job",
  releases: "release",
};

/** The link's bounds: ctrl's keepalive interval, and how long the agent gives ctrl to answer. */
export interface LinkTimings {
  readonly keepaliveSeconds: number;
  readonly ctrlTimeoutSeconds: number;
}

/** What the tests run with: a silent stream is noticed after 1 s, a stream not accepted in 2 s is retried. */
export const TEST_TIMINGS: LinkTimings = { keepaliveSeconds: 0.5, ctrlTimeoutSeconds: 2 };

/** What `krane ctrl serve` and `krane agent` run with unless told otherwise. */
export const DEFAULT_TIMINGS: LinkTimings = {
  keepaliveSeconds: STREAM_KEEPALIVE_SECONDS.default,
  ctrlTimeoutSeconds: DEFAULT_CTRL_TIMEOUT_MS / 1000,
};

export interface LinkOptions {
  /** Region, workspace and file names; unique per scenario running at once. */
  readonly name: string;
  /** A SQLite file path or a postgres:// URL. */
  readonly database: string;
  /** ctrl processes on the database (more than one: PostgreSQL). */
  readonly replicas?: number;
  /** The agent reaches ctrl through a TCP fault proxy (in front of every replica, in order). */
  readonly proxy?: boolean;
  readonly timings: LinkTimings;
  /** More `krane agent` arguments (e.g. --log-level info to see the link's own log). */
  readonly agentArgs?: readonly string[];
}

/** ctrl (one or more replicas), one environment with a sentinel, one object of every kind, a `krane agent`. */
export class Link {
  readonly admin = generateToken("user");
  readonly ctrls: CtrlChild[] = [];
  agent!: AgentChild;
  proxy: TcpProxy | undefined;
  readonly ref: { workspace: string; project: string; environment: string };
  readonly namespace: string;
  environmentId = "";
  readonly kube: KubeClient;
  #changes = 0;

  private constructor(
    readonly cluster: LocalCluster,
    readonly dir: string,
    readonly o: LinkOptions,
  ) {
    this.ref = { workspace: o.name, project: "web", environment: "prod" };
    this.namespace = `ws-${o.name}`;
    this.kube = new KubeClient(cluster.kubeConfig(), { fieldManager: "link-test" });
  }

  get region(): string {
    return this.o.name;
  }

  /** The first replica (the only one, or the one the proxy prefers). */
  get ctrl(): CtrlChild {
    return this.ctrls[0] as CtrlChild;
  }

  static async start(cluster: LocalCluster, dir: string, o: LinkOptions): Promise<Link> {
    const l = new Link(cluster, dir, o);
    try {
      await l.#start();
      return l;
    } catch (err) {
      await l.close();
      throw err;
    }
  }

  async #start(): Promise<void> {
    const o = this.o;
    const first = await CtrlChild.create(o.database, this.dir, this.admin, [
      "--stream-keepalive",
      String(o.timings.keepaliveSeconds),
    ]);
    this.ctrls.push(first);
    for (let i = 1; i < (o.replicas ?? 1); i++)
      this.ctrls.push(
        new CtrlChild(o.database, first.adminTokenFile, await freePort(), await freePort(), first.extraArgs),
      );
    // Replicas one after the other: each migrates the database at start.
    for (const c of this.ctrls) await c.startReady();
    if (o.proxy)
      this.proxy = await TcpProxy.start({
        target: this.ctrls.map((c) => ({ host: "127.0.0.1", port: c.port })),
      });
    const t = this.#api();
    await createClient(RegionService, t).createRegion({ name: this.region });
    await createClient(WorkspaceService, t).createWorkspace({ slug: this.ref.workspace });
    await createClient(ProjectService, t).createProject({ workspace: this.ref.workspace, slug: "web" });
    const { environment } = await createClient(EnvironmentService, t).createEnvironment({
      workspace: this.ref.workspace,
      project: "web",
      slug: "prod",
      regions: [{ region: this.region, replicas: 1 }],
      sentinel: { image: "", replicas: 1 },
      rollout: { maxSurge: "1", maxUnavailable: "0", revisionHistoryLimit: 100 },
    });
    this.environmentId = environment?.id ?? "";
    // One object of every kind, so every stream resumes with a cursor after a restart.
    await this.client(DeploymentService).createDeployment({ ...this.ref, image: "registry.example.com/web:0" });
    await this.#putJob(1);
    await this.#applyRelease("seed");
    const { token } = await createClient(RegionService, t).createClusterToken({ region: this.region });
    const kubeconfig = writeKubeconfig(
      (await agentKubeConfigFrom(this.cluster.kubeConfig())) as KubeConfig,
      join(this.dir, `${o.name}.kubeconfig`),
    );
    const ctrlUrl = this.proxy ? `http://127.0.0.1:${this.proxy.port}` : first.url;
    this.agent = await AgentChild.create({
      ctrlUrl,
      token,
      region: this.region,
      kubeconfig,
      dir: this.dir,
      agentId: o.name,
      extraArgs: ["--ctrl-timeout", String(o.timings.ctrlTimeoutSeconds), ...(o.agentArgs ?? [])],
    });
    this.agent.start();
  }

  /** A public API client through the first running replica. */
  client<S extends DescService>(service: S): Client<S> {
    return createClient(service, this.#api());
  }

  #api(): ReturnType<typeof transportFor> {
    const c = this.ctrls.find((x) => x.running) ?? this.ctrl;
    return transportFor(c.url, this.admin);
  }

  /** The agent's /readyz, undefined while it does not answer. */
  readiness(): Promise<AgentReadiness | undefined> {
    return this.agent.readiness();
  }

  /** /readyz is 200 and every kind's stream is connected. */
  static allUp(r: AgentReadiness | undefined): boolean {
    return (
      !!r &&
      r.status === 200 &&
      LINK_KINDS.every((k) => r.controllers.some((c) => c.controller === k && c.streamConnected))
    );
  }

  /** /readyz is 503 and every kind's stream is reported down. */
  static allDown(r: AgentReadiness | undefined): boolean {
    return (
      !!r &&
      r.status === 503 &&
      LINK_KINDS.every((k) => r.controllers.some((c) => c.controller === k && !c.streamConnected))
    );
  }

  /** When (unix ms) the agent is fully up, polling every 10 ms; undefined after timeoutMs. */
  upAt(timeoutMs: number): Promise<number | undefined> {
    return until(async () => (Link.allUp(await this.readiness()) ? Date.now() : undefined), timeoutMs, 10);
  }

  /**
   * When (unix ms) every kind is reported down, by the agent's own account (the latest
   * `ctrlDisconnectedSince` in /readyz, so polling adds nothing); undefined after timeoutMs.
   */
  downAt(timeoutMs: number): Promise<number | undefined> {
    return until(
      async () => {
        const r = await this.readiness();
        if (!Link.allDown(r)) return undefined;
        const since = (r?.controllers ?? [])
          .filter((c) => (LINK_KINDS as readonly string[]).includes(c.controller))
          .map((c) => Date.parse(c.ctrlDisconnectedSince ?? ""));
        return since.some(Number.isNaN) ? Date.now() : Math.max(...since);
      },
      timeoutMs,
      10,
    );
  }

  /**
   * ctrl's view of the agent (`krane region clusters`): when (unix ms) its last heartbeat is at or
   * after `since` (LAST SEEN is current), and when it also shows nothing behind (BEHIND 0).
   */
  async heartbeatAfter(since: number, timeoutMs: number): Promise<{ seen?: number; caughtUp?: number }> {
    const ask = async (): Promise<{ at: number; behind: bigint } | undefined> => {
      const { clusters } = await this.client(RegionService).listClusters({ region: this.region }, { timeoutMs: 2000 });
      const c = clusters[0];
      return c && Number(c.lastHeartbeatUnixMs) >= since ? { at: Date.now(), behind: c.changesBehind } : undefined;
    };
    const seen = (await until(ask, timeoutMs, 20))?.at;
    if (seen === undefined) return {};
    const caughtUp = await until(async () => {
      const r = await ask();
      return r && r.behind === 0n ? r.at : undefined;
    }, timeoutMs);
    return { seen, caughtUp };
  }

  /** Streams a ctrl replica serves, per kind (its krane_ctrl_streams_active). */
  async streamsOn(c: CtrlChild): Promise<Record<LinkKind, number>> {
    const out = {} as Record<LinkKind, number>;
    for (const k of LINK_KINDS)
      out[k] = await metricSum(`${c.opsUrl}/metrics`, "krane_ctrl_streams_active", { kind: CTRL_KIND[k] });
    return out;
  }

  /** A new revision; its id. */
  async deploy(image: string, env: { name: string; value: string }[] = []): Promise<string> {
    const { deployment } = await this.client(DeploymentService).createDeployment(
      { ...this.ref, image, env },
      { timeoutMs: 10_000 },
    );
    return deployment?.id ?? "";
  }

  #putJob(minute: number): Promise<unknown> {
    return this.client(JobService).putJob({
      ...this.ref,
      spec: { name: "tick", schedule: `${minute} * * * *` } as never,
    });
  }

  #applyRelease(tag: string): Promise<unknown> {
    return this.client(ReleaseService).applyRelease({
      ...this.ref,
      files: [
        {
          name: "settings.yaml",
          content: `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: link-settings}\ndata: {tag: "${tag}"}`,
        },
      ],
    });
  }

  /**
   * A change of every kind through the API: a new revision, the sentinel's replica count, the
   * job's schedule, the release's ConfigMap. Resolves when each reached the cluster: the time it
   * took per kind (ms), undefined for a kind that did not arrive within `timeoutMs`.
   */
  async changeEveryKind(timeoutMs: number): Promise<Record<LinkKind, number | undefined>> {
    const n = ++this.#changes;
    const started = Date.now();
    const tag = `change-${n}`;
    const sentinelReplicas = n % 2 === 1 ? 2 : 1;
    const minute = 10 + (n % 40);
    const id = await this.deploy(`registry.example.com/web:${tag}`);
    await this.client(EnvironmentService).updateEnvironment({ ...this.ref, sentinel: { replicas: sentinelReplicas } });
    await this.#putJob(minute);
    await this.#applyRelease(tag);
    const byEnv = `${LABEL_ENVIRONMENT_ID}=${this.environmentId}`;
    const arrived = async (check: () => Promise<boolean>): Promise<number | undefined> =>
      until(async () => ((await check().catch(() => false)) ? Date.now() - started : undefined), timeoutMs, 50);
    const [deployments, sentinels, jobs, releases] = await Promise.all([
      arrived(
        async () =>
          (
            await this.kube.list(resources.replicaSets, {
              namespace: this.namespace,
              labelSelector: `${LABEL_DEPLOYMENT_ID}=${id}`,
            })
          ).items.length > 0,
      ),
      arrived(async () => {
        const { items } = await this.kube.list(resources.deployments, {
          namespace: SENTINEL_NAMESPACE,
          labelSelector: byEnv,
        });
        return items.some((d) => (d as { spec?: { replicas?: number } }).spec?.replicas === sentinelReplicas);
      }),
      arrived(async () => {
        const { items } = await this.kube.list(resources.cronJobs, { namespace: this.namespace, labelSelector: byEnv });
        return items.some((c) => (c as { spec?: { schedule?: string } }).spec?.schedule === `${minute} * * * *`);
      }),
      arrived(async () => {
        const cm = await this.kube.get(resources.configMaps, this.namespace, "link-settings");
        return (cm as { data?: Record<string, string> } | undefined)?.data?.tag === tag;
      }),
    ]);
    return { deployments, sentinels, jobs, releases };
  }

  /** What ctrl and the cluster hold for the environment, for a failure's message. */
  async describe(): Promise<string> {
    const json = (v: unknown): string => JSON.stringify(v, (_k, x: unknown) => (typeof x === "bigint" ? String(x) : x));
    const status = await this.client(StatusService)
      .getEnvironmentStatus(this.ref)
      .then(json, (err: unknown) => String(err));
    const rss = await this.kube.list(resources.replicaSets, { namespace: this.namespace }).then(
      ({ items }) =>
        json(
          items.map((r) => {
            const o = r as {
              metadata?: { name?: string; labels?: Record<string, string> };
              spec?: { replicas?: number };
            };
            return [o.metadata?.name, o.metadata?.labels?.[LABEL_DEPLOYMENT_ID], o.spec?.replicas];
          }),
        ),
      (err: unknown) => String(err),
    );
    return `environment status: ${status}\nreplica sets: ${rss}`;
  }

  async close(): Promise<void> {
    await this.agent?.stop();
    await this.proxy?.close();
    for (const c of this.ctrls) {
      c.freeze(false);
      await c.stop();
    }
    this.kube.close();
  }
}

/** Where in the link's life ctrl is killed. */
export type KillPoint = "quiet" | "in-flight" | "snapshot" | "reconnecting" | "listening";

export const KILL_POINTS: readonly KillPoint[] = ["quiet", "in-flight", "snapshot", "reconnecting", "listening"];

export interface KillResult {
  readonly point: KillPoint;
  readonly downMs: number;
  /** From ctrl's /readyz 200 to the agent's /readyz 200 with every kind connected (ms). */
  readonly readyMs: number | undefined;
  /** From ctrl's /readyz 200 to ctrl showing a heartbeat sent after it (LAST SEEN current). */
  readonly heartbeatMs: number | undefined;
  /** … and showing the agent 0 changes behind (BEHIND 0). */
  readonly caughtUpMs: number | undefined;
}

/** Whether a TCP connection to the port opens (a listening process). */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

/** Kills ctrl at `point` (returns with ctrl dead). */
async function killAt(link: Link, point: KillPoint, i: number): Promise<void> {
  const ctrl = link.ctrl;
  switch (point) {
    case "quiet":
      await ctrl.kill9();
      return;
    case "in-flight":
      // A committed change whose stream messages are on their way.
      await link.deploy(`registry.example.com/web:in-flight-${i}`);
      await ctrl.kill9();
      return;
    case "snapshot": {
      // A fresh agent takes its first snapshot; ctrl dies as its first stream message arrives.
      await link.agent.kill9();
      link.agent.start();
      const url = `${link.agent.opsUrl}/metrics`;
      await until(
        async () => ((await metricSum(url, "krane_agent_stream_messages_total")) > 0 ? true : undefined),
        60_000,
        2,
      );
      await ctrl.kill9();
      return;
    }
    case "reconnecting":
      // ctrl comes back and dies again while the agent's attempts reach it.
      await ctrl.kill9();
      await sleep(100);
      ctrl.start();
      await ctrl.ready();
      await sleep(Math.random() * 300);
      await ctrl.kill9();
      return;
    case "listening":
      await ctrl.kill9();
      await sleep(100);
      ctrl.start();
      await until(async () => ((await accepts(ctrl.port)) ? true : undefined), 60_000, 2);
      await ctrl.kill9();
      return;
  }
}

/**
 * ctrl killed with SIGKILL at each of `kills` (a point and how long ctrl then stays down) and
 * restarted on the same database and ports, with no change made after the restart; after each,
 * how long after ctrl is ready the agent is (every kind connected, /readyz 200). Then a change
 * of every kind, made after the last restart, must reach the cluster.
 */
export async function ctrlKills(
  cluster: LocalCluster,
  dir: string,
  o: { name: string; database: string; kills: readonly { point: KillPoint; downMs: number }[]; timings: LinkTimings },
): Promise<{ problems: string[]; kills: KillResult[]; changes: Record<LinkKind, number | undefined> | undefined }> {
  const link = await Link.start(cluster, dir, { name: o.name, database: o.database, timings: o.timings });
  const problems: string[] = [];
  const kills: KillResult[] = [];
  try {
    if ((await link.upAt(90_000)) === undefined)
      return { problems: [`the agent never came up: ${link.agent.output.slice(-2000)}`], kills, changes: undefined };
    for (const [i, k] of o.kills.entries()) {
      await killAt(link, k.point, i);
      if (k.point !== "snapshot" && (await link.downAt(10_000)) === undefined)
        problems.push(`kill ${i + 1} (${k.point}): the agent never reported its streams down`);
      await sleep(k.downMs);
      link.ctrl.start();
      const ready = await link.ctrl.ready();
      const up = await link.upAt(60_000);
      if (up === undefined) problems.push(`kill ${i + 1} (${k.point}, down ${k.downMs} ms): the agent never came back`);
      const beat = await link.heartbeatAfter(ready, 30_000);
      if (beat.caughtUp === undefined)
        problems.push(`kill ${i + 1} (${k.point}): ctrl never showed a current heartbeat with nothing behind`);
      const after = (t: number | undefined): number | undefined =>
        t === undefined ? undefined : Math.max(0, t - ready);
      kills.push({
        point: k.point,
        downMs: k.downMs,
        readyMs: after(up),
        heartbeatMs: after(beat.seen),
        caughtUpMs: after(beat.caughtUp),
      });
    }
    const changes = await link.changeEveryKind(30_000);
    for (const k of LINK_KINDS)
      if (changes[k] === undefined)
        problems.push(
          `a ${k} change made after the restarts did not reach the cluster; ${await link.describe()}\nagent:\n${link.agent.output.slice(-4000)}\nctrl:\n${link.ctrl.output.slice(-4000)}`,
        );
    return { problems, kills, changes };
  } catch (err) {
    problems.push(`${String(err)}\n${link.agent.output.slice(-2000)}`);
    return { problems, kills, changes: undefined };
  } finally {
    await link.close();
  }
}

/**
 * ctrl frozen with SIGSTOP for `freezeMs`, or (through the proxy) a blackhole for as long: no
 * byte moves and nothing is reset. When every kind was reported down after the fault began, and
 * when the agent was fully up again after it ended (ms).
 */
export async function silentLink(
  cluster: LocalCluster,
  dir: string,
  o: { name: string; database: string; fault: "sigstop" | "blackhole"; faultMs: number; timings: LinkTimings },
): Promise<{
  problems: string[];
  downMs?: number;
  upMs?: number;
  downSecondsAtEnd?: Record<string, number>;
  metricDownSecondsAtEnd?: Record<string, number>;
}> {
  const link = await Link.start(cluster, dir, {
    name: o.name,
    database: o.database,
    proxy: o.fault === "blackhole",
    timings: o.timings,
  });
  const problems: string[] = [];
  let faulty = false;
  const fault = (on: boolean): void => {
    faulty = on;
    if (o.fault === "sigstop") link.ctrl.freeze(on);
    else if (on) link.proxy?.partition();
    else link.proxy?.heal();
  };
  try {
    if ((await link.upAt(90_000)) === undefined)
      return { problems: [`the agent never came up: ${link.agent.output.slice(-2000)}`] };
    fault(true);
    const began = Date.now();
    const down = await link.downAt(o.faultMs);
    if (down === undefined) problems.push(`the agent did not report every kind down within ${o.faultMs} ms`);
    const left = o.faultMs - (Date.now() - began);
    if (left > 0) await sleep(left);
    // How long each kind has been down, as /readyz and the metric say just before the fault ends.
    const r = await link.readiness();
    const downSecondsAtEnd = Object.fromEntries((r?.controllers ?? []).map((c) => [c.controller, c.streamDownSeconds]));
    const metricDownSecondsAtEnd: Record<string, number> = {};
    for (const k of LINK_KINDS)
      metricDownSecondsAtEnd[k] = await metricSum(`${link.agent.opsUrl}/metrics`, "krane_agent_stream_down_seconds", {
        controller: k,
      });
    fault(false);
    const ended = Date.now();
    const up = await link.upAt(60_000);
    if (up === undefined) problems.push("the agent did not come back within 60 s after the fault ended");
    return {
      problems,
      downSecondsAtEnd,
      metricDownSecondsAtEnd,
      ...(down !== undefined ? { downMs: down - began } : {}),
      ...(up !== undefined ? { upMs: up - ended } : {}),
    };
  } finally {
    if (faulty) fault(false);
    await link.close();
  }
}

/**
 * Through the proxy: a new revision whose stream message is large (tens of KB of environment),
 * and the connection reset after half of the first large chunk ctrl sends. The agent must drop
 * the torn frame, reconnect, resume and apply the revision as sent.
 */
export async function resetMidFrame(
  cluster: LocalCluster,
  dir: string,
  o: { name: string; database: string; timings: LinkTimings },
): Promise<{ problems: string[]; reconnects?: number; appliedMs?: number; upMs?: number }> {
  const link = await Link.start(cluster, dir, { name: o.name, database: o.database, proxy: true, timings: o.timings });
  const problems: string[] = [];
  try {
    if ((await link.upAt(90_000)) === undefined)
      return { problems: [`the agent never came up: ${link.agent.output.slice(-2000)}`] };
    const reconnects = (): Promise<number> =>
      metricSum(`${link.agent.opsUrl}/metrics`, "krane_agent_stream_reconnects_total", { controller: "deployments" });
    const before = await reconnects();
    const cut = link.proxy?.resetMidFrame(8_000);
    const started = Date.now();
    const pad = [
      { name: "PAD_A", value: "a".repeat(30_000) },
      { name: "PAD_B", value: "b".repeat(30_000) },
    ];
    const id = await link.deploy("registry.example.com/web:large", pad);
    if ((await Promise.race([cut?.then(() => true), sleep(30_000).then(() => false)])) !== true)
      problems.push("no large chunk went through the proxy to cut");
    const applied = await until(
      async () => {
        const { items } = await link.kube.list(resources.replicaSets, {
          namespace: link.namespace,
          labelSelector: `${LABEL_DEPLOYMENT_ID}=${id}`,
        });
        const env = (
          items[0] as {
            spec?: { template?: { spec?: { containers?: { env?: { name: string; value?: string }[] }[] } } };
          }
        )?.spec?.template?.spec?.containers?.[0]?.env;
        const value = (n: string): string | undefined => env?.find((e) => e.name === n)?.value;
        return value("PAD_A") === pad[0]?.value && value("PAD_B") === pad[1]?.value ? Date.now() : undefined;
      },
      30_000,
      50,
    );
    if (applied === undefined) problems.push("the revision whose frame was torn did not reach the cluster as sent");
    const up = await link.upAt(30_000);
    if (up === undefined) problems.push("the agent did not come back after the reset");
    const after = await reconnects();
    if (after <= before) problems.push("the deployments stream did not reconnect after the reset");
    if (!link.agent.running) problems.push(`the agent process ended: ${link.agent.output.slice(-2000)}`);
    return {
      problems,
      reconnects: after - before,
      ...(applied !== undefined ? { appliedMs: applied - started } : {}),
      ...(up !== undefined ? { upMs: up - started } : {}),
    };
  } finally {
    await link.close();
  }
}

/**
 * Two ctrl replicas on one PostgreSQL database behind one address (the proxy: the first replica
 * that accepts); the agent streams from the first. It is killed with SIGKILL: when every kind
 * streams from the other (its krane_ctrl_streams_active) with the agent fully up (ms after the
 * kill). Then a change of every kind through the survivor reaches the cluster.
 */
export async function replicaKilled(
  cluster: LocalCluster,
  dir: string,
  o: { name: string; database: string; timings: LinkTimings },
): Promise<{ problems: string[]; failoverMs?: number; changes?: Record<LinkKind, number | undefined> }> {
  const link = await Link.start(cluster, dir, {
    name: o.name,
    database: o.database,
    replicas: 2,
    proxy: true,
    timings: o.timings,
  });
  const problems: string[] = [];
  const [a, b] = link.ctrls as [CtrlChild, CtrlChild];
  try {
    if ((await link.upAt(90_000)) === undefined)
      return { problems: [`the agent never came up: ${link.agent.output.slice(-2000)}`] };
    const onA = await link.streamsOn(a);
    if (!LINK_KINDS.every((k) => onA[k] >= 1))
      problems.push(`not every kind streams from the first replica: ${JSON.stringify(onA)}`);
    await a.kill9();
    const killed = Date.now();
    const moved = await until(
      async () => {
        const onB = await link.streamsOn(b);
        return LINK_KINDS.every((k) => onB[k] >= 1) && Link.allUp(await link.readiness()) ? Date.now() : undefined;
      },
      30_000,
      10,
    );
    if (moved === undefined) problems.push("the agent's streams did not move to the other replica within 30 s");
    const changes = await link.changeEveryKind(30_000);
    for (const k of LINK_KINDS)
      if (changes[k] === undefined)
        problems.push(`a ${k} change through the surviving replica did not reach the cluster`);
    return { problems, changes, ...(moved !== undefined ? { failoverMs: moved - killed } : {}) };
  } finally {
    await link.close();
  }
}
