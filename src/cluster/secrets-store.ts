// The local cluster's external secret store (a test and dev harness, started by cluster.ts with
// `secretsStore` on a cluster with real nodes): on each real node, the Secrets Store CSI driver
// (SECRETS_STORE_DRIVER_BUILD, ./build.ts) built from its Go module, the driver project's own test
// provider serving the store's content, and a registrar that tells the node's kubelet where the
// driver listens (tools/csi-registrar). The driver runs on this machine, in its mount namespace:
// the tmpfs it mounts for a pod under the kubelet's root propagates to the kubelet's own mount
// namespace and to containerd (nodes/nodes.ts makes that root a shared mount). It reads and
// writes the cluster with the admin kubeconfig, as cert-manager does here; a real cluster installs
// the driver's chart with its own RBAC.
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ensureSecretsStoreDriver } from "./build.js";
import { createIfMissing, getJson, type KubeEndpoint } from "./kube-http.js";
import { nodeDirs } from "./nodes/config.js";
import type { RealNodesPlan } from "./nodes/plan.js";
import { ComponentStartError, logTail, startComponent, waitUntilHealthy, type RunningComponent } from "./process.js";

/** The CSI driver's name: what a pod's `csi.driver` and the agent's SecretProviderClasses' volumes name. */
export const SECRETS_STORE_DRIVER = "secrets-store.csi.k8s.io";
/** The test provider's name: an agent's `--secret-store-provider`. */
export const LOCAL_SECRET_PROVIDER = "krane-fake";

export interface SecretsStoreOptions {
  /** The store's content: object name (the file a pod sees, and the key krane syncs) → value. */
  readonly objects: Readonly<Record<string, string>>;
}

/** What a started store tells its users (ClusterState.secretsStore). */
export interface LocalSecretsStore {
  /** What an agent's --secret-store-provider names. */
  readonly provider: string;
  readonly driver: string;
}

export interface SecretsStoreStart {
  readonly dir: string;
  readonly endpoint: KubeEndpoint;
  readonly kubeconfigPath: string;
  readonly plan: RealNodesPlan;
  readonly options: SecretsStoreOptions;
  readonly log: (line: string) => void;
}

/**
 * The CSIDriver object, as the driver's own deploy/csidriver.yaml declares it: inline (ephemeral)
 * volumes only, the pod's identity passed on mount, no attach step, and a republish on every pod
 * sync (the driver's rotation relies on it).
 */
export const secretsStoreCsiDriver = {
  apiVersion: "storage.k8s.io/v1",
  kind: "CSIDriver",
  metadata: { name: SECRETS_STORE_DRIVER },
  spec: {
    podInfoOnMount: true,
    attachRequired: false,
    volumeLifecycleModes: ["Ephemeral"],
    requiresRepublish: true,
  },
};

/** The process keys (ClusterState.pids) of the store's processes on each node. */
const PROCESSES = ["secrets-store-provider", "secrets-store-csi-driver", "csi-registrar"] as const;
export function isSecretsStoreProcess(key: string): boolean {
  return PROCESSES.some((p) => key.startsWith(`${p}/`));
}

/** Where one node's driver and provider keep their sockets (short: a socket path is at most 107 bytes). */
export function secretsStorePaths(clusterDir: string, node: RealNodesPlan["nodes"][number]) {
  const dirs = nodeDirs(clusterDir, node);
  const root = `${dirs.root}/csi`;
  return {
    driverSocket: `${root}/ss.sock`,
    providers: `${root}/providers`,
    registry: `${dirs.kubeletRoot}/plugins_registry`,
  };
}

interface CsiNode {
  spec?: { drivers?: { name: string }[] | null };
}

/**
 * Starts the store on every real node; resolves once each node's kubelet lists the driver in its
 * CSINode (pods can mount it from then on).
 */
export async function startSecretsStore(
  s: SecretsStoreStart,
  track: (c: RunningComponent, key: string) => Promise<void>,
): Promise<LocalSecretsStore> {
  const bin = await ensureSecretsStoreDriver(s.log);
  await createIfMissing(s.endpoint, "/apis/storage.k8s.io/v1/csidrivers", secretsStoreCsiDriver);
  const store = join(s.dir, "secrets-store.json");
  await writeFile(store, JSON.stringify(s.options.objects), { mode: 0o600 });
  const env = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", KUBECONFIG: s.kubeconfigPath };
  const logs = join(s.dir, "logs");
  await Promise.all(
    s.plan.nodes.map(async (node) => {
      const p = secretsStorePaths(s.dir, node);
      await mkdir(p.providers, { recursive: true, mode: 0o750 });
      const provider = startComponent({
        name: `secrets-store-provider (${node.name})`,
        command: bin.provider,
        args: ["--provider-volume", p.providers, "--name", LOCAL_SECRET_PROVIDER, "--store", store],
        env,
        logFile: join(logs, `secrets-store-provider-${node.name}.log`),
      });
      await track(provider, `${PROCESSES[0]}/${node.name}`);
      const driver = startComponent({
        name: `secrets-store-csi-driver (${node.name})`,
        command: bin.driver,
        args: [
          `--endpoint=unix://${p.driverSocket}`,
          `--nodeid=${node.name}`,
          `--provider-volume=${p.providers}`,
          // Only this node's provider directory (the default also looks under /etc/kubernetes).
          `--additional-provider-volume-paths=${p.providers}`,
          // All real nodes share one network namespace: no listening port of its own.
          "--metrics-addr=0",
          "-v=2",
        ],
        env,
        logFile: join(logs, `secrets-store-csi-driver-${node.name}.log`),
      });
      await track(driver, `${PROCESSES[1]}/${node.name}`);
      const registrar = startComponent({
        name: `csi-registrar (${node.name})`,
        command: bin.registrar,
        args: [
          `--driver-name=${SECRETS_STORE_DRIVER}`,
          `--csi-address=${p.driverSocket}`,
          `--plugin-registration-dir=${p.registry}`,
        ],
        env,
        logFile: join(logs, `csi-registrar-${node.name}.log`),
      });
      await track(registrar, `${PROCESSES[2]}/${node.name}`);
      const registered = async (): Promise<boolean> => {
        const csiNode = await getJson<CsiNode>(s.endpoint, `/apis/storage.k8s.io/v1/csinodes/${node.name}`);
        return (csiNode.spec?.drivers ?? []).some((d) => d.name === SECRETS_STORE_DRIVER);
      };
      // The registrar starts at once; the driver's socket and the kubelet's registration follow.
      try {
        await waitUntilHealthy(driver, registered, 120_000, `register with the kubelet of ${node.name}`);
      } catch (err) {
        for (const c of [registrar, provider])
          if (c.hasExited()) throw new ComponentStartError(c.name, `exited (${await c.exited})`, logTail(c.logFile));
        throw err;
      }
    }),
  );
  return { provider: LOCAL_SECRET_PROVIDER, driver: SECRETS_STORE_DRIVER };
}
