// Helpers for the sentinel's integration tests: a local cluster with pod stand-ins and the
// sentinel RBAC, user pods and sentinel pods, and the routing-table objects written exactly as
// src/contracts/routing.ts says the agent writes them (one EndpointSlice per revision in
// namespace `sentinel`, one policy ConfigMap per sentinel).
import { connect, type Socket } from "node:net";
import { Pool } from "undici";
import {
  NODE_CLASS,
  NODE_CLASS_LABEL,
  SENTINEL_NAMESPACE,
  SENTINEL_PORT,
  SENTINEL_SERVICE_ACCOUNT,
} from "../../../src/contracts/cluster.js";
import {
  COMPONENT,
  LABEL_COMPONENT,
  LABEL_DEPLOYMENT_ID,
  LABEL_ENVIRONMENT_ID,
  LABEL_MANAGED_BY,
  LABEL_REGION,
  MANAGED_BY,
} from "../../../src/contracts/labels.js";
import {
  ENDPOINTSLICE_HEADLESS_LABEL,
  ENDPOINTSLICE_MANAGED_BY,
  ENDPOINTSLICE_MANAGED_BY_LABEL,
  formatRoutingPolicy,
  POLICY_KEY,
  ROUTING_COMPONENT,
  ROUTING_PORT_NAME,
  SENTINEL_OPS_PORT,
  type HoldPolicy,
  type RoutingMode,
  type SentinelStatus,
} from "../../../src/contracts/routing.js";
import type { LocalCluster } from "../../../src/cluster/index.js";
import { KubeClient } from "../../../src/kube/client.js";
import { isRecord, type KubeObject } from "../../../src/kube/object.js";
import { resources } from "../../../src/kube/resources.js";
import type { StandinAnswer } from "../../../src/cluster/standin/app.js";
import { ERROR_HEADER } from "../../../src/sentinel/errors.js";
import { applySentinelRbac } from "../../../src/sentinel/rbac.js";
import { eventually } from "../../support/cluster.js";

export const REGION = "local";
export const APP_NAMESPACE = "ws-sentinel-test";
export const APP_PORT = 8080;

export function routingLabels(environmentId: string, deploymentId?: string): Record<string, string> {
  return {
    [LABEL_MANAGED_BY]: MANAGED_BY,
    [LABEL_COMPONENT]: ROUTING_COMPONENT,
    [LABEL_ENVIRONMENT_ID]: environmentId,
    [LABEL_REGION]: REGION,
    ...(deploymentId ? { [LABEL_DEPLOYMENT_ID]: deploymentId } : {}),
  };
}

export interface SliceEndpoint {
  readonly ip: string;
  readonly pod?: string;
  readonly ready?: boolean;
}

/** Writes the routing table the way the agent does. */
export class RoutingWriter {
  constructor(
    readonly kube: KubeClient,
    readonly environmentId: string,
  ) {}

  sliceName(deploymentId: string): string {
    return `${this.environmentId}-${deploymentId}`.toLowerCase().replace(/[^a-z0-9-]/g, "-");
  }

  async slice(
    deploymentId: string,
    endpoints: readonly SliceEndpoint[],
    port = APP_PORT,
    annotations?: Record<string, string>,
  ): Promise<void> {
    const obj: KubeObject = {
      metadata: {
        name: this.sliceName(deploymentId),
        namespace: SENTINEL_NAMESPACE,
        ...(annotations ? { annotations } : {}),
        labels: {
          ...routingLabels(this.environmentId, deploymentId),
          [ENDPOINTSLICE_MANAGED_BY_LABEL]: ENDPOINTSLICE_MANAGED_BY,
          [ENDPOINTSLICE_HEADLESS_LABEL]: "",
        },
      },
      addressType: "IPv4",
      ports: [{ name: ROUTING_PORT_NAME, port, protocol: "TCP" }],
      endpoints: endpoints.map((e) => ({
        addresses: [e.ip],
        conditions: { ready: e.ready ?? true, serving: e.ready ?? true, terminating: false },
        ...(e.pod ? { targetRef: { kind: "Pod", namespace: APP_NAMESPACE, name: e.pod } } : {}),
      })),
    };
    await this.kube.apply(resources.endpointSlices, obj);
  }

