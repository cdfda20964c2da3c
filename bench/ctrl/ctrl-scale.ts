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
// The seed (how it is written, so the figures can be judged): per region one project with 100
// environments (createRegion, createProject, createEnvironment through the domain), and N/1,000
// deployments per environment. Each deployment row is inserted in bulk (1,000 per transaction,
// not through createDeployment, which would run a rollout pass per deploy) and desired in its
// region at 1 replica through the domain's setDesiredReplicas (the real write path: desired
// object + outbox entry). Each environment's rollout record is written as a settled one (every
// revision seen, no wake-up), as a running installation's is; otherwise the driver's first sweep
// would start rolling 1,000 environments at once, which is not an idle cost.
import { spawnSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { createClient } from "@connectrpc/connect";
import { Store } from "../../src/ctrl/db/store.js";
import { createRegion, issueClusterToken } from "../../src/ctrl/domain/clusters.js";
import { createDeployment, loadDeploymentContext, setDesiredReplicas } from "../../src/ctrl/domain/deployments.js";
import { createEnvironment } from "../../src/ctrl/domain/environments.js";
import { createProject, createWorkspace, type EnvironmentContext } from "../../src/ctrl/domain/tenancy.js";
import type { DeploymentContext } from "../../src/ctrl/payloads/deployment.js";
import { validateRollout } from "../../src/ctrl/validate/api.js";
import { ClusterService } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { spawnCtrl } from "../../test/integration/ctrl/process.js";
import { transportFor } from "../../test/integration/ctrl/support.js";
import { cpuSeconds, fmtS, KRANE_BIN, load, rssMiB } from "../support.js";

export const SCALE_REGIONS = 10;
const ENVS_PER_REGION = 100;
const ADMIN_TOKEN = "krane_user_benchscalebenchscalebenchscale0000";

function line(db: string, n: number, what: string, figure: string): void {
  console.log(`ctrl ${db} ${n.toLocaleString("en-US")}: ${what.padEnd(52)} ${figure}   (${load()})`);
}

/** Seeds `n` deployments over 10 regions (see the header); answers a cluster token for region 0. */
export async function seedScale(store: Store, n: number): Promise<{ token: string }> {
  const perEnv = Math.max(1, Math.round(n / SCALE_REGIONS / ENVS_PER_REGION));
  await createWorkspace(store, { slug: "scale", name: "scale" });
  let base: DeploymentContext | null = null;
  for (let r = 0; r < SCALE_REGIONS; r++) {
    const region = `region-${r}`;
    const project = `p${r}`;
    await createRegion(store, region);
    await createProject(store, { workspace: "scale", slug: project, name: project });
    const envs: EnvironmentContext[] = [];
    for (let e = 0; e < ENVS_PER_REGION; e++) {
      envs.push(
        await createEnvironment(store, {
          workspace: "scale",
          project,
          slug: `e${e}`,
          regions: [{ region, replicas: 1 }],
          sentinel: null,
          rollout: validateRollout(undefined),
        }),
      );
    }
    if (base === null) {
      const first = await createDeployment(store, {
        workspace: "scale",
        project,
        environment: "e0",
        image: "registry.example.com/app:1",
        command: ["node"],
        args: ["server.js"],
        port: 8080,
        env: [{ name: "MODE", value: "bench" }],
        cpuMillicores: 250,
        memoryMib: 256,
        healthCheck: null,
        buildId: "build-1",
        replicas: null,
      });
      base = await loadDeploymentContext(store.db, first.deployment.id);
      // The template's own row stays (revision 1 of region-0/p0/e0); its clones start at revision 2 there.
      await store.write((tx) => setDesiredReplicas(tx, base as DeploymentContext, region, 1));
    }
    const template: DeploymentContext = base;
    // Every environment's deployments, 1,000 per transaction.
    const rows: { ctx: DeploymentContext }[] = [];
    for (const env of envs) {
      const skip = env.environment.id === template.environment.id ? 1 : 0;
      for (let rev = 1 + skip; rev <= perEnv; rev++) {
        const id = `dep_s${String(r)}${String(env.environment.slug).padStart(4, "0")}${String(rev).padStart(6, "0")}`;
        const deployment = {
          ...template.deployment,
          id,
          workspace_id: env.workspace.id,
          project_id: env.project.id,
          environment_id: env.environment.id,
          revision: rev,
          k8s_name: `${project}-${env.environment.slug}-r${String(rev).padStart(7, "0")}`,
        };
        rows.push({ ctx: { ...env, deployment } });
      }
    }
    // Four transactions at a time (PostgreSQL runs them on separate connections; SQLite's
    // writer takes them in turn).
    const batches: (typeof rows)[] = [];
    for (let b = 0; b < rows.length; b += 1000) batches.push(rows.slice(b, b + 1000));
    const writeBatches = async (): Promise<void> => {
      for (let batch = batches.shift(); batch; batch = batches.shift()) {
        const these = batch;
        await store.write(async (tx) => {
          await tx.trx
            .insertInto("deployments")
            .values(these.map((x) => x.ctx.deployment))
            .execute();
          for (const x of these) await setDesiredReplicas(tx, x.ctx, region, 1);
        });
      }
    };
    await Promise.all([writeBatches(), writeBatches(), writeBatches(), writeBatches()]);
    // Settled rollout records: every revision seen, no wake-up.
    await store.write(async (tx) => {
      for (const env of envs) {
        await tx.trx
          .updateTable("environments")
          .set({ last_revision: perEnv })
          .where("id", "=", env.environment.id)
          .execute();
        await tx.trx
          .insertInto("rollouts")
          .values({
            environment_id: env.environment.id,
            region,
            target_deployment_id: null,
            target_seen_revision: perEnv,
            rollback_to: null,
            status: "{}",
            conditions: "[]",
            observed_spec: "",
            requeue_at: null,
            updated_at: tx.now,
          })
          .execute();
      }
    });
  }
  return { token: (await issueClusterToken(store, "region-0", "scale")).token };
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

  const store = await Store.open({ url: databaseUrl });
  let token: string;
  const seedStart = performance.now();
  try {
    token = (await seedScale(store, n)).token;
  } finally {
    await store.close();
  }
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
