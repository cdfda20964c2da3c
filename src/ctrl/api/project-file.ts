// ProjectFileService: krane.yaml's plan, apply and export (../domain/project-file.ts). A plan's
// and an apply's changes are the file's paths with JSON values, in the audit log's AuditChange.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { ProjectFileService } from "../../gen/krane/ctrl/v1/apply_pb.js";
import { AuditChangeSchema, type AuditChange } from "../../gen/krane/ctrl/v1/audit_pb.js";
import { ProjectFileSchema, type EnvironmentFile } from "../../gen/krane/ctrl/v1/project_file_pb.js";
import type { Change } from "../../project-file/diff.js";
import type { Store } from "../db/store.js";
import type { DomainCheckPolicy } from "../domain/domains.js";
import type { ExposureSettings } from "../domain/exposure.js";
import {
  applyEnvironmentFile,
  planEnvironmentFile,
  projectEnvironments,
  readEnvironmentFile,
} from "../domain/project-file.js";
import { environmentRegions } from "../read/tenancy.js";
import { desiredReplicasByRegion } from "../read/deployments.js";
import { invalidArgument } from "../errors.js";
import { projectRef, validateEnvironmentRef, workspaceRef } from "../validate/api.js";
import { deploymentMsg, environmentMsg } from "./convert.js";

export interface ProjectFileDeps {
  store: Store;
  settings: ExposureSettings;
  policy: DomainCheckPolicy;
  /** Runs rollout passes after an apply changed the environment. */
  rollout?: { environmentChanged(environmentId: string): Promise<void> };
}

function changeMsg(c: Change): AuditChange {
  return create(AuditChangeSchema, {
    field: c.path,
    op: c.op,
    beforeJson: c.before === undefined ? "" : JSON.stringify(c.before),
    afterJson: c.after === undefined ? "" : JSON.stringify(c.after),
  });
}

function required<T>(field: string, v: T | undefined): T {
  if (v === undefined) throw invalidArgument(field, "is required");
  return v;
}

export function projectFileServiceImpl({
  store,
  settings,
  policy,
  rollout,
}: ProjectFileDeps): ServiceImpl<typeof ProjectFileService> {
  return {
    async planEnvironment(req) {
      const ref = validateEnvironmentRef(req);
      const plan = await planEnvironmentFile(store.db, ref, required("desired", req.desired), req.prune, settings);
      return {
        ...(plan.current !== null ? { current: plan.current.file } : {}),
        planned: plan.target.file,
        changes: plan.changes.map(changeMsg),
        notes: plan.target.notes,
      };
    },
    async applyEnvironment(req) {
      const ref = validateEnvironmentRef(req);
      const applied = await applyEnvironmentFile(
        store,
        { ref, desired: required("desired", req.desired), prune: req.prune, plannedFrom: req.plannedFrom ?? null },
        settings,
        policy,
      );
      if (applied.changed) await rollout?.environmentChanged(applied.context.environment.id);
      const env = applied.context.environment;
      return {
        environment: environmentMsg(env, await environmentRegions(store.db, env.id)),
        changed: applied.changed,
        changes: applied.changes.map(changeMsg),
        ...(applied.revision !== null
          ? {
              deployment: deploymentMsg(
                applied.revision,
                await desiredReplicasByRegion(store.db, applied.revision.deployment.id),
              ),
            }
          : {}),
      };
    },
    async exportProject(req) {
      const ref = { workspace: workspaceRef("workspace", req.workspace), project: projectRef("project", req.project) };
      const { project, environments: envs } = await projectEnvironments(store.db, ref);
      const environments: Record<string, EnvironmentFile> = {};
      for (const ctx of envs) environments[ctx.environment.slug] = (await readEnvironmentFile(store.db, ctx)).file;
      return { file: create(ProjectFileSchema, { project: project.slug, environments }) };
    },
  };
}
