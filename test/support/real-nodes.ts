// A local cluster with real nodes for a test file (src/cluster/nodes): krane's image and the
// hello image are built from the checkout (cached by its sources) and imported into every real
// node; kubectl and the krane CLI run against it as an operator would.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { ensureKubeAssets, type LocalCluster, type StartOptions } from "../../src/cluster/index.js";
import { workloadImages, type WorkloadImages } from "../../src/cluster/images.js";
import { realNodeSupport } from "../../src/cluster/nodes/host.js";
import type { NodePool } from "../../src/cluster/topology.js";
import { REPO } from "../../src/cluster/checkout.js";
import { useCluster, type ClusterHandle } from "./cluster.js";

const run = promisify(execFile);

/** Why this machine cannot run the file's real-node tests (node:test's `skip`), or false. */
export async function realNodesSkip(): Promise<string | false> {
  const s = await realNodeSupport();
  return s.ok ? false : s.reason;
}

export interface RealClusterHandle extends ClusterHandle {
  /** Resolves with the images once built (before the cluster starts). */
  images(): Promise<WorkloadImages>;
}

/** useCluster with real nodes for `pools`, krane's image and the hello image imported into them. */
export function useRealCluster(
  pools: NodePool[],
  opts: Omit<StartOptions, "name" | "detached" | "realNodes" | "images"> = {},
): RealClusterHandle {
  let built: Promise<WorkloadImages> | undefined;
  const images = (): Promise<WorkloadImages> => (built ??= workloadImages());
  const h = useCluster(async () => {
    const i = await images();
    return { ...opts, realNodes: pools, images: [i.krane, i.hello] };
  });
  return {
    ready: h.ready,
    images,
    get cluster(): LocalCluster {
      return h.cluster;
    },
  };
}

export interface Out {
  code: number;
  stdout: string;
  stderr: string;
}

/** What kubectl needs of a cluster (a cluster another process started has only its kubeconfig). */
type KubectlTarget = Pick<LocalCluster, "kubeconfigPath">;

/** Runs kubectl (the one built with the cluster) against `cluster`. */
export async function kubectl(cluster: KubectlTarget, args: string[], input?: string): Promise<Out> {
  const bin = (await ensureKubeAssets()).bin.kubectl;
  const p = run(bin, args, {
    env: { ...process.env, KUBECONFIG: cluster.kubeconfigPath },
    maxBuffer: 64 * 1024 * 1024,
  });
  if (input !== undefined) p.child.stdin?.end(input);
  try {
    const { stdout, stderr } = await p;
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === "number" ? e.code : 1, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

/** kubectl that must succeed; its stdout. */
export async function kubectlOk(cluster: KubectlTarget, args: string[], input?: string): Promise<string> {
  const r = await kubectl(cluster, args, input);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

/** `kubectl get … -o json`, parsed. */
export async function kubectlJson<T>(cluster: KubectlTarget, args: string[]): Promise<T> {
  return JSON.parse(await kubectlOk(cluster, ["get", ...args, "-o", "json"])) as T;
}

/** The krane CLI of the checkout, as a user runs it. */
export async function krane(env: Record<string, string>, args: string[]): Promise<string> {
  try {
    const { stdout } = await run(process.execPath, [`${REPO}bin/krane.js`, ...args], {
      env: { ...process.env, ...env },
      maxBuffer: 16 * 1024 * 1024,
    });
    return stdout;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`krane ${args.join(" ")}: ${e.stderr || e.stdout || e.message}`);
  }
}

/** `kubectl port-forward` to a Service, as the chart's notes say; stop() ends it. */
export async function portForward(
  cluster: KubectlTarget,
  namespace: string,
  target: string,
  port: number,
): Promise<{ url: string; stop(): Promise<void> }> {
  const bin = (await ensureKubeAssets()).bin.kubectl;
  const child: ChildProcess = spawn(
    bin,
    ["port-forward", "-n", namespace, target, `:${port}`, "--address", "127.0.0.1"],
    {
      env: { ...process.env, KUBECONFIG: cluster.kubeconfigPath },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  const local = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`port-forward did not start: ${stderr}`)), 60_000);
    child.once("exit", (code) => reject(new Error(`port-forward exited with ${code}: ${stderr}`)));
    createInterface({ input: child.stdout! }).on("line", (line) => {
      const m = /Forwarding from 127\.0\.0\.1:(\d+)/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
  });
  return {
    url: `http://127.0.0.1:${local}`,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, "exit");
      child.kill("SIGTERM");
      await exited;
    },
  };
}
