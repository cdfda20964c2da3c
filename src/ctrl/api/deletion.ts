// The delete calls of the public API: DeleteEnvironment, DeleteProject and
// DeleteWorkspace start (or continue, or force past regions of) a deletion, let whatever has
// finished be purged at once, and answer where the deletion stands.
import { create } from "@bufbuild/protobuf";
import {
  DeletionSchema,
  KindCountSchema,
  RegionDeletionSchema,
  type Deletion,
} from "../../gen/krane/ctrl/v1/api_pb.js";
import type { Store } from "../db/store.js";
import {
  deleteEnvironment,
  deleteProject,
  deleteWorkspace,
  finishDeletions,
  type DeleteRequest,
  type DeletionScope,
  type DeletionView,
} from "../domain/deletion.js";
import { deletionStatus } from "../read/deletion.js";
import { invalidArgument } from "../errors.js";
import { projectRef, regionName, validateEnvironmentRef, workspaceRef } from "../validate/api.js";
import * as rules from "../validate/rules.js";

export function deletionMsg(v: DeletionView): Deletion {
  return create(DeletionSchema, {
    scope: v.scope,
    id: v.id,
    done: v.done,
    requestedAtUnixMs: BigInt(v.requestedAt),
    regions: v.regions.map((r) =>
      create(RegionDeletionSchema, {
        region: r.region,
        remaining: r.remaining,
        forced: r.forced,
        kinds: r.kinds.map((k) => create(KindCountSchema, k)),
      }),
    ),
    environmentIds: v.environmentIds,
  });
}

function forceRegions(field: string, regions: readonly string[]): string[] {
  rules.list(field, regions, rules.LIMITS.regionsMax);
  return regions.map((r, i) => (r === "*" ? r : regionName(`${field}[${i}]`, r)));
}

function confirmation(field: string, v: string): string {
  if (v === "") throw invalidArgument(field, "is required: repeat the slug of what you delete");
  return v;
}

/** What every delete call asks besides what it deletes: the slug repeated, the regions to force past. */
function deleteRequest(req: { confirm: string; forceRegions: readonly string[] }): DeleteRequest {
  return {
    confirm: confirmation("confirm", req.confirm),
    forceRegions: forceRegions("force_regions", req.forceRegions),
  };
}

async function answer(store: Store, scope: DeletionScope, id: string): Promise<Deletion> {
  await finishDeletions(store);
  return deletionMsg(await deletionStatus(store.db, scope, id));
}

export async function deleteEnvironmentCall(
  store: Store,
  req: { workspace: string; project: string; environment: string; confirm: string; forceRegions: string[] },
): Promise<Deletion> {
  const ref = validateEnvironmentRef(req);
  const id = await deleteEnvironment(store, ref, deleteRequest(req));
  return answer(store, "environment", id);
}

export async function deleteProjectCall(
  store: Store,
  req: { workspace: string; project: string; confirm: string; forceRegions: string[] },
): Promise<Deletion> {
  const ref = { workspace: workspaceRef("workspace", req.workspace), project: projectRef("project", req.project) };
  const id = await deleteProject(store, ref, deleteRequest(req));
  return answer(store, "project", id);
}

export async function deleteWorkspaceCall(
  store: Store,
  req: { workspace: string; confirm: string; forceRegions: string[] },
): Promise<Deletion> {
  const ref = { workspace: workspaceRef("workspace", req.workspace) };
  const id = await deleteWorkspace(store, ref, deleteRequest(req));
  return answer(store, "workspace", id);
}
