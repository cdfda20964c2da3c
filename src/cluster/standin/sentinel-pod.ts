// The stand-in for a sentinel pod (test and dev harness): a real `krane sentinel` process on the
// pod's local address, with what the kubelet would give the pod: its container's environment
// (KRANE_ENVIRONMENT_ID, KRANE_REGION, …) and, unless the pod opts out with
// automountServiceAccountToken: false, a token for its ServiceAccount issued by the API server
// (TokenRequest bound to the pod, refreshed at 80% of its life) in a kubeconfig that re-reads
// the token file. The process never inherits the harness's own credentials. Deleting the pod
// sends SIGTERM (the sentinel drains) and SIGKILL after the pod's grace period.
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { SENTINEL_PORT } from "../../contracts/cluster.js";
import { SENTINEL_OPS_PORT } from "../../contracts/routing.js";
import type { KubeClient } from "../../kube/client.js";
import { isRecord } from "../../kube/object.js";
import type { Logger } from "../../base/log.js";

export interface SentinelPod {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  readonly serviceAccount: string;
  readonly mountToken: boolean;
  readonly env: Readonly<Record<string, string>>;
  readonly localIp: string;
  readonly graceSeconds: number;
}

export interface SentinelProcessOptions {
  /** Admin client of the cluster (issues the pods' tokens). */
  readonly kube: KubeClient;
  readonly server: string;
  readonly caPem: string;
  /** Per-pod files (token, kubeconfig) and logs go under here. */
  readonly dir: string;
  /** bin/krane.js. */
  readonly kraneBin: string;
  readonly podAddressMap: string;
  readonly log: Logger;
  /** A sentinel exited while its pod still exists (the caller restarts it, as a kubelet would). */
  readonly onCrash?: () => void;
}

interface Running {
  readonly pod: SentinelPod;
  readonly child: ChildProcess;
  exited: Promise<void>;
  readonly files: string;
  refresh: NodeJS.Timeout | undefined;
  stopping: boolean;
}

/** Environment variables a sentinel process may inherit from the harness (never credentials). */
const INHERITED = ["PATH", "HOME", "TMPDIR", "LANG", "TZ", "NODE_OPTIONS", "TSX_TSCONFIG_PATH"];

function kubeconfigYaml(server: string, caPem: string, tokenFile: string | undefined): string {
  const user = tokenFile ? { "auth-provider": { name: "tokenFile", config: { tokenFile } } } : {};
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    "current-context": "pod",
    clusters: [
      { name: "local", cluster: { server, "certificate-authority-data": Buffer.from(caPem).toString("base64") } },
    ],
    users: [{ name: "pod", user }],
    contexts: [{ name: "pod", context: { cluster: "local", user: "pod", namespace: "sentinel" } }],
  });
}

export class SentinelProcesses {
  readonly #o: SentinelProcessOptions;
  readonly #running = new Map<string, Running>();
  /** Pods whose sentinel is being started. */
  readonly #starting = new Set<string>();
  /** Sentinels draining after their pod left, by local address. */
  readonly #stopping = new Map<string, Running>();

  constructor(o: SentinelProcessOptions) {
    this.#o = o;
  }

  get size(): number {
    return this.#running.size;
  }

  /**
   * Runs a sentinel for every pod in `pods` and stops the others. Stops run in the background (a
   * sentinel's drain takes seconds, and other pods must not wait for it). A stopping pod whose
   * address a wanted pod now has (KWOK hands a deleted pod's IP out again at once, which a real
   * node never does while the old sandbox lives) stops at once with SIGINT, and the new pod starts
   * after it has exited: otherwise the new pod's address would reach the old process for its whole
   * drain.
   */
  async set(pods: readonly SentinelPod[]): Promise<void> {
    const want = new Map(pods.map((p) => [p.uid, p]));
    for (const [uid, r] of this.#running)
      if (!want.has(uid))
        this.#stop(r).catch((err: unknown) =>
          this.#o.log.warn({ pod: `${r.pod.namespace}/${r.pod.name}`, err: String(err) }, "sentinel stop failed"),
        );
    const starts: Promise<void>[] = [];
    for (const [uid, p] of want) {
      if (this.#running.has(uid) || this.#starting.has(uid)) continue;
      this.#starting.add(uid);
      starts.push(
        (async () => {
          const holder = this.#stopping.get(p.localIp);
          if (holder) {
            holder.child.kill("SIGINT");
            await holder.exited;
          }
          await this.#start(p);
        })().finally(() => this.#starting.delete(uid)),
      );
    }
    await Promise.all(starts);
  }

  /**
   * The stand-in itself stops (the cluster goes away): SIGINT, so the sentinels finish what is in
   * flight without the drain delay a deleted pod's SIGTERM gets (no endpoints are withdrawn here).
   */
  async stopAll(): Promise<void> {
    const draining = [...this.#stopping.values()];
    for (const r of draining) r.child.kill("SIGINT");
    await Promise.all([
      ...[...this.#running.values()].map((r) => this.#stop(r, "SIGINT")),
      ...draining.map((r) => r.exited),
    ]);
  }

  async #issueToken(pod: SentinelPod, file: string): Promise<number> {
    const path = `/api/v1/namespaces/${encodeURIComponent(pod.namespace)}/serviceaccounts/${encodeURIComponent(pod.serviceAccount)}/token`;
    const answer = await this.#o.kube.raw("POST", path, {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: {
        expirationSeconds: 3600,
        boundObjectRef: { apiVersion: "v1", kind: "Pod", name: pod.name, uid: pod.uid },
      },
    });
    const status = isRecord(answer) && isRecord(answer.status) ? answer.status : {};
    if (typeof status.token !== "string")
      throw new Error(`TokenRequest for ${pod.namespace}/${pod.serviceAccount}: no token in the answer`);
    await writeFile(file, status.token, { mode: 0o600 });
    const expires =
      typeof status.expirationTimestamp === "string" ? Date.parse(status.expirationTimestamp) : Date.now() + 3_600_000;
    return Math.max(10_000, (expires - Date.now()) * 0.8);
  }

