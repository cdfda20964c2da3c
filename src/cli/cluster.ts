// `krane cluster build | up | down | status | env`: the real local Kubernetes that tests and
// `krane dev` run against, kept running in the background between commands. The cluster
// harness is loaded only when one of these runs.
import type { Command } from "commander";
import { dirname } from "node:path";
import type { WorkloadImages } from "../cluster/images.js";

const harness = () => import("../cluster/index.js");

const say = (line: string) => console.error(line);

export function registerClusterCommands(program: Command): void {
  const cluster = program
    .command("cluster")
    .description(
      "a real local Kubernetes (etcd, kube-apiserver, controller-manager, scheduler; KWOK nodes, or real ones) on this machine",
    );

  cluster
    .command("build")
    .description("build the local Kubernetes and helm into the cache (the cluster builds its part on first use anyway)")
    .option(
      "--bases",
      "also build the base images of source builds (needs root, mmdebstrap and umoci), beside the Go builds: it is mostly downloads while they are mostly CPU",
    )
    .action(async (opts: { bases?: boolean }) => {
      const { ensureGoBuild, GO_BUILDS } = await harness();
      const t0 = Date.now();
      const bases = opts.bases ? import("../cluster/bases.js").then((b) => b.ensureBases(say)) : undefined;
      // A failed bases build is reported after the Go builds, which it must not cut short.
      bases?.catch(() => {});
      for (const spec of GO_BUILDS) console.log(await ensureGoBuild(spec, say));
      if (bases) console.log(await bases);
      say(`all built or found in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
    });

  cluster
    .command("up")
    .description("start a local cluster in the background and wait until its nodes are Ready")
    .option("--name <name>", "cluster name", "krane")
    .option(
      "--standins",
      "serve Running pods on this machine: user pods answer HTTP, sentinel pods run krane sentinel (a dev and test harness)",
    )
    .option(
      "--real-nodes <pools>",
      "give these node pools a real node each (kubelet, containerd, runc, gVisor) instead of KWOK nodes: untrusted, sentinel, general, or all (needs root)",
    )
    .option(
      "--metrics",
      "run metrics-server against the real nodes: pods' and nodes' CPU and memory at /apis/metrics.k8s.io/v1beta1 (kubectl top); needs --real-nodes",
    )
    .action(async (opts: { name: string; standins?: boolean; realNodes?: string; metrics?: boolean }) => {
      const { startCluster } = await harness();
      const { parseRealNodePools } = await import("../cluster/nodes/plan.js");
      const realNodes = opts.realNodes === undefined ? undefined : parseRealNodePools(opts.realNodes);
      // From a checkout, real nodes also get krane's image and the hello app (built once per source change).
      let images: WorkloadImages | undefined;
      if (realNodes) {
        const { isCheckout } = await import("../cluster/checkout.js");
        if (isCheckout()) images = await (await import("../cluster/images.js")).workloadImages(say);
        else say("not a checkout: the real nodes get only the sandbox image (import your own with ctr)");
      }
      const t0 = Date.now();
      const c = await startCluster({
        name: opts.name,
        detached: true,
        log: say,
        standins: opts.standins ?? false,
        realNodes,
        metrics: opts.metrics ?? false,
        images: images ? [images.krane, images.hello] : undefined,
      });
      if (images) say(`images on the real nodes: ${images.krane.name}, ${images.hello.names.join(", ")}`);
      say(`cluster "${c.name}" is up in ${((Date.now() - t0) / 1000).toFixed(1)}s: ${c.server}`);
      say(`use it with: eval "$(krane cluster env --name ${c.name})"`);
      await printStatus(opts.name);
    });

  cluster
    .command("down")
    .description("stop a local cluster and remove its data")
    .option("--name <name>", "cluster name", "krane")
    .action(async (opts: { name: string }) => {
      const c = await (await harness()).loadCluster(opts.name);
      if (!c) {
        say(`no cluster "${opts.name}" is running`);
        return;
      }
      await c.stop();
      say(`cluster "${opts.name}" stopped`);
    });

  cluster
    .command("status")
    .description("show a local cluster's components, nodes and memory")
    .option("--name <name>", "cluster name", "krane")
    .action(async (opts: { name: string }) => {
      if (!(await printStatus(opts.name))) process.exitCode = 1;
    });

  cluster
    .command("env")
    .description("print the shell exports that point kubectl (and krane) at a local cluster")
    .option("--name <name>", "cluster name", "krane")
    .action(async (opts: { name: string }) => {
      const c = await (await harness()).loadCluster(opts.name);
      if (!c) throw new Error(`no cluster "${opts.name}" is running; start one with krane cluster up`);
      console.log(`export KUBECONFIG=${c.kubeconfigPath}`);
      // The kubectl built with the cluster, so client and server versions match.
      console.log(`export PATH=${dirname(await kubectlPath())}:$PATH`);
    });
}

async function kubectlPath(): Promise<string> {
  return (await (await harness()).ensureKubeAssets(say)).bin.kubectl;
}

async function printStatus(name: string): Promise<boolean> {
  const { getClusterStatus, loadCluster, STANDIN } = await harness();
  const c = await loadCluster(name);
  if (!c) {
    say(`no cluster "${name}" is running; start one with krane cluster up`);
    return false;
  }
  const s = await getClusterStatus(c);
  console.log(`cluster ${s.name}  ${s.server}  Kubernetes ${s.kubeVersion}  api ${s.apiReady ? "ready" : "NOT ready"}`);
  for (const [component, alive] of Object.entries(s.components))
    console.log(`  ${component.padEnd(24)} ${alive ? "running" : "STOPPED"}`);
  console.log(`  nodes ready              ${s.nodesReady}/${s.nodesTotal}  (${s.nodeSummary})`);
  console.log(`  memory (rss)             ${(s.residentBytes / 1024 / 1024).toFixed(0)} MiB`);
  console.log(`  kubeconfig               ${c.kubeconfigPath}`);
  const real = c.realNodes;
  if (real) {
    console.log(`  real nodes               ${real.nodes.map((n) => n.name).join(", ")} (namespace ${real.netns})`);
    console.log(`  pods and Services        ${real.routed}, reachable from this machine`);
  } else if (c.podNetwork)
    console.log(
      `  pod network              ${c.podNetwork.cidr} (served on this machine at ${c.podNetwork.localCidr})`,
    );
  const standin = c.state.pids[STANDIN];
  if (standin !== undefined) {
    const { isAlive } = await import("../cluster/process.js");
    console.log(`  ${STANDIN.padEnd(24)} ${isAlive(standin) ? "running" : "STOPPED"}`);
  }
  const metrics = c.metrics;
  const metricsPid = c.state.pids["metrics-server"];
  if (metrics && metricsPid !== undefined) {
    const { isAlive } = await import("../cluster/process.js");
    console.log(
      `  ${"metrics-server".padEnd(24)} ${isAlive(metricsPid) ? "running" : "STOPPED"} (${metrics.api}, every ${metrics.resolutionSeconds}s)`,
    );
  }
  return s.apiReady && Object.values(s.components).every(Boolean);
}
