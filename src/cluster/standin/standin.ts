// The pod stand-in (test and dev harness): KWOK runs no containers, so this watches every pod of
// the local cluster and, for each Running pod with an IP, serves what its container would on the
// pod's local address (pod-network.ts): user pods get the small server of app.ts, sentinel pods a
// real `krane sentinel` process (sentinel-pod.ts). A deleted pod keeps serving for its
// termination delay (annotation), so "a pod leaves the routing table before it stops serving"
// can be tested. On a real cluster the kubelet runs the images; none of this exists there.
import { readFileSync } from "node:fs";
import { KubeConfig } from "@kubernetes/client-node";
import { COMPONENT, LABEL_COMPONENT, LABEL_DEPLOYMENT_ID } from "../../contracts/labels.js";
import { KubeClient } from "../../kube/client.js";
import { isRecord, type KubeObject } from "../../kube/object.js";
import { resources } from "../../kube/resources.js";
import { Informer } from "../../kube/informer.js";
import type { Logger } from "../../base/log.js";
import { cidrContains, parseCidr } from "../../contracts/address-map.js";
import { localAddress, podAddressMap, type PodNetwork } from "../pod-network.js";
import { AppListeners, STANDIN_ANNOTATION, type AppPod, type StandinMode } from "./app.js";
import { SentinelProcesses, type SentinelPod } from "./sentinel-pod.js";

export interface StandinOptions {
  readonly kubeconfigPath: string;
  /** The cluster's directory (per-pod files and logs). */
  readonly dir: string;
  readonly network: PodNetwork;
  /** bin/krane.js, run for sentinel pods. */
  readonly kraneBin: string;
  readonly log: Logger;
}

interface Gone {
  readonly pod: KubeObject;
  readonly until: number;
}

const MODES = new Set<StandinMode>(["serve", "refuse", "reset", "hang"]);

function annotation(pod: KubeObject, key: string): string | undefined {
  return pod.metadata.annotations?.[key];
}

/** A fraction 0–1 (anything else: `def`). */
function fractionAnnotation(pod: KubeObject, key: string, def: number): number {
  const v = annotation(pod, key);
  const n = v === undefined || v.trim() === "" ? NaN : Number(v);
  return Number.isFinite(n) && n >= 0 && n <= 1 ? n : def;
}

function intAnnotation(pod: KubeObject, key: string, def: number): number {
  const v = annotation(pod, key);
  const n = v === undefined ? NaN : Number(v);
  return Number.isInteger(n) && n >= 0 ? n : def;
}

interface ContainerView {
  image: string;
  ports: number[];
  env: Record<string, string>;
}

function firstContainer(pod: KubeObject): ContainerView {
  const spec = isRecord(pod.spec) ? pod.spec : {};
  const containers = Array.isArray(spec.containers) ? spec.containers.filter(isRecord) : [];
  const c = containers[0] ?? {};
  const env: Record<string, string> = {};
  for (const e of Array.isArray(c.env) ? c.env.filter(isRecord) : []) {
    if (typeof e.name === "string" && typeof e.value === "string") env[e.name] = e.value;
  }
  const ports: number[] = [];
  for (const p of Array.isArray(c.ports) ? c.ports.filter(isRecord) : []) {
    if (typeof p.containerPort === "number" && (p.protocol === undefined || p.protocol === "TCP"))
      ports.push(p.containerPort);
  }
  if (ports.length === 0) ports.push(Number(env.PORT) > 0 ? Number(env.PORT) : 8080);
  return { image: typeof c.image === "string" ? c.image : "", ports, env };
}

export class PodStandins {
  readonly #o: StandinOptions;
  readonly #kube: KubeClient;
  readonly #pods: Informer;
  readonly #apps: AppListeners;
  readonly #sentinels: SentinelProcesses;
  readonly #gone = new Map<string, Gone>();
  /** When each pod was first seen terminating (its termination delay counts from then). */
  readonly #terminating = new Map<string, number>();
  readonly #ac = new AbortController();
  readonly #cidr;
  #run: Promise<void> | undefined;
  #chain: Promise<void> = Promise.resolve();
  #pending = false;
  #timer: NodeJS.Timeout | undefined;
  #warned = new Set<string>();