  async #start(pod: SentinelPod): Promise<void> {
    const files = join(this.#o.dir, "pods", `${pod.namespace}_${pod.name}_${pod.uid.slice(0, 8)}`);
    await mkdir(files, { recursive: true });
    const tokenFile = join(files, "token");
    let refreshIn: number | undefined;
    if (pod.mountToken) {
      try {
        refreshIn = await this.#issueToken(pod, tokenFile);
      } catch (err) {
        // As a kubelet would: the pod does not start without its token; the next change retries.
        this.#o.log.error(
          { pod: `${pod.namespace}/${pod.name}`, err: err instanceof Error ? err.message : String(err) },
          "no service account token for the sentinel pod",
        );
        return;
      }
    } else {
      this.#o.log.warn(
        { pod: `${pod.namespace}/${pod.name}` },
        "sentinel pod has automountServiceAccountToken: false; its sentinel runs without credentials and cannot read its routing table",
      );
    }
    const kubeconfig = join(files, "kubeconfig");
    await writeFile(kubeconfig, kubeconfigYaml(this.#o.server, this.#o.caPem, pod.mountToken ? tokenFile : undefined), {
      mode: 0o600,
    });
    const env: NodeJS.ProcessEnv = {};
    for (const k of INHERITED) if (process.env[k] !== undefined) env[k] = process.env[k];
    Object.assign(env, pod.env);
    const logFile = join(this.#o.dir, "logs", `sentinel-${pod.namespace}-${pod.name}.log`);
    const fd = openSync(logFile, "a");
    const child = spawn(
      process.execPath,
      [
        this.#o.kraneBin,
        "sentinel",
        "--listen",
        pod.localIp,
        "--port",
        String(SENTINEL_PORT),
        "--ops-port",
        String(SENTINEL_OPS_PORT),
        "--kubeconfig",
        kubeconfig,
        "--pod-address-map",
        this.#o.podAddressMap,
      ],
      { env, stdio: ["ignore", fd, fd] },
    );
    closeSync(fd);
    const r: Running = { pod, child, exited: Promise.resolve(), files, refresh: undefined, stopping: false };
    const exited = new Promise<void>((resolve) => {
      const done = (code: number | null, signal: string | null): void => {
        this.#o.log.info({ pod: `${pod.namespace}/${pod.name}`, code, signal }, "sentinel process exited");
        if (!r.stopping && this.#running.get(pod.uid) === r) {
          this.#running.delete(pod.uid);
          if (r.refresh) clearTimeout(r.refresh);
          setTimeout(() => this.#o.onCrash?.(), 1000).unref();
        }
        resolve();
      };
      child.once("exit", done);
      child.once("error", () => done(null, null));
    });
    r.exited = exited;
    const schedule = (ms: number): void => {
      r.refresh = setTimeout(() => {
        this.#issueToken(pod, tokenFile).then(schedule, (err: unknown) => {
          this.#o.log.warn({ pod: pod.name, err: String(err) }, "token refresh failed; retrying in 10 s");
          schedule(10_000);
        });
      }, ms);
      r.refresh.unref();
    };
    if (refreshIn !== undefined) schedule(refreshIn);
    this.#running.set(pod.uid, r);
    this.#o.log.info(
      { pod: `${pod.namespace}/${pod.name}`, address: `${pod.localIp}:${SENTINEL_PORT}`, pid: child.pid },
      "sentinel process started",
    );
  }

  async #stop(r: Running, signal: "SIGTERM" | "SIGINT" = "SIGTERM"): Promise<void> {
    this.#running.delete(r.pod.uid);
    r.stopping = true;
    this.#stopping.set(r.pod.localIp, r);
    if (r.refresh) clearTimeout(r.refresh);
    r.child.kill(signal);
    const kill = setTimeout(() => r.child.kill("SIGKILL"), r.pod.graceSeconds * 1000);
    await r.exited;
    clearTimeout(kill);
    if (this.#stopping.get(r.pod.localIp) === r) this.#stopping.delete(r.pod.localIp);
    await rm(r.files, { recursive: true, force: true });
  }
}