  async deleteSlice(deploymentId: string): Promise<void> {
    await this.kube.delete(resources.endpointSlices, SENTINEL_NAMESPACE, this.sliceName(deploymentId));
  }

  async policy(
    version: number,
    mode: RoutingMode,
    revisions: { deploymentId: string; weight: number }[],
    hold?: HoldPolicy,
  ): Promise<void> {
    await this.kube.apply(resources.configMaps, {
      metadata: {
        name: `${this.sliceName("policy")}`,
        namespace: SENTINEL_NAMESPACE,
        labels: routingLabels(this.environmentId),
      },
      data: {
        [POLICY_KEY]: formatRoutingPolicy({
          version,
          environmentId: this.environmentId,
          mode,
          revisions,
          ...(hold ? { hold } : {}),
        }),
      },
    });
  }
}

export async function ensureNamespace(kube: KubeClient, name: string): Promise<void> {
  await kube.create(resources.namespaces, { metadata: { name } });
}

/**
 * What every sentinel test needs first: the sentinel's RBAC, and the apps' namespace once its
 * default service account exists (pods created before it are refused).
 */
export async function prepareAppNamespace(cluster: LocalCluster, kube: KubeClient): Promise<void> {
  await applySentinelRbac(cluster.kubeConfig());
  await ensureNamespace(kube, APP_NAMESPACE);
  await eventually(
    "the app namespace's default service account",
    async () => (await kube.get(resources.serviceAccounts, APP_NAMESPACE, "default")) ?? undefined,
  );
}

export interface PodRef {
  readonly name: string;
  readonly ip: string;
  /** Where the stand-in serves it on this machine. */
  readonly local: string;
}

async function waitRunning(cluster: LocalCluster, kube: KubeClient, namespace: string, name: string): Promise<PodRef> {
  return eventually(
    `pod ${namespace}/${name} Running with an IP`,
    async () => {
      const p = await kube.get(resources.pods, namespace, name);
      const status = p && isRecord(p.status) ? p.status : {};
      if (status.phase !== "Running" || typeof status.podIP !== "string") return undefined;
      return { name, ip: status.podIP, local: cluster.localAddress(status.podIP) };
    },
    60_000,
  );
}

/** A user pod of one revision, served by the stand-in; resolves once it answers. */
export async function createAppPod(
  cluster: LocalCluster,
  kube: KubeClient,
  name: string,
  deploymentId: string,
  annotations: Record<string, string> = {},
): Promise<PodRef> {
  await kube.create(resources.pods, {
    metadata: {
      name,
      namespace: APP_NAMESPACE,
      labels: { [LABEL_DEPLOYMENT_ID]: deploymentId, app: "sentinel-test" },
      annotations,
    },
    spec: {
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 5,
      containers: [
        {
          name: "app",
          image: `registry.example.com/shop:${deploymentId}`,
          ports: [{ name: "http", containerPort: APP_PORT, protocol: "TCP" }],
        },
      ],
    },
  });
  const ref = await waitRunning(cluster, kube, APP_NAMESPACE, name);
  // As this pod: an answer from another pod at its address (two pods given one IP) would make
  // every later count about this pod wrong in ways hard to read.
  await eventually(
    `the stand-in of ${name} to answer as ${name}`,
    async () => {
      const res = await getJson(`http://${ref.local}:${APP_PORT}/`);
      return res.status === 200 && (res.json as { pod?: unknown } | undefined)?.pod === name ? true : undefined;
    },
    30_000,
  );
  return ref;
}

export async function annotatePod(kube: KubeClient, name: string, annotations: Record<string, string>): Promise<void> {
  const pod = await kube.get(resources.pods, APP_NAMESPACE, name);
  if (!pod) throw new Error(`pod ${name} not found`);
  await kube.apply(resources.pods, { metadata: { name, namespace: APP_NAMESPACE, annotations } }, { force: true });
}