  constructor(o: StandinOptions) {
    this.#o = o;
    const kc = new KubeConfig();
    kc.loadFromFile(o.kubeconfigPath);
    this.#kube = new KubeClient(kc, { qps: 50, burst: 100 });
    this.#cidr = parseCidr(o.network.cidr);
    this.#pods = new Informer({
      resource: resources.pods,
      labelSelector: "",
      client: this.#kube,
      log: o.log,
      timeoutSeconds: 120,
    });
    this.#pods.onChange((type, obj) => {
      const uid = obj.metadata.uid;
      if (uid && obj.metadata.deletionTimestamp && !this.#terminating.has(uid)) this.#terminating.set(uid, Date.now());
      if (type === "deleted" && obj.metadata.uid) {
        const since = this.#terminating.get(obj.metadata.uid) ?? Date.now();
        this.#gone.set(obj.metadata.uid, { pod: obj, until: since + terminationDelayMs(obj) });
      }
      this.#schedule();
    });
    this.#apps = new AppListeners(o.log);
    const cluster = kc.getCurrentCluster();
    this.#sentinels = new SentinelProcesses({
      kube: this.#kube,
      server: cluster?.server ?? "",
      caPem: cluster?.caData
        ? Buffer.from(cluster.caData, "base64").toString("utf8")
        : cluster?.caFile
          ? readFileSync(cluster.caFile, "utf8")
          : "",
      dir: o.dir,
      kraneBin: o.kraneBin,
      podAddressMap: podAddressMap(o.network),
      log: o.log,
      onCrash: () => this.#schedule(),
    });
  }

  /** Starts watching; resolves once the first reconcile is done. */
  async start(): Promise<void> {
    this.#run = this.#pods.run(this.#ac.signal);
    await this.#pods.waitSynced();
    this.#schedule();
    await new Promise<void>((r) => setImmediate(r));
    await this.#chain;
  }

  async stop(): Promise<void> {
    this.#ac.abort();
    if (this.#timer) clearTimeout(this.#timer);
    await this.#run;
    await this.#chain;
    await Promise.all([this.#apps.closeAll(), this.#sentinels.stopAll()]);
    this.#kube.close();
  }

  #schedule(): void {
    if (this.#pending || this.#ac.signal.aborted) return;
    this.#pending = true;
    setImmediate(() => {
      this.#pending = false;
      this.#chain = this.#chain
        .then(() => this.#reconcile())
        .catch((err: unknown) => this.#o.log.error({ err: String(err) }, "stand-in reconcile failed"));
    });
  }

  async #reconcile(): Promise<void> {
    if (this.#ac.signal.aborted) return;
    const now = Date.now();
    let wake = Infinity;
    const serving: KubeObject[] = [];
    const seen = new Set<string>();
    for (const pod of this.#pods.list()) {
      const uid = pod.metadata.uid ?? "";
      seen.add(uid);
      if (pod.metadata.deletionTimestamp) {
        const since = this.#terminating.get(uid) ?? now;
        this.#terminating.set(uid, since);
        const until = since + terminationDelayMs(pod);
        if (now >= until) continue;
        wake = Math.min(wake, until);
      }
      serving.push(pod);
    }
    for (const [uid, g] of this.#gone) {
      if (now >= g.until || seen.has(uid)) {
        this.#gone.delete(uid);
        this.#terminating.delete(uid);
        continue;
      }
      wake = Math.min(wake, g.until);
      serving.push(g.pod);
    }
    for (const uid of this.#terminating.keys())
      if (!seen.has(uid) && !this.#gone.has(uid)) this.#terminating.delete(uid);

    const apps: AppPod[] = [];
    const sentinels: SentinelPod[] = [];
    for (const pod of serving) {
      const status = isRecord(pod.status) ? pod.status : {};
      const spec = isRecord(pod.spec) ? pod.spec : {};
      const ip = typeof status.podIP === "string" ? status.podIP : undefined;
      if (status.phase !== "Running" || !ip || spec.hostNetwork === true) continue;
      const key = `${pod.metadata.namespace}/${pod.metadata.name}`;
      if (!cidrContains(this.#cidr, ip)) {
        if (!this.#warned.has(key))
          this.#o.log.warn({ pod: key, ip }, "pod IP outside the cluster's pod network; not served");
        this.#warned.add(key);
        continue;
      }
      const c = firstContainer(pod);
      const localIp = localAddress(this.#o.network, ip);
      const base = {
        uid: pod.metadata.uid ?? "",
        namespace: pod.metadata.namespace ?? "",
        name: pod.metadata.name ?? "",
      };
      if (pod.metadata.labels?.[LABEL_COMPONENT] === COMPONENT.sentinel) {
        const grace = typeof spec.terminationGracePeriodSeconds === "number" ? spec.terminationGracePeriodSeconds : 30;
        sentinels.push({
          ...base,
          serviceAccount:
            typeof spec.serviceAccountName === "string" && spec.serviceAccountName
              ? spec.serviceAccountName
              : "default",
          mountToken: spec.automountServiceAccountToken !== false,
          env: c.env,
          localIp,
          graceSeconds: grace,
        });
        continue;
      }
      const modeText = annotation(pod, STANDIN_ANNOTATION.mode) ?? "serve";
      const mode: StandinMode = MODES.has(modeText as StandinMode) ? (modeText as StandinMode) : "serve";
      for (const port of c.ports) {
        apps.push({
          ...base,
          revision: pod.metadata.labels?.[LABEL_DEPLOYMENT_ID] ?? "",
          image: c.image,
          node: typeof spec.nodeName === "string" ? spec.nodeName : "",
          podIp: ip,
          port,
          localIp,
          createdAt: Date.parse(pod.metadata.creationTimestamp ?? "") || 0,
          mode,
          status: Math.min(599, Math.max(200, intAnnotation(pod, STANDIN_ANNOTATION.status, 200))),
          latencyMs: intAnnotation(pod, STANDIN_ANNOTATION.latencyMs, 0),
          errorRate: fractionAnnotation(pod, STANDIN_ANNOTATION.errorRate, 0),
        });
      }
    }
    await Promise.all([this.#apps.set(apps), this.#sentinels.set(sentinels)]);
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (wake !== Infinity) this.#timer = setTimeout(() => this.#schedule(), Math.max(1, wake - Date.now()));
  }
}

/**
 * How long a deleted pod's "process" keeps serving: the annotation when set, else what a
 * well-behaved app does on SIGTERM (finish in-flight work, keep accepting briefly while the
 * routers catch up, like a preStop sleep): its grace period, capped at one second.
 */
export function terminationDelayMs(pod: KubeObject): number {
  const spec = pod.spec as { terminationGracePeriodSeconds?: unknown } | undefined;
  const grace =
    typeof spec?.terminationGracePeriodSeconds === "number" ? spec.terminationGracePeriodSeconds * 1000 : 30_000;
  return intAnnotation(pod, STANDIN_ANNOTATION.terminationDelayMs, Math.min(1000, grace));
}
