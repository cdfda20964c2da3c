// Local cluster figures: how fast a warm build cache is recognised, how long `cluster up`
// takes until every node is Ready, and how much memory the running control plane uses.
import { ensureKubeAssets, startCluster } from "../src/cluster/index.js";

export async function benchCluster(): Promise<void> {
  const t0 = performance.now();
  const assets = await ensureKubeAssets((l) => console.log(`  ${l}`));
  console.log(`cluster: warm cache check            ${(performance.now() - t0).toFixed(0)} ms (${assets.dir})`);

  const runs: number[] = [];
  let rss = 0;
  for (let i = 0; i < 3; i++) {
    const t = performance.now();
    const c = await startCluster({ name: `bench-${i}` });
    runs.push(performance.now() - t);
    await new Promise((r) => setTimeout(r, 5000));
    rss = Math.max(rss, c.residentBytes());
    await c.stop();
  }
  runs.sort((a, b) => a - b);
  console.log(
    `cluster: up until 12 nodes Ready     min ${(runs[0]! / 1000).toFixed(1)} s, median ${(runs[1]! / 1000).toFixed(1)} s (3 runs)`,
  );
  console.log(`cluster: control-plane memory (RSS)  ${(rss / 1024 / 1024).toFixed(0)} MiB, 5 s after start`);
}

if (import.meta.url === `file://${process.argv[1]}`) await benchCluster();
