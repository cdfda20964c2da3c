// Seed data shared by the ctrl benchmarks: one region, workspace, project and environment, and
// `count` deployments desired in the region.
import type { Store } from "../../src/ctrl/db/store.js";
import { createRegion } from "../../src/ctrl/domain/clusters.js";
import { createDeployment, loadDeploymentContext, setDesiredReplicas } from "../../src/ctrl/domain/deployments.js";
import { createEnvironment } from "../../src/ctrl/domain/environments.js";
import { createProject, createWorkspace } from "../../src/ctrl/domain/tenancy.js";
import type { DeploymentContext } from "../../src/ctrl/payloads/deployment.js";
import { validateRollout } from "../../src/ctrl/validate/api.js";

export const BENCH_REGION = "bench";

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
