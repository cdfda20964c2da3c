// The real processes the fault scenarios break: `krane ctrl serve` and `krane agent` as child
// processes on fixed ports (so a restarted ctrl is found where agents look for it), killed with
// SIGKILL (no drain, no lease release) or SIGTERM, stopped and continued, restarted; and the
// readings every scenario takes from outside them — readiness, Prometheus metrics, latencies.
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { KubeConfig } from "@kubernetes/client-node";
import { freePort } from "../ports.js";

export { freePort };

export const KRANE_BIN = new URL("../../../bin/krane.js", import.meta.url).pathname;

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `check` every `everyMs` until it returns a value; undefined after timeoutMs. */
export async function until<T>(
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs: number,
  everyMs = 20,
): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) return undefined;
    await sleep(everyMs);
  }
}

/** An HTTP GET's status (0 when nothing answered), with a short timeout. */
export async function statusOf(url: string, timeoutMs = 500): Promise<number> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

/** One sample of a Prometheus metric (by name and labels) from a /metrics URL, or undefined. */
export async function metric(
  url: string,
  name: string,
  labels: Record<string, string> = {},
): Promise<number | undefined> {
  const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
  const text = await res.text();
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[3] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[4]);
  }
  return undefined;
}

/** The sum of a Prometheus metric's samples (by name, over the samples matching `labels`) from a /metrics URL. */
export async function metricSum(url: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
  let sum = 0;
  for (const line of (await res.text()).split("\n")) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[3] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) sum += Number(m[4]);
  }
  return sum;
}

/** p-th percentile (0..100) of the values, nearest rank; NaN for none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] as number;
}

export function ms(v: number): string {
  return Number.isNaN(v) ? "-" : v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${Math.round(v)} ms`;
}

/** Writes a kubeconfig file for `kc`'s current cluster and user (server overridable: a fault proxy). */
export function writeKubeconfig(kc: KubeConfig, file: string, server?: string): string {
  const cluster = kc.getCurrentCluster();
  const user = kc.getCurrentUser();
  if (!cluster || !user?.token) throw new Error("kubeconfig: need a current cluster and a token user");
  const url = server ?? cluster.server;
  const lines = [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: c",
    "  cluster:",
    `    server: ${url}`,
    ...(url.startsWith("https:") && cluster.caData ? [`    certificate-authority-data: ${cluster.caData}`] : []),
    ...(url.startsWith("https:") && cluster.caFile ? [`    certificate-authority: ${cluster.caFile}`] : []),
    // Plain HTTP (a fault proxy): client-node wants TLS verification marked off to allow it.
    ...(url.startsWith("http:") ? ["    insecure-skip-tls-verify: true"] : []),
    "users:",
    "- name: u",
    "  user:",
    `    token: ${user.token}`,
    "contexts:",
    "- name: c",
    "  context: {cluster: c, user: u}",
    "current-context: c",
  ];
  writeFileSync(file, `${lines.join("\n")}\n`, { mode: 0o600 });
  return file;
}

interface Child {
  child: ChildProcess;
  output: string;
}

/** Every child still running, killed when this process exits however a scenario ended. */
const live = new Set<ChildProcess>();
process.once("exit", () => {
  for (const c of live) c.kill("SIGKILL");
});