export async function deletePod(kube: KubeClient, namespace: string, name: string): Promise<void> {
  await kube.delete(resources.pods, namespace, name);
}

/** A sentinel pod of the environment (the stand-in runs `krane sentinel` for it); resolves once ready. */
export async function createSentinelPod(
  cluster: LocalCluster,
  kube: KubeClient,
  name: string,
  environmentId: string,
  env: Record<string, string> = {},
): Promise<PodRef> {
  await kube.create(resources.pods, {
    metadata: {
      name,
      namespace: SENTINEL_NAMESPACE,
      labels: {
        [LABEL_MANAGED_BY]: MANAGED_BY,
        [LABEL_COMPONENT]: COMPONENT.sentinel,
        [LABEL_ENVIRONMENT_ID]: environmentId,
        [LABEL_REGION]: REGION,
      },
    },
    spec: {
      serviceAccountName: SENTINEL_SERVICE_ACCOUNT,
      terminationGracePeriodSeconds: 30,
      nodeSelector: { [NODE_CLASS_LABEL]: NODE_CLASS.sentinel },
      tolerations: [{ key: NODE_CLASS_LABEL, operator: "Equal", value: NODE_CLASS.sentinel, effect: "NoSchedule" }],
      containers: [
        {
          name: "sentinel",
          image: "krane/sentinel:dev",
          ports: [{ name: "http", containerPort: SENTINEL_PORT, protocol: "TCP" }],
          env: Object.entries({ KRANE_ENVIRONMENT_ID: environmentId, KRANE_REGION: REGION, ...env }).map(([k, v]) => ({
            name: k,
            value: v,
          })),
        },
      ],
    },
  });
  const ref = await waitRunning(cluster, kube, SENTINEL_NAMESPACE, name);
  await eventually(
    `sentinel ${name} to be ready`,
    async () => ((await getJson(`http://${ref.local}:${SENTINEL_OPS_PORT}/readyz`)).status === 200 ? true : undefined),
    60_000,
  );
  return ref;
}

export async function sentinelStatus(s: PodRef): Promise<SentinelStatus> {
  const r = await getJson(`http://${s.local}:${SENTINEL_OPS_PORT}/status`);
  if (r.status !== 200) throw new Error(`/status answered ${r.status}`);
  return r.json as SentinelStatus;
}

export async function sentinelMetrics(s: PodRef): Promise<string> {
  const res = await fetch(`http://${s.local}:${SENTINEL_OPS_PORT}/metrics`);
  return await res.text();
}

/** The value of one sample in Prometheus text (0 when absent). */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    if (Object.entries(labels).every(([k, v]) => (m[2] ?? "").includes(`${k}="${v}"`))) sum += Number(m[3]);
  }
  return sum;
}

export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  readonly json: unknown;
}

export async function getJson(url: string, init: RequestInit = {}): Promise<Answer> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** A keep-alive client to a sentinel's proxy port. */
export function proxyClient(s: PodRef, connections = 16): Pool {
  return new Pool(`http://${s.local}:${SENTINEL_PORT}`, { connections, pipelining: 1, keepAliveTimeout: 10_000 });
}

export interface Hit {
  readonly status: number;
  readonly answer: StandinAnswer | undefined;
  readonly headers: Record<string, string | string[] | undefined>;
  /** Why the sentinel answered itself (its error header), or the start of a body that is not an instance's answer. */
  readonly cause?: string;
  /** Why no answer came (the client's error). */
  readonly error?: string;
  /** When it was sent, in ms since the load started (openLoad). */
  readonly at?: number;
}

/** One GET through a sentinel (Host shop.example.com); never throws. */
export async function hit(pool: Pool, path = "/", headers: Record<string, string> = {}): Promise<Hit> {
  try {
    const res = await pool.request({
      method: "GET",
      path,
      headers: { host: "shop.example.com", ...headers },
      headersTimeout: 15_000,
      bodyTimeout: 15_000,
    });
    const text = await res.body.text();
    const errorHeader = res.headers[ERROR_HEADER];
    let answer: StandinAnswer | undefined;
    try {
      answer = JSON.parse(text) as StandinAnswer;
    } catch {
      answer = undefined;
    }
    const cause = typeof errorHeader === "string" ? errorHeader : answer === undefined ? text.slice(0, 80) : undefined;
    return { status: res.statusCode, answer, headers: res.headers, cause };
  } catch (err) {
    return {
      status: 0,
      answer: undefined,
      headers: {},
      error: err instanceof Error ? `${(err as { code?: string }).code ?? ""} ${err.message}` : String(err),
    };
  }
}

