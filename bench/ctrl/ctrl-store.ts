// Everything the ctrl benchmarks do below ctrl's public API, in one module: they measure ctrl's
// write path and its streams, not the API in front of them, and seed more deployments than API
// calls could make in a bench's time (each createDeployment runs a rollout pass). So they open
// ctrl's store, seed through the domain (bench size and scale), and make each change a
// transaction of the domain's setDesiredReplicas — the one write every desired replica count
// goes through.
import { Store } from "../../src/ctrl/db/store.js";
import { createRegion } from "../../src/ctrl/domain/clusters.js";
import { createDeployment, loadDeploymentContext, setDesiredReplicas } from "../../src/ctrl/domain/deployments.js";
import { createEnvironment } from "../../src/ctrl/domain/environments.js";
import { createProject, createWorkspace, type EnvironmentContext } from "../../src/ctrl/domain/tenancy.js";
import type { DeploymentContext } from "../../src/ctrl/payloads/deployment.js";
import { validateRollout } from "../../src/ctrl/validate/api.js";

export const BENCH_REGION = "bench";
export const SCALE_REGIONS = 10;
const ENVS_PER_REGION = 100;

/** Runs `fn` on ctrl's store of `databaseUrl` (migrated on open), closing it after. */
export async function withStore<T>(databaseUrl: string, fn: (store: Store) => Promise<T>): Promise<T> {
  const store = await Store.open({ url: databaseUrl });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

/** One change: a seeded deployment desired at `replicas` in BENCH_REGION, in a transaction of its own. */
export function setReplicas(store: Store, ctx: DeploymentContext, replicas: number): Promise<void> {
  return store.write((tx) => setDesiredReplicas(tx, ctx, BENCH_REGION, replicas));
}

/** One region, workspace, project and environment, and `count` deployments desired in the region. */
export async function seedBench(store: Store, count: number): Promise<DeploymentContext[]> {
  await createRegion(store, BENCH_REGION);
  await createWorkspace(store, { slug: "bench", name: "bench" });
  await createProject(store, { workspace: "bench", slug: "app", name: "app" });
  await createEnvironment(store, {
    workspace: "bench",
    project: "app",
    slug: "prod",
    regions: [{ region: BENCH_REGION, replicas: 1 }],
    sentinel: null,
    rollout: validateRollout(undefined),
  });
  const first = await createDeployment(store, {
    workspace: "bench",
    project: "app",
    environment: "prod",
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
  const base = await loadDeploymentContext(store.db, first.deployment.id);
  // Desired explicitly: whether creating a deployment already desires it depends on the rollout
  // driver, which is not what these benchmarks measure.
  await store.write((tx) => setDesiredReplicas(tx, base, BENCH_REGION, 1));
  const out = [base];
  // The rest in bulk, 1,000 per transaction.
  for (let b = 1; b < count; b += 1000) {
    const made = await store.write(async (tx) => {
      const batch: DeploymentContext[] = [];
      for (let i = b; i < Math.min(count, b + 1000); i++) {
        const d = {
          ...base.deployment,
          id: `dep_bench${String(i).padStart(8, "0")}`,
          k8s_name: `app-prod-b${String(i).padStart(7, "0")}`,
          revision: i + 1,
        };
        await tx.trx.insertInto("deployments").values(d).execute();
        const ctx = { ...base, deployment: d };
        await setDesiredReplicas(tx, ctx, BENCH_REGION, 1);
        batch.push(ctx);
      }
      return batch;
    });
    out.push(...made);
  }
  return out;
}

/**
 * Seeds `n` deployments over SCALE_REGIONS regions for bench/ctrl/ctrl-scale.ts: per region one
 * project with 100 environments (createRegion, createProject, createEnvironment through the
 * domain), and n/1,000 deployments per environment. Each deployment row is inserted in bulk (1,000
 * per transaction, not through createDeployment, which would run a rollout pass per deploy) and
 * desired in its region at 1 replica through the domain's setDesiredReplicas (the real write path:
 * desired object + outbox entry). Each environment's rollout record is written as a settled one
 * (every revision seen, no wake-up), as a running installation's is; otherwise the driver's first
 * sweep would start rolling 1,000 environments at once, which is not an idle cost.
 */
export async function seedScale(store: Store, n: number): Promise<void> {
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
            warm_deployment_id: null,
            warm_replicas: 0,
            warm_until: null,
          })
          .execute();
      }
    });
  }
}
