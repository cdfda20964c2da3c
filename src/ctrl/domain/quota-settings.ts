// Setting a workspace's quotas (`krane quota set`) or the installation's defaults (`ctrl serve
// --default-quota`): the rows (./quotas.ts) and, in the same transaction, the workloads of every
// workspace whose backed limits changed rendered again (./workload-refresh.ts), since each
// ApplyDeployment, ApplyJob and ApplyRelease carries the quota the agent backs with a
// ResourceQuota in the workspace namespace (src/agent/deployments/quota.ts): the namespaces
// follow at once, not at the next deploy.
import { aboveCeiling, formatLimit, type Limits, type QuotaName, type QuotaSetting } from "../../contracts/quotas.js";
import type { Store } from "../db/store.js";
import { DomainError } from "../errors.js";
import { installationDefaults, limitsOf, setInstallationDefaultsIn, setQuotasIn } from "./quotas.js";
import { refreshWorkspaceWorkloads } from "./workload-refresh.js";

/**
 * Sets a workspace's quotas. Only an installation caller may go above the installation's
 * defaults (permission_denied naming the quota otherwise). A limit below use is kept: the
 * workspace shows as over it and can only shrink.
 */
export async function setQuotas(
  store: Store,
  workspaceId: string,
  settings: ReadonlyMap<QuotaName, QuotaSetting>,
  caller: "installation" | "workspace",
): Promise<void> {
  await store.write(async (tx) => {
    if (caller !== "installation") {
      const over = aboveCeiling(settings, await installationDefaults(tx.trx));
      if (over)
        throw new DomainError(
          "permission_denied",
          `${over.quota}: ${formatLimit(over.quota, over.asked)} is above the installation's default of ${formatLimit(over.quota, over.ceiling)}, which only an installation token may exceed`,
        );
    }
    await setQuotasIn(tx, workspaceId, settings);
    await refreshWorkspaceWorkloads(tx, workspaceId);
  });
}

/** The limits the cluster backs (agent's ResourceQuota): a change of another one reaches no namespace. */
function backed(l: Limits): string {
  return JSON.stringify([l.cpu, l.memory, l.instances]);
}

/**
 * Replaces the installation's defaults with exactly `settings` (what ctrl serve was given, at
 * each start) and re-renders the workloads of each workspace whose backed limits this changes
 * (one that set its own keeps them), in one transaction: a start that changes nothing streams
 * nothing, and a crash halfway leaves the old defaults to be compared again at the next start.
 * Returns how many workspaces were re-rendered.
 */
export async function setInstallationDefaults(
  store: Store,
  settings: ReadonlyMap<QuotaName, QuotaSetting>,
): Promise<number> {
  return store.write(async (tx) => {
    const before = await installationDefaults(tx.trx);
    await setInstallationDefaultsIn(tx, settings);
    if (backed(before) === backed(await installationDefaults(tx.trx))) return 0;
    let refreshed = 0;
    for (const { id } of await tx.trx.selectFrom("workspaces").select("id").orderBy("id").execute()) {
      const { limits, own } = await limitsOf(tx.trx, id);
      // What the workspace had: its own where it set one, else the previous default.
      const was = (q: "cpu" | "memory" | "instances"): number | null => (own.has(q) ? limits[q] : before[q]);
      if (backed({ ...limits, cpu: was("cpu"), memory: was("memory"), instances: was("instances") }) === backed(limits))
        continue;
      await refreshWorkspaceWorkloads(tx, id);
      refreshed++;
    }
    return refreshed;
  });
}