/** `n` requests, `concurrency` at a time. */
export async function hitMany(
  pool: Pool,
  n: number,
  concurrency = 16,
  path = "/",
  headers: Record<string, string> = {},
): Promise<Hit[]> {
  const out: Hit[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        next++;
        out.push(await hit(pool, path, headers));
      }
    }),
  );
  return out;
}

/** Open-loop load: `rate` requests a second whatever the answers take, until stopped. */
export function openLoad(pool: Pool, rate: number): { stop: () => Promise<Hit[]> } {
  const results: Promise<Hit>[] = [];
  const started = performance.now();
  let running = true;
  const tick = (): void => {
    if (!running) return;
    const due = Math.floor(((performance.now() - started) / 1000) * rate);
    while (results.length < due) {
      const at = performance.now() - started;
      results.push(hit(pool).then((h) => ({ ...h, at })));
    }
    setTimeout(tick, 2);
  };
  tick();
  return {
    stop: async () => {
      running = false;
      return await Promise.all(results);
    },
  };
}

/** What a failed hit says, for assertion messages: status and cause or error. */
export function failure(h: Hit): string {
  return `${h.status} ${h.cause ?? h.error ?? ""}`;
}

/**
 * A Running sentinel pod of an environment (other than `not`), as the local cluster serves it
 * on this machine: its name and proxy URL.
 */
export async function runningSentinel(
  cluster: LocalCluster,
  kube: KubeClient,
  environmentId: string,
  not?: string,
): Promise<{ name: string; url: string }> {
  return eventually(
    `a running sentinel pod of ${environmentId}`,
    async () => {
      const { items } = await kube.list(resources.pods, {
        namespace: SENTINEL_NAMESPACE,
        labelSelector: `${LABEL_COMPONENT}=${COMPONENT.sentinel},${LABEL_ENVIRONMENT_ID}=${environmentId}`,
      });
      for (const pod of items) {
        const st = isRecord(pod.status) ? pod.status : {};
        if (
          pod.metadata.name !== not &&
          !pod.metadata.deletionTimestamp &&
          st.phase === "Running" &&
          typeof st.podIP === "string" &&
          st.podIP !== ""
        ) {
          return { name: pod.metadata.name ?? "", url: `http://${cluster.localAddress(st.podIP)}:${SENTINEL_PORT}` };
        }
      }
      return undefined;
    },
    120_000,
  );
}

export function countBy<T>(items: readonly T[], key: (t: T) => string): Map<string, number> {
  const m = new Map<string, number>();
  for (const i of items) m.set(key(i), (m.get(key(i)) ?? 0) + 1);
  return m;
}

/** Sends raw bytes and returns everything the server sends back until it closes (or timeoutMs). */
export function rawExchange(
  host: string,
  port: number,
  chunks: readonly (string | Buffer)[],
  timeoutMs = 5_000,
  gapMs = 0,
): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve) => {
    const sock: Socket = connect({ host, port });
    let text = "";
    let closed = false;
    const timer = setTimeout(() => {
      sock.destroy();
      resolve({ text, closed });
    }, timeoutMs);
    sock.on("data", (d) => (text += d.toString("latin1")));
    sock.on("close", () => {
      closed = true;
      clearTimeout(timer);
      resolve({ text, closed });
    });
    sock.on("error", () => undefined);
    sock.on("connect", async () => {
      for (const c of chunks) {
        if (sock.destroyed) break;
        sock.write(c);
        if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs));
      }
    });
  });
}

export function kubeFor(cluster: LocalCluster): KubeClient {
  return new KubeClient(cluster.kubeConfig(), { qps: 100, burst: 200 });
}
