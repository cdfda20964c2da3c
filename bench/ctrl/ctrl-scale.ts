// ctrl at scale (part of bench/ctrl/ctrl.ts): N deployments (10,000 or 100,000) over 10 regions,
// then ctrl as shipped (`krane ctrl serve`, the compiled dist/) in a child process:
//   - start-up: spawn → "ctrl listening", and its RSS once started, next to the same on an
//     empty database;
//   - one region's full snapshot (N/10 deployments) to a new agent stream, with ctrl's peak RSS;
//   - `krane deployments list -o json` of the whole workspace through the real CLI: how many
//     rows came back and how long it took;
//   - the rollout driver's idle cost: ctrl's CPU time over 10 s with nothing happening (the
//     driver's sweep runs every 2 s);
//   - ctrl's peak RSS over the whole run.
//
// The seed (how it is written, so the figures can be judged) is seedScale's in ./ctrl-store.ts:
// bulk rows, each desired through the domain's setDesiredReplicas, rollouts settled.
import { spawnSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { createClient } from "@connectrpc/connect";
import { RegionService } from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { ClusterService } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { spawnCtrl } from "../../test/integration/ctrl/process.js";
import { transportFor } from "../../test/integration/ctrl/support.js";
import { cpuSeconds, fmtS, KRANE_BIN, load, rssMiB } from "../support.js";
import { SCALE_REGIONS, seedScale, withStore } from "./ctrl-store.js";

const ADMIN_TOKEN = "krane_user_benchscalebenchscalebenchscale0000";

function line(db: string, n: number, what: string, figure: string): void {
  console.log(`ctrl ${db} ${n.toLocaleString("en-US")}: ${what.padEnd(52)} ${figure}   (${load()})`);
}

/** Seeds `n` deployments into a fresh database, then measures ctrl on it (see the header). */
export async function benchCtrlScale(db: string, databaseUrl: string, n: number, emptyUrl: string): Promise<void> {
  // The same start-up on an empty database first: what the machine itself costs (its load
  // varies), so the seeded start-up can be read against it.
  const emptyStart = performance.now();
  const empty = await spawnCtrl(["--database", emptyUrl, "--log-level", "info", "--admin-token", ADMIN_TOKEN]);
  const emptyMs = performance.now() - emptyStart;
  const emptyRss = rssMiB(empty.child.pid ?? 0);
  await empty.stop();

  let seedStart = 0;
  await withStore(databaseUrl, async (store) => {
    seedStart = performance.now();
    await seedScale(store, n);
  });
  const seedMs = performance.now() - seedStart;
  line(
    db,
    n,
    "seed (bulk rows, desired through the domain)",
    `${fmtS(seedMs)} (${((n / seedMs) * 1000).toFixed(0)} deployments/s)`,
  );

  const spawned = performance.now();
  const proc = await spawnCtrl(["--database", databaseUrl, "--log-level", "info", "--admin-token", ADMIN_TOKEN]);
  const startMs = performance.now() - spawned;
  const pid = proc.child.pid ?? 0;
  let peak = rssMiB(pid);
  const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid) || 0)), 10);
  try {
    await sleep(1000);
    line(
      db,
      n,
      "ctrl start-up (spawn → listening), RSS after",
      `${fmtS(startMs)}, ${rssMiB(pid).toFixed(0)} MiB (empty database: ${fmtS(emptyMs)}, ${emptyRss.toFixed(0)} MiB)`,
    );

    const perRegion = n / SCALE_REGIONS;
    const { token } = await createClient(RegionService, transportFor(proc.url, ADMIN_TOKEN)).createClusterToken({
      region: "region-0",
      clusterName: "scale",
    });
    const client = createClient(ClusterService, transportFor(proc.url, token));
    const peakBefore = peak;
    peak = 0;
    const start = performance.now();
    let applies = 0;
    for await (const m of client.watchDeployments({ region: "region-0", versionLastSeen: 0n })) {
      if (m.state.case === "apply") applies++;
      if (m.state.case === "snapshotEnd") break;
    }
    const snapMs = performance.now() - start;
    line(
      db,
      n,
      `snapshot of one region (${perRegion.toLocaleString("en-US")}) to a new agent`,
      `${fmtS(snapMs)}, ${applies} deployments, ctrl peak RSS ${Math.max(peak, rssMiB(pid)).toFixed(0)} MiB`,
    );
    peak = Math.max(peak, peakBefore);

    // The CLI's output goes to a file, as a user's `> all.json` would: 100,000 deployments are
    // about 80 MB of JSON, more than a pipe read into memory should hold (spawnSync's buffer).
    const outDir = mkdtempSync(join(tmpdir(), "krane-bench-list-"));
    let listMs = 0;
    let status: number | null = null;
    let stderr = "";
    let rows = -1;
    try {
      const out = openSync(join(outDir, "list.json"), "w");
      const listStart = performance.now();
      try {
        const res = spawnSync(process.execPath, [KRANE_BIN, "deployments", "list", "-o", "json"], {
          env: { ...process.env, KRANE_CTRL_URL: proc.url, KRANE_TOKEN: ADMIN_TOKEN, KRANE_WORKSPACE: "scale" },
          stdio: ["ignore", out, "pipe"],
          encoding: "utf8",
          timeout: 600_000,
        });
        status = res.status;
        stderr = res.stderr ?? "";
      } finally {
        listMs = performance.now() - listStart;
        closeSync(out);
      }
      if (status === 0)
        rows = (
          (JSON.parse(readFileSync(join(outDir, "list.json"), "utf8")) as { deployments?: unknown[] }).deployments ?? []
        ).length;
    } finally {
      rmSync(outDir, { recursive: true, force: true });
    }
    line(
      db,
      n,
      "krane deployments list -o json (whole workspace)",
      status === 0
        ? `${fmtS(listMs)}, ${rows.toLocaleString("en-US")} of ${n.toLocaleString("en-US")} rows${rows < n ? " (truncated)" : ""}`
        : `failed (${status}) after ${fmtS(listMs)}: ${stderr.slice(0, 200)}`,
    );

    await sleep(1000);
    const cpu0 = cpuSeconds(pid);
    await sleep(10_000);
    const idleCpu = cpuSeconds(pid) - cpu0;
    line(
      db,
      n,
      "idle (rollout sweep every 2 s): ctrl CPU over 10 s",
      `${(idleCpu * 1000).toFixed(0)} ms (${((idleCpu / 10) * 100).toFixed(1)}% of a core), RSS ${rssMiB(pid).toFixed(0)} MiB`,
    );
    line(db, n, "ctrl peak RSS over the run", `${Math.max(peak, rssMiB(pid)).toFixed(0)} MiB`);
  } finally {
    clearInterval(sampler);
    await proc.stop();
  }
}
