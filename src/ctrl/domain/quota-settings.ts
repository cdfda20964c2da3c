// Setting a workspace's quotas (`krane quota set`): the row (./quotas.ts) and, in the same
// transaction, every desired revision of the workspace rendered again (./workload-refresh.ts),
// since each ApplyDeployment carries the quota the agent backs with a ResourceQuota in the
// workspace namespace (src/agent/deployments/quota.ts).
import { aboveCeiling, formatLimit, type QuotaName, type QuotaSetting } from "../../contracts/quotas.js";
import type { Store } from "../db/store.js";
import { DomainError } from "../errors.js";
import { installationDefaults, setQuotasIn } from "./quotas.js";
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