function launch(args: string[], env: NodeJS.ProcessEnv = {}): Child {
  const child = spawn(process.execPath, [KRANE_BIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  live.add(child);
  child.once("exit", () => live.delete(child));
  const c: Child = { child, output: "" };
  const keep = (d: Buffer): void => {
    c.output += d.toString();
    if (c.output.length > 2_000_000) c.output = c.output.slice(-1_000_000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  return c;
}

async function kill(c: Child | undefined, signal: NodeJS.Signals): Promise<void> {
  if (!c || c.child.exitCode !== null || c.child.signalCode !== null) return;
  const exited = once(c.child, "exit");
  c.child.kill(signal);
  await exited;
}

/** `krane ctrl serve` on fixed ports, restartable on the same ports and database. */
export class CtrlChild {
  readonly url: string;
  readonly opsUrl: string;
  #c: Child | undefined;

  constructor(
    readonly database: string,
    readonly adminTokenFile: string,
    readonly port: number,
    readonly opsPort: number,
    readonly extraArgs: string[] = [],
  ) {
    this.url = `http://127.0.0.1:${port}`;
    this.opsUrl = `http://127.0.0.1:${opsPort}`;
  }

  static async create(database: string, dir: string, adminToken: string, extraArgs: string[] = []): Promise<CtrlChild> {
    const tokenFile = join(dir, `admin-token-${Math.random().toString(36).slice(2)}`);
    writeFileSync(tokenFile, `${adminToken}\n`, { mode: 0o600 });
    return new CtrlChild(database, tokenFile, await freePort(), await freePort(), extraArgs);
  }

  get pid(): number | undefined {
    return this.#c?.child.pid;
  }

  get output(): string {
    return this.#c?.output ?? "";
  }

  get running(): boolean {
    return !!this.#c && this.#c.child.exitCode === null && this.#c.child.signalCode === null;
  }

  /** Starts the process (not waiting for readiness). */
  start(): void {
    this.#c = launch(
      [
        "ctrl",
        "serve",
        "--database",
        this.database,
        "--admin-token-file",
        this.adminTokenFile,
        "--listen",
        `127.0.0.1:${this.port}`,
        "--ops-listen",
        `127.0.0.1:${this.opsPort}`,
        ...this.extraArgs,
      ],
      { KRANE_LOG_LEVEL: process.env.KRANE_TEST_CTRL_LOG_LEVEL ?? "warn" },
    );
  }

  /** Resolves when /readyz answers 200 (the time it did, unix ms). */
  async ready(timeoutMs = 60_000): Promise<number> {
    const at = await until(
      async () => ((await statusOf(`${this.opsUrl}/readyz`, 300)) === 200 ? Date.now() : undefined),
      timeoutMs,
      10,
    );
    if (at === undefined) throw new Error(`ctrl not ready within ${timeoutMs} ms:\n${this.output.slice(-3000)}`);
    return at;
  }

  async startReady(): Promise<number> {
    this.start();
    return this.ready();
  }

  kill9(): Promise<void> {
    return kill(this.#c, "SIGKILL");
  }

  stop(): Promise<void> {
    return kill(this.#c, "SIGTERM");
  }

  /** SIGSTOP / SIGCONT: connections stay open and say nothing, as a frozen VM or a stuck process. */
  freeze(on: boolean): void {
    this.#c?.child.kill(on ? "SIGSTOP" : "SIGCONT");
  }
}

export interface AgentChildOptions {
  readonly ctrlUrl: string;
  readonly token: string;
  readonly region: string;
  /** A kubeconfig file. */
  readonly kubeconfig: string;
  readonly dir: string;
  readonly agentId?: string;
  readonly leaderElect?: boolean;
  readonly extraArgs?: string[];
}

/** The agent's /readyz answer (the fields the scenarios read). */
export interface AgentReadiness {
  readonly status: number;
  readonly ready: boolean;
  readonly role: string;
  readonly controllers: {
    readonly controller: string;
    readonly streamConnected: boolean;
    readonly streamDownSeconds: number;
    /** ISO time the stream was lost (absent while connected). */
    readonly ctrlDisconnectedSince?: string;
  }[];
}

/** `krane agent` with its ops port known (readiness and metrics from outside). */
export class AgentChild {
  readonly opsUrl: string;
  readonly #o: AgentChildOptions;
  readonly #tokenFile: string;
  #c: Child | undefined;

  private constructor(opts: AgentChildOptions, opsPort: number) {
    this.#o = opts;
    this.opsUrl = `http://127.0.0.1:${opsPort}`;
    this.#tokenFile = join(opts.dir, `agent-token-${opts.agentId ?? "a"}`);
    writeFileSync(this.#tokenFile, `${opts.token}\n`, { mode: 0o600 });
  }

  static async create(opts: AgentChildOptions): Promise<AgentChild> {
    return new AgentChild(opts, await freePort());
  }

  get id(): string {
    return this.#o.agentId ?? "a";
  }

  get pid(): number | undefined {
    return this.#c?.child.pid;
  }

  get output(): string {
    return this.#c?.output ?? "";
  }

  get running(): boolean {
    return !!this.#c && this.#c.child.exitCode === null && this.#c.child.signalCode === null;
  }

  start(): void {
    const o = this.#o;
    this.#c = launch([
      "agent",
      "--ctrl-url",
      o.ctrlUrl,
      "--token-file",
      this.#tokenFile,
      "--region",
      o.region,
      "--kubeconfig",
      o.kubeconfig,
      "--ops-port",
      this.opsUrl.split(":").at(-1) as string,
      "--agent-id",
      this.id,
      "--resync-period",
      "30",
      "--log-level",
      process.env.KRANE_TEST_AGENT_LOG_LEVEL ?? "warn",
      ...(o.leaderElect ? ["--leader-elect"] : []),
      ...(o.extraArgs ?? []),
    ]);
  }

  /** What /readyz says, and its HTTP status (undefined when nothing answers). */
  async readiness(): Promise<AgentReadiness | undefined> {
    try {
      const res = await fetch(`${this.opsUrl}/readyz`, { signal: AbortSignal.timeout(500) });
      return { ...((await res.json()) as Omit<AgentReadiness, "status">), status: res.status };
    } catch {
      return undefined;
    }
  }

  /** Every controller's stream connected to ctrl (the leader's, or a single agent's). */
  async streamsConnected(): Promise<boolean> {
    const r = await this.readiness();
    return !!r && r.controllers.length > 0 && r.controllers.every((c) => c.streamConnected);
  }

  kill9(): Promise<void> {
    return kill(this.#c, "SIGKILL");
  }

  stop(): Promise<void> {
    return kill(this.#c, "SIGTERM");
  }

  /** SIGSTOP / SIGCONT: a frozen process, as a long GC pause or a paused VM. */
  freeze(on: boolean): void {
    this.#c?.child.kill(on ? "SIGSTOP" : "SIGCONT");
  }
}
