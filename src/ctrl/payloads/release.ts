// The release kind's payloads: a versioned set of allow-listed objects of an environment,
// desired in each of its regions (objects as JSON; a sealed Secret without its data, which the
// agent fetches with GetSecretValues). Rows → ApplyRelease / DeleteRelease, pure.
import { create, toBinary } from "@bufbuild/protobuf";
import type { Selectable } from "kysely";
import {
  ApplyReleaseSchema,
  DeleteReleaseSchema,
  ReleaseKindSchema,
  ReleaseObjectSchema,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { EnvironmentRow, ReleaseKindsTable, ReleaseObjectsTable, ReleaseRow, WorkspaceRow } from "../db/schema.js";
import type { Limits } from "../../contracts/quotas.js";
import { workspaceQuotaMessage } from "./deployment.js";
import type { KindPayloads } from "./kind.js";

export interface ReleaseContext {
  workspace: WorkspaceRow;
  environment: EnvironmentRow;
  release: ReleaseRow;
  objects: Selectable<ReleaseObjectsTable>[];
  kindsEver: Selectable<ReleaseKindsTable>[];
  /** The workspace's quota, which the agent backs in the namespace; undefined: none sent. */
  quota?: Limits;
}

function kindsOf(rows: readonly { api_group: string; api_version: string; kind: string }[]) {
  return rows.map((k) => create(ReleaseKindSchema, { group: k.api_group, version: k.api_version, kind: k.kind }));
}

export function encodeApplyRelease(ctx: ReleaseContext, region: string): Uint8Array {
  const { workspace, environment, release } = ctx;
  return toBinary(
    ApplyReleaseSchema,
    create(ApplyReleaseSchema, {
      workspaceId: workspace.id,
      projectId: environment.project_id,
      environmentId: environment.id,
      releaseId: release.id,
      k8sNamespace: workspace.k8s_namespace,
      name: release.name,
      version: BigInt(release.version),
      region,
      objects: [...ctx.objects]
        .sort((a, b) => a.seq - b.seq)
        .map((o) =>
          create(ReleaseObjectSchema, {
            id: o.object_id,
            kind: create(ReleaseKindSchema, { group: o.api_group, version: o.api_version, kind: o.kind }),
            name: o.name,
            manifestJson: o.manifest,
            sealed: o.sealed !== null,
          }),
        ),
      kindsEver: kindsOf(ctx.kindsEver),
      ...(ctx.quota ? workspaceQuotaMessage(ctx.quota) : {}),
    }),
  );
}

export function encodeDeleteRelease(
  workspace: WorkspaceRow,
  release: ReleaseRow,
  kindsEver: readonly { api_group: string; api_version: string; kind: string }[],
): Uint8Array {
  return toBinary(
    DeleteReleaseSchema,
    create(DeleteReleaseSchema, {
      releaseId: release.id,
      k8sNamespace: workspace.k8s_namespace,
      kindsEver: kindsOf(kindsEver),
    }),
  );
}

export const releasePayloads: KindPayloads = {
  name: "release",
  apply: ApplyReleaseSchema,
  delete: DeleteReleaseSchema,
};
