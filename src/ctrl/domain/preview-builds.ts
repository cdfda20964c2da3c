// A pull request's build as its preview (one transaction, inside the build worker's): the built
// image creates the preview from its base environment (./preview-lifecycle.ts, as a preview hook's
// image does) or gives the existing one a new revision, and the part of the commit's krane.yaml
// for the base environment is applied to the preview — its revision settings (`deployment`) and
// its configuration values (`config`), never more: a preview keeps its own region, single replica,
// scale to zero, generated hostnames and no custom domains or jobs, which the base's part would
// otherwise copy (a domain cannot be in two environments).
import type { EnvironmentFile } from "../../gen/krane/ctrl/v1/project_file_pb.js";
import type { WriteTx } from "../db/outbox.js";
import type { PreviewRow } from "../db/schema.js";
import { failedPrecondition } from "../errors.js";
import type { DomainCheckPolicy } from "./domains.js";
import { createPreviewIn, updatePreviewIn, type PreviewDeps, type PreviewOutcome } from "./preview-lifecycle.js";
import { applyEnvironmentFileIn, readEnvironmentFile, type BuiltImage } from "./project-file.js";
import { findPreview, PREVIEW_DEFAULTS } from "./previews.js";
import { findEnvironment } from "./tenancy.js";

export interface BuiltPreview {
  readonly workspaceId: string;
  readonly projectId: string;
  readonly baseEnvironmentId: string;
  readonly name: string;
  readonly pullRequest: {
    readonly provider: "github" | "gitlab";
    readonly repositoryId: string;
    /** The repository's path ("owner/name"). */
    readonly repository: string;
    readonly number: number;
    readonly headSha: string;
    readonly fork: boolean;
  };
  readonly built: BuiltImage;
  /** The base environment's part of the commit's krane.yaml (undefined: the file names none). */
  readonly desired: EnvironmentFile | undefined;
}

export interface PreviewBuildDeps extends PreviewDeps {
  readonly policy: DomainCheckPolicy;
}

export interface DeployedPreview {
  readonly preview: PreviewRow;
  /** The preview's environment (undefined: a fork's preview waiting for approval). */
  readonly environmentId?: string;
  /** The newest revision of the preview (it runs the build), and its number. */
  readonly deployment?: { readonly id: string; readonly revision: number };
}

/** The part of the base's file a preview takes: its revision settings and configuration values. */
export function previewPart(desired: EnvironmentFile, preview: EnvironmentFile): EnvironmentFile {
  return {
    ...preview,
    ...(desired.deployment === undefined ? {} : { deployment: desired.deployment }),
    config: desired.config,
  };
}

export async function deployBuiltPreview(
  tx: WriteTx,
  deps: PreviewBuildDeps,
  b: BuiltPreview,
): Promise<DeployedPreview> {
  const { built, pullRequest: pr } = b;
  const existing = await findPreview(tx.trx, b.projectId, b.name);
  if (existing?.state === "deleting")
    throw failedPrecondition(`preview "${b.name}" is still being deleted; push again once it is gone`);
  const outcome: PreviewOutcome = existing
    ? await updatePreviewIn(tx, existing, {
        image: built.image,
        imageDigest: built.imageDigest,
        headSha: pr.headSha,
        fork: pr.fork,
        buildId: built.buildId,
      })
    : await createPreviewIn(tx, deps, {
        workspace: b.workspaceId,
        project: b.projectId,
        base: b.baseEnvironmentId,
        name: b.name,
        image: built.image,
        imageDigest: built.imageDigest,
        ttlMs: PREVIEW_DEFAULTS.ttlMs,
        region: undefined,
        // The base's secrets stay with the base: a pull request's code is not yet reviewed.
        withSecrets: false,
        buildId: built.buildId,
        pullRequest: {
          provider: pr.provider,
          hookId: pr.repositoryId,
          repository: pr.repository,
          number: pr.number,
          headSha: pr.headSha,
          fork: pr.fork,
        },
      });
  const envId = outcome.environmentId;
  if (envId === undefined) return outcome;
  if (b.desired !== undefined) await applyPart(tx, deps, b, envId, b.desired);
  const newest = await tx.trx
    .selectFrom("deployments")
    .select(["id", "revision"])
    .where("environment_id", "=", envId)
    .orderBy("revision", "desc")
    .executeTakeFirst();
  return { ...outcome, ...(newest ? { deployment: { id: newest.id, revision: Number(newest.revision) } } : {}) };
}

async function applyPart(
  tx: WriteTx,
  deps: PreviewBuildDeps,
  b: BuiltPreview,
  envId: string,
  desired: EnvironmentFile,
): Promise<void> {
  const ctx = await findEnvironment(tx.trx, { workspace: b.workspaceId, project: b.projectId, environment: envId });
  const current = await readEnvironmentFile(tx.trx, ctx);
  await applyEnvironmentFileIn(
    tx,
    {
      ref: { workspace: ctx.workspace.slug, project: ctx.project.slug, environment: ctx.environment.slug },
      desired: previewPart(desired, current.file),
      prune: false,
      plannedFrom: null,
      built: b.built,
    },
    deps.exposure,
    deps.policy,
  );
}
