// QuotaService: a workspace's quotas with their use (get) and setting them (set: the owner,
// within the installation's defaults; an installation token beyond them).
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { QuotaSchema, type Quota, type QuotaService } from "../../gen/krane/ctrl/v1/quota_pb.js";
import { callerScope } from "../auth/principal.js";
import type { Store } from "../db/store.js";
import { setQuotas } from "../domain/quota-settings.js";
import { findWorkspace } from "../domain/tenancy.js";
import { quotaViews, type QuotaView } from "../read/quotas.js";
import { workspaceRef } from "../validate/api.js";
import { validateQuotaValues } from "../validate/quota.js";

function quotaMsg(v: QuotaView): Quota {
  return create(QuotaSchema, {
    name: v.name,
    unit: v.unit,
    limit: v.limit === null ? undefined : BigInt(v.limit),
    used: BigInt(v.used),
    own: v.own,
  });
}

export function quotaServiceImpl({ store }: { store: Store }): ServiceImpl<typeof QuotaService> {
  return {
    async getQuota(req) {
      const workspace = await findWorkspace(store.db, workspaceRef("workspace", req.workspace));
      return { quotas: (await quotaViews(store.db, workspace.id)).map(quotaMsg) };
    },
    async setQuota(req, ctx) {
      const workspace = await findWorkspace(store.db, workspaceRef("workspace", req.workspace));
      const settings = validateQuotaValues("values", req.values);
      await setQuotas(
        store,
        workspace.id,
        settings,
        callerScope(ctx) === "installation" ? "installation" : "workspace",
      );
      return { quotas: (await quotaViews(store.db, workspace.id)).map(quotaMsg) };
    },
  };
}
