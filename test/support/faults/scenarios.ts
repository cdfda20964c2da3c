// The fault scenarios on a real cluster, shared by the tests (small sizes,
// asserted) and `npm run bench -- faults` (larger sizes, printed). Each runs the real parts, breaks
// one link between them, lets the fault end, and reports what a user would ask: did it converge,
// how long after the fault ended, and is anything lost, duplicated or applied out of order
// (checks.ts). None of them asserts: the caller decides what the figures must be.
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { Registry } from "prom-client";
import { Agent } from "../../../src/agent/agent.js";
import { silentLogger } from "../../../src/base/log.js";
import type { LocalCluster } from "../../../src/cluster/index.js";
import { isRecord } from "../../../src/kube/object.js";
import { StatusService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { appliedInOrder, desiredHistory, outboxIntegrity, ReplicaSetSampler } from "./checks.js";
import { KubeFaultProxy, randomFaults } from "./kube-proxy.js";
import { AgentChild, sleep, until, writeKubeconfig } from "./processes.js";
import { TcpProxy } from "./tcp-proxy.js";
import { World } from "./world.js";

export interface ScenarioResult {
  readonly name: string;
  /** Nothing lost, duplicated or out of order, and converged. */
  readonly passed: boolean;
  readonly problems: string[];
  /** From the end of each fault to convergence (ms). */
  readonly convergenceMs: number[];
  readonly notes: Record<string, number | string>;
}

/**
 * A KubeConfig with `kc`'s credentials whose server is `server` (a fault proxy on plain HTTP;
 * client-node refuses http:// unless TLS verification is marked off, though there is no TLS).
 */
export function kubeConfigVia(kc: KubeConfig, server: string): KubeConfig {
  const user = kc.getCurrentUser();
  if (!user?.token) throw new Error("kubeConfigVia: the user needs a token");
  const out = new KubeConfig();
  out.loadFromOptions({
    clusters: [{ name: "proxy", server, skipTLSVerify: server.startsWith("http:") }],
    users: [{ name: "u", token: user.token }],
    contexts: [{ name: "c", cluster: "proxy", user: "u" }],
    currentContext: "c",
  });
  return out;
}

function inProcessAgent(w: World, opts: { ctrlUrl?: string; kubeconfig?: KubeConfig; heartbeatMs?: number }): Agent {
  return new Agent({
    ctrlUrl: opts.ctrlUrl ?? w.ctrl.url,
    token: w.agentToken,
    region: w.region,
    kubeconfig: opts.kubeconfig ?? w.agentKubeConfig,
    log: silentLogger,
    registry: new Registry(),
    opsPort: 0,
    opsHost: "127.0.0.1",
    heartbeatMs: opts.heartbeatMs ?? 1000,
    resyncPeriodMs: 30_000,
  });
}

/** The end-of-scenario checks every scenario shares. */
async function finalChecks(w: World, sampler: ReplicaSetSampler, surgeBound: number, since: number): Promise<string[]> {
  const problems: string[] = [];
  if (!(await w.matches())) problems.push("the cluster does not hold what ctrl desires");
  const dups = sampler.duplicates();
  if (dups.length > 0) problems.push(`more than one ReplicaSet for ${dups.join(", ")}`);
  const peak = sampler.maxTotal(since);
  if (peak > surgeBound)
    problems.push(`the environment ran ${peak} replicas at once, above replicas + maxSurge = ${surgeBound}`);
  for (const id of (await w.desired()).keys()) {
    const order = appliedInOrder(await desiredHistory(w.ctrl.store.db, w.region, id), sampler.historyOf(id));
    if (!order.ok) problems.push(`${id}: replica counts applied out of order (${sampler.historyOf(id).join(" → ")})`);
  }
  const outbox = await outboxIntegrity(w.ctrl.store.db);
  problems.push(...outbox.problems);
  return problems;
}

/**
 * Rollouts while the API server answers `rate` of the agent's requests with a fault (5xx, 429
 * with Retry-After, resets, slow answers, cut and silent watches, 410 on watch resume). Each
 * rollout: deploy, faults for `faultMs`, faults off; convergence is timed from faults off.
 */
export async function rolloutUnderApiErrors(
  cluster: LocalCluster,
  o: { rate: number; rollouts: number; faultMs: number; seed: number; replicas: number },
): Promise<ScenarioResult> {
  const w = await World.start(cluster, {
    region: "api-errors",
    environment: "api-errors",
    replicas: o.replicas,
    maxSurge: "1",
    maxUnavailable: "0",
  });
  const proxy = await KubeFaultProxy.start({ server: cluster.endpoint().server, ca: cluster.endpoint().ca ?? "" });
  const agent = inProcessAgent(w, { kubeconfig: kubeConfigVia(w.agentKubeConfig as KubeConfig, proxy.url) });
  const sampler = new ReplicaSetSampler(w.admin, w.namespace, w.environmentId);
  const convergenceMs: number[] = [];
  const problems: string[] = [];
  try {
    await sampler.synced();
    await agent.start();
    await w.deploy("registry.example.com/web:0");
    if ((await w.converged(120_000)) === undefined) problems.push("did not converge before the faults");
    const since = Date.now();
    for (let i = 1; i <= o.rollouts && problems.length === 0; i++) {
      proxy.fault = randomFaults(o.rate, o.seed + i);
      await w.deploy(`registry.example.com/web:${i}`);
      // Open watches are cut every second too, so their resumes (and relists) meet the faults.
      for (let left = o.faultMs; left > 0; left -= 1000) {
        await sleep(Math.min(1000, left));
        proxy.resetAll();
      }
      proxy.fault = undefined;
      const t = await w.converged(180_000);
      if (t === undefined) problems.push(`rollout ${i} did not converge within 180 s after the faults ended`);
      else convergenceMs.push(t);
    }
    problems.push(...(await finalChecks(w, sampler, o.replicas + 1, since)));
    const faulted = proxy.seen.filter((r) => r.fault !== undefined);
    const kinds = new Map<string, number>();
    for (const r of faulted)
      kinds.set(
        r.fault?.kind === "status" ? String(r.fault.status) : (r.fault?.kind ?? ""),
        (kinds.get(r.fault?.kind === "status" ? String(r.fault.status) : (r.fault?.kind ?? "")) ?? 0) + 1,
      );
    return {
      name: `rollout while the API server fails ${Math.round(o.rate * 100)} % of requests`,
      passed: problems.length === 0,
      problems,
      convergenceMs,
      notes: {
        requests: proxy.seen.length,
        faulted: faulted.length,
        watchesFaulted: faulted.filter((r) => r.watch).length,
        kinds: [...kinds].map(([k, n]) => `${k}×${n}`).join(" "),
        rollouts: o.rollouts,
      },
    };
  } finally {
    proxy.fault = undefined;
    await agent.stop();
    await sampler.stop();
    await proxy.close();
    await w.close();
  }
}

/**
 * The agent cut off from ctrl for `partitionMs` (every byte held, new connections unanswered)
 * while changes are made through the public API (a new revision, a scale); then healed. Also
 * reads, during the partition, how far behind ctrl says the region is (Cluster.changes_behind).
 */
export async function agentCtrlPartition(
  cluster: LocalCluster,
  o: { partitionMs: number; replicas: number },
): Promise<ScenarioResult & { behindDuring: number; behindAfter: number }> {
  const w = await World.start(cluster, {
    region: "partition",
    environment: "partition",
    replicas: o.replicas,
    maxSurge: "1",
    maxUnavailable: "0",
  });
  const proxy = await TcpProxy.start({ target: { host: "127.0.0.1", port: Number(new URL(w.ctrl.url).port) } });
  const agent = inProcessAgent(w, { ctrlUrl: `http://127.0.0.1:${proxy.port}` });
  const sampler = new ReplicaSetSampler(w.admin, w.namespace, w.environmentId);
  const problems: string[] = [];
  const behind = async (): Promise<number> => {
    const s = await w.ctrl.client(StatusService, w.ctrl.adminToken).getEnvironmentStatus(w.ref);
    return Number(s.clusters.find((c) => c.region === w.region)?.changesBehind ?? -1n);
  };
  try {
    await sampler.synced();
    await agent.start();
    await w.deploy("registry.example.com/web:0");
    if ((await w.converged(120_000)) === undefined) problems.push("did not converge before the partition");
    await until(async () => ((await behind()) === 0 ? true : undefined), 15_000, 200);
    const since = Date.now();
    proxy.partition();
    await w.deploy("registry.example.com/web:1");
    await sleep(o.partitionMs / 2);
    await w.scale(o.replicas + 1);
    await sleep(o.partitionMs / 2);
    const behindDuring = await behind();
    if (behindDuring <= 0) problems.push(`during the partition ctrl showed ${behindDuring} changes behind`);
    proxy.heal();
    const t = await w.converged(180_000);
    if (t === undefined) problems.push("did not converge within 180 s after the partition healed");
    const behindAfter =
      (await until(async () => ((await behind()) === 0 ? 0 : undefined), 15_000, 200)) ?? (await behind());
    if (behindAfter !== 0) problems.push(`after convergence ctrl still showed ${behindAfter} changes behind`);
    problems.push(...(await finalChecks(w, sampler, o.replicas + 2, since)));
    return {
      name: `agent↔ctrl partitioned for ${o.partitionMs / 1000} s during changes`,
      passed: problems.length === 0,
      problems,
      convergenceMs: t === undefined ? [] : [t],
      notes: { connections: proxy.connections },
      behindDuring,
      behindAfter,
    };
  } finally {
    proxy.heal();
    await agent.stop();
    await sampler.stop();
    await proxy.close();
    await w.close();
  }
}

/**
 * `kill -9` of the agent (a `krane agent` process) every `everyMs` (±50 %) during rollouts; it is
 * restarted after a short pause. Samples the cluster throughout: the surge bound must hold.
 */
export async function agentKilledDuringRollouts(
  cluster: LocalCluster,
  o: { rollouts: number; replicas: number; everyMs: number },
): Promise<ScenarioResult & { kills: number }> {
  const w = await World.start(cluster, {
    region: "agent-kill",
    environment: "agent-kill",
    replicas: o.replicas,
    maxSurge: "2",
    maxUnavailable: "0",
  });
  const kubeconfig = writeKubeconfig(w.agentKubeConfig as KubeConfig, join(w.dir, "agent.kubeconfig"));
  const agent = await AgentChild.create({
    ctrlUrl: w.ctrl.url,
    token: w.agentToken,
    region: w.region,
    kubeconfig,
    dir: w.dir,
    agentId: "killed",
  });
  const sampler = new ReplicaSetSampler(w.admin, w.namespace, w.environmentId);
  const problems: string[] = [];
  const convergenceMs: number[] = [];
  let kills = 0;
  try {
    await sampler.synced();
    agent.start();
    await w.deploy("registry.example.com/web:0");
    if ((await w.converged(120_000)) === undefined)
      problems.push(`did not converge before the kills: ${agent.output.slice(-2000)}`);
    const since = Date.now();
    for (let i = 1; i <= o.rollouts && problems.length === 0; i++) {
      await w.deploy(`registry.example.com/web:${i}`);
      // Kill it mid-rollout, a few times, until the rollout is done.
      for (let round = 0; round < 4 && !(await w.rolloutComplete()); round++) {
        await sleep(o.everyMs * (0.5 + Math.random()));
        await agent.kill9();
        kills++;
        await sleep(200 + Math.random() * 300);
        agent.start();
      }
      const t = await w.converged(180_000);
      if (t === undefined) problems.push(`rollout ${i} did not complete after the kills`);
      else convergenceMs.push(t);
    }
    problems.push(...(await finalChecks(w, sampler, o.replicas + 2, since)));
    return {
      name: "agent kill -9 during rollouts",
      passed: problems.length === 0,
      problems,
      convergenceMs,
      notes: { kills },
      kills,
    };
  } finally {
    await agent.stop();
    await sampler.stop();
    await w.close();
  }
}

/** The Lease's holder and renew time, as the API server has it. */
async function leaseOf(w: World, name: string): Promise<{ holder: string; renew: string } | undefined> {
  const lease = await w.admin
    .raw("GET", `/apis/coordination.k8s.io/v1/namespaces/krane-system/leases/${name}`)
    .catch(() => undefined);
  if (!isRecord(lease) || !isRecord(lease.spec)) return undefined;
  return { holder: String(lease.spec.holderIdentity ?? ""), renew: String(lease.spec.renewTime ?? "") };
}

/**
 * Agent high availability with real processes: two `krane agent --leader-elect` replicas (the
 * production lease timing: 10 s lease, 7 s renew deadline, 2 s retry), each talking to the API
 * server through its own proxy, which records its writes from outside the process.
 *  - `kills` times: SIGKILL of the leader (no lease release); failover = until the API server's
 *    Lease names the other replica; a change made right after the kill must be applied.
 *  - once: SIGSTOP of the leader until the other took over and wrote, then SIGCONT: the old
 *    leader must send no object write after its lease could be taken over (audit: its proxy).
 */
export async function agentFailover(
  cluster: LocalCluster,
  o: { kills: number },
): Promise<ScenarioResult & { failoverMs: number[]; zombieWrites: number; newLeaderWrites: number }> {
  const w = await World.start(cluster, {
    region: "ha",
    environment: "ha",
    replicas: 2,
    maxSurge: "1",
    maxUnavailable: "0",
  });
  const proxies: KubeFaultProxy[] = [];
  const agents: AgentChild[] = [];
  const problems: string[] = [];
  const failoverMs: number[] = [];
  const convergenceMs: number[] = [];
  const leaseName = `krane-agent-${w.region}`;
  let zombieWrites = -1;
  let newLeaderWrites = 0;
  try {
    for (const id of ["replica-a", "replica-b"]) {
      const proxy = await KubeFaultProxy.start({ server: cluster.endpoint().server, ca: cluster.endpoint().ca ?? "" });
      proxies.push(proxy);
      const kubeconfig = writeKubeconfig(w.agentKubeConfig as KubeConfig, join(w.dir, `${id}.kubeconfig`), proxy.url);
      const a = await AgentChild.create({
        ctrlUrl: w.ctrl.url,
        token: w.agentToken,
        region: w.region,
        kubeconfig,
        dir: w.dir,
        agentId: id,
        leaderElect: true,
      });
      agents.push(a);
      a.start();
    }
    await w.deploy("registry.example.com/web:0");
    if ((await w.converged(120_000)) === undefined)
      problems.push(`did not converge with a leader: ${agents.map((a) => a.output.slice(-1000)).join("\n")}`);
    const byId = (id: string): number => agents.findIndex((a) => a.id === id);
    let replicas = 2;
    for (let k = 0; k < o.kills && problems.length === 0; k++) {
      const lease = await until(
        () => leaseOf(w, leaseName).then((l) => (l && byId(l.holder) >= 0 ? l : undefined)),
        30_000,
      );
      if (!lease) {
        problems.push("no leader");
        break;
      }
      const leader = agents[byId(lease.holder)] as AgentChild;
      const other = agents.find((a) => a !== leader) as AgentChild;
      // Kill it at a random point of its renew cycle.
      await sleep(Math.random() * 2000);
      await leader.kill9();
      const killedAt = Date.now();
      replicas = replicas === 2 ? 3 : 2;
      await w.scale(replicas);
      const took = await until(
        () => leaseOf(w, leaseName).then((l) => (l?.holder === other.id ? Date.now() : undefined)),
        60_000,
        50,
      );
      if (took === undefined) {
        problems.push(`kill ${k + 1}: ${other.id} did not take over within 60 s`);
        break;
      }
      failoverMs.push(took - killedAt);
      const t = await w.converged(60_000);
      if (t === undefined)
        problems.push(`kill ${k + 1}: the change made after the kill was not applied by the new leader`);
      else convergenceMs.push(took - killedAt + t);
      leader.start();
    }

    // The zombie: a leader frozen past its lease, then woken.
    if (problems.length === 0) {
      const lease = await until(
        () => leaseOf(w, leaseName).then((l) => (l && byId(l.holder) >= 0 ? l : undefined)),
        30_000,
      );
      const leader = agents[byId(lease?.holder ?? "")];
      const other = agents.find((a) => a !== leader);
      const leaderProxy = proxies[byId(lease?.holder ?? "")];
      const otherProxy = proxies[agents.indexOf(other as AgentChild)];
      if (leader && other && leaderProxy && otherProxy) {
        leader.freeze(true);
        const took = await until(
          () => leaseOf(w, leaseName).then((l) => (l?.holder === other.id ? Date.now() : undefined)),
          60_000,
          50,
        );
        if (took === undefined) problems.push("nobody took over from the frozen leader");
        replicas = replicas === 2 ? 3 : 2;
        await w.scale(replicas);
        if ((await w.converged(60_000)) === undefined)
          problems.push("the new leader did not apply the change made while the old one was frozen");
        newLeaderWrites = otherProxy.writes(took ?? 0).length;
        leader.freeze(false);
        // Awake again: it must find its lease gone before writing anything but the Lease.
        await sleep(8000);
        zombieWrites = leaderProxy.writes(took ?? 0).length;
        if (zombieWrites > 0)
          problems.push(
            `the deposed leader wrote ${zombieWrites} objects after its lease was taken over: ${leaderProxy
              .writes(took ?? 0)
              .map((r) => `${r.method} ${r.path}`)
              .join(", ")}`,
          );
        if (!(await w.matches()))
          problems.push("the cluster no longer holds what ctrl desires after the old leader woke");
      }
    }
    return {
      name: "agent leader killed (SIGKILL) and frozen (SIGSTOP)",
      passed: problems.length === 0,
      problems,
      convergenceMs,
      notes: { kills: failoverMs.length },
      failoverMs,
      zombieWrites,
      newLeaderWrites,
    };
  } finally {
    for (const a of agents) {
      a.freeze(false);
      await a.stop();
    }
    for (const p of proxies) await p.close();
    await w.close();
  }
}
