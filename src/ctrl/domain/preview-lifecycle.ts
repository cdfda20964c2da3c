// What a preview does as a whole, each in one transaction through the owners of the tables it
// touches (no table of its own): create one (an environment copying the base's settings, its
// configuration — secrets only when asked and never for a fork — a public endpoint at a generated
// hostname, the first revision with the preview's image (pinned to the digest the caller asked its
// registry for before the transaction: ../images/pin.ts), in one region at one replica; or, for a
// fork in a workspace that asks for it, only the record, waiting for approval), give it a new
// image (a push to its pull request), approve it, delete it (its environment's deletion: every
// object in every region), and find the ones whose TTL passed. The workspace's limits are checked
// under a per-workspace lock, so two previews created at once cannot both take the last slot.
import { PREVIEW_POLICY } from "../../contracts/autoscaling.js";
import type { WriteTx } from "../db/outbox.js";
import type { EnvironmentRow, PreviewHookRow, PreviewRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { alreadyExists, failedPrecondition, invalidArgument, notFound } from "../errors.js";
import type { Keyring } from "../secrets/keyring.js";
import { dataKeyFor, sealWith } from "./data-keys.js";
import { startEnvironmentDeletion } from "./deletion.js";
import { insertDeployment, revisionCopyOf } from "./deployments.js";
import { insertEnvironment } from "./environments.js";
import type { ExposureSettings } from "./exposure.js";
import { putEndpoint } from "./endpoints.js";
import {
  dropPendingPreview,
  findPreview,
  hookSecretAad,
  insertPreviewHook,
  newPreviewHookId,
  insertPreview,
  lockPreview,
  previewLimitsOf,
  PREVIEW_DEFAULTS,
  updatePreview,
} from "./previews.js";
import { guardQuota } from "./quotas.js";
import { copySettings, currentRevision } from "./settings.js";
import { findEnvironment, findProject, type EnvironmentContext } from "./tenancy.js";
import type { EndpointAuthSettings, Visibility } from "../validate/exposure.js";
import { webhookVerification, type PreviewHookInput } from "../validate/preview.js";

export interface PreviewDeps {
  readonly keyring?: Keyring;
  readonly exposure: ExposureSettings;
}

export interface PullRequestRef {
  provider: "github" | "gitlab";
  hookId: string;
  repository: string;
  number: number;
  headSha: string;
  fork: boolean;
}

export interface PreviewSpec {
  workspace: string;
  project: string;
  /** The base environment (slug or id). */
  base: string;
  name: string;
  image: string;
  /** The digest `image` names, asked before the transaction (../images/pin.ts); null: run as named. */
  imageDigest: string | null;
  ttlMs: number;
  /** Undefined: the base's first region. */
  region: string | undefined;
  withSecrets: boolean;
  pullRequest?: PullRequestRef;
  /** The build that made `image` (a pull request of a connected repository); its revision names it. */
  buildId?: string;
}

export interface PreviewOutcome {
  preview: PreviewRow;
  /** The environment to run passes for (undefined: nothing to roll out). */
  environmentId?: string;
}

/**
 * What a preview's one instance runs, recorded with it: a preview waiting for approval counts
 * this against the workspace's quotas (./quotas.ts), as its environment will once started.
 */
function resourcesOf(revision: { cpu_millicores: number; memory_mib: number } | undefined) {
  return {
    cpuMillicores: Number(revision?.cpu_millicores ?? PREVIEW_DEFAULTS.cpuMillicores) * PREVIEW_DEFAULTS.replicas,
    memoryMib: Number(revision?.memory_mib ?? PREVIEW_DEFAULTS.memoryMib) * PREVIEW_DEFAULTS.replicas,
  };
}

async function regionFor(tx: WriteTx, base: EnvironmentRow, requested: string | undefined): Promise<string> {
  if (requested !== undefined) {
    const r = await tx.trx.selectFrom("regions").select("name").where("name", "=", requested).executeTakeFirst();
    if (!r) throw failedPrecondition(`region "${requested}" is not registered`);
    return requested;
  }
  const first = await tx.trx
    .selectFrom("environment_regions")
    .select("region")
    .where("environment_id", "=", base.id)
    .orderBy("region")
    .executeTakeFirst();
  if (!first) throw failedPrecondition(`environment "${base.slug}" runs in no region: give the preview a region`);
  return first.region;
}

/**
 * The preview's environment: the base's sentinel and rolling policy (a canary or blue-green of a
 * preview would wait for nobody), one region at one replica that sleeps after 15 idle minutes and
 * wakes at the next request (PREVIEW_POLICY, through its sentinel; a base without a sentinel gives
 * a preview that keeps its replica), the base's configuration (secrets
 * when asked), its endpoints' visibilities and edge auth at generated hostnames (public when the
 * base has none), and the first revision: the base's running one with the preview's image.
 */
async function startPreviewEnvironment(
  tx: WriteTx,
  deps: PreviewDeps,
  base: EnvironmentContext,
  p: {
    name: string;
    region: string;
    image: string;
    imageDigest: string | null;
    withSecrets: boolean;
    buildId?: string;
  },
): Promise<EnvironmentContext> {
  const b = base.environment;
  let environment: EnvironmentRow;
  try {
    environment = await insertEnvironment(tx, base, {
      slug: p.name,
      regions: [{ region: p.region, replicas: PREVIEW_DEFAULTS.replicas }],
      sentinel:
        b.sentinel_image === null
          ? null
          : {
              image: b.sentinel_image,
              replicas: PREVIEW_DEFAULTS.sentinelReplicas,
              cpuMillicores: Number(b.sentinel_cpu_millicores),
              memoryMib: Number(b.sentinel_memory_mib),
            },
      rollout: {
        strategy: b.strategy === "Recreate" ? "Recreate" : "RollingUpdate",
        maxSurge: b.max_surge,
        maxUnavailable: b.max_unavailable,
        minReadySeconds: Number(b.min_ready_seconds),
        progressDeadlineSeconds: Number(b.progress_deadline_seconds),
        revisionHistoryLimit: Number(b.revision_history_limit),
        paused: false,
        progressive: null,
        // A preview sleeps at zero between pushes: nothing is kept warm for a rollback.
        warmWindowSeconds: 0,
      },
      // Scale to zero needs the sentinel: it holds the request that wakes the preview.
      autoscale: b.sentinel_image === null ? null : PREVIEW_POLICY,
    });
  } catch (err) {
    if (tx.dialect.isUniqueViolation(err)) throw alreadyExists(`environment "${p.name}"`);
    throw err;
  }
  const ctx: EnvironmentContext = { workspace: base.workspace, project: base.project, environment };
  await copySettings(tx, deps.keyring, b.id, environment.id, p.withSecrets);
  const endpoints = await tx.trx
    .selectFrom("endpoints")
    .select(["visibility", "auth"])
    .where("environment_id", "=", b.id)
    .orderBy("visibility")
    .execute();
  const visibilities = endpoints.length > 0 ? endpoints : [{ visibility: "public", auth: null }];
  for (const e of visibilities)
    await putEndpoint(
      tx,
      ctx,
      {
        visibility: e.visibility as Visibility,
        pathRouting: false,
        pathPrefix: undefined,
        auth: e.auth === null ? null : (JSON.parse(e.auth) as EndpointAuthSettings),
      },
      deps.exposure,
    );
  const running = await currentRevision(tx.trx, b.id);
  const settings = running
    ? revisionCopyOf(running)
    : {
        command: [],
        args: [],
        port: 8080,
        env: [],
        cpuMillicores: PREVIEW_DEFAULTS.cpuMillicores,
        memoryMib: PREVIEW_DEFAULTS.memoryMib,
        healthCheck: null,
        buildId: "",
        replicas: null,
      };
  // The preview's own image and the digest it names (never the base's: other bytes).
  await insertDeployment(tx, ctx, {
    ...settings,
    image: p.image,
    imageDigest: p.imageDigest,
    buildId: p.buildId ?? "",
    replicas: null,
  });
  return ctx;
}

/**
 * Creates a preview inside the caller's transaction. An existing preview of that name is
 * already_exists (a pull request's webhook updates it instead: updatePreviewIn).
 */
export async function createPreviewIn(tx: WriteTx, deps: PreviewDeps, spec: PreviewSpec): Promise<PreviewOutcome> {
  const base = await findEnvironment(tx.trx, {
    workspace: spec.workspace,
    project: spec.project,
    environment: spec.base,
  });
  if (base.environment.id === spec.name || base.environment.slug === spec.name)
    throw invalidArgument("name", "must differ from the base environment's");
  // The workspace's quota lock: two previews created at once cannot both fit in the last room.
  const quota = await guardQuota(tx, base.workspace.id);
  if (await findPreview(tx.trx, base.project.id, spec.name)) throw alreadyExists(`preview "${spec.name}"`);
  const fork = spec.pullRequest?.fork ?? false;
  // A fork's code never sees the base's secrets, whatever was asked.
  const withSecrets = spec.withSecrets && !fork;
  const limits = await previewLimitsOf(tx.trx, base.workspace.id);
  const awaiting = fork && limits.forkApproval;
  const running = await currentRevision(tx.trx, base.environment.id);
  const adds = resourcesOf(running);
  const region = await regionFor(tx, base.environment, spec.region);
  const env = awaiting
    ? undefined
    : await startPreviewEnvironment(tx, deps, base, {
        name: spec.name,
        region,
        image: spec.image,
        imageDigest: spec.imageDigest,
        withSecrets,
        ...(spec.buildId === undefined ? {} : { buildId: spec.buildId }),
      });
  const pr = spec.pullRequest;
  const preview = await insertPreview(tx, {
    workspace_id: base.workspace.id,
    project_id: base.project.id,
    base_environment_id: base.environment.id,
    environment_id: env?.environment.id ?? null,
    name: spec.name,
    source: pr?.provider ?? "cli",
    hook_id: pr?.hookId ?? null,
    repository: pr?.repository ?? "",
    pr_number: pr?.number ?? 0,
    head_sha: pr?.headSha ?? "",
    fork: fork ? 1 : 0,
    with_secrets: withSecrets ? 1 : 0,
    image: spec.image,
    region,
    cpu_millicores: adds.cpuMillicores,
    memory_mib: adds.memoryMib,
    ttl_ms: spec.ttlMs,
    expires_at: tx.now + spec.ttlMs,
    state: awaiting ? "awaiting_approval" : "active",
    approved_at: awaiting ? null : tx.now,
    // A pull request's commit status is reported from now on.
    status_due_at: pr ? tx.now : null,
  });
  await quota.check();
  return { preview, environmentId: env?.environment.id };
}

export async function createPreview(store: Store, deps: PreviewDeps, spec: PreviewSpec): Promise<PreviewOutcome> {
  return store.write((tx) => createPreviewIn(tx, deps, spec));
}

/**
 * A new head commit of a preview's pull request: a new revision with its image (waiting for
 * approval: only the record), and the TTL starts again. The revision is a copy of the running
 * one with another image: nothing the workspace's quotas count changes.
 */
export async function updatePreviewIn(
  tx: WriteTx,
  preview: PreviewRow,
  change: { image: string; imageDigest: string | null; headSha: string; fork: boolean; buildId?: string },
): Promise<PreviewOutcome> {
  const p = await lockPreview(tx, preview.id);
  if (!p) throw notFound(`preview "${preview.name}"`);
  if (p.state === "deleting") throw failedPrecondition(`preview "${p.name}" is being deleted`);
  const patch = {
    image: change.image,
    head_sha: change.headSha,
    expires_at: tx.now + Number(p.ttl_ms),
    status_due_at: p.hook_id === null ? null : tx.now,
    // A pull request that turns out to come from a fork loses what only others' get.
    ...(change.fork && Number(p.fork) === 0 ? { fork: 1, with_secrets: 0 } : {}),
  };
  await updatePreview(tx, p.id, patch);
  if (p.environment_id === null || p.image === change.image) return { preview: { ...p, ...patch } };
  const env = await findEnvironment(tx.trx, {
    workspace: p.workspace_id,
    project: p.project_id,
    environment: p.environment_id,
  });
  const running = await currentRevision(tx.trx, p.environment_id);
  if (!running) throw failedPrecondition(`preview "${p.name}" has no revision to update`);
  await insertDeployment(tx, env, {
    ...revisionCopyOf(running),
    image: change.image,
    imageDigest: change.imageDigest,
    ...(change.buildId === undefined ? {} : { buildId: change.buildId }),
    replicas: null,
  });
  return { preview: { ...p, ...patch }, environmentId: p.environment_id };
}

/**
 * Starts a preview that waits for approval (its resources were counted when it was made), running
 * `pinned`: the image the approver saw and its digest, asked before this transaction. A push that
 * changed the image meanwhile refuses the approval (approve again: the new image).
 */
export async function approvePreview(
  store: Store,
  deps: PreviewDeps,
  ref: { workspace: string; project: string; name: string },
  pinned: { image: string; digest: string | null },
): Promise<PreviewOutcome> {
  return store.write(async (tx) => {
    const { workspace, project } = await findProject(tx.trx, ref.workspace, ref.project);
    const quota = await guardQuota(tx, workspace.id);
    const found = await findPreview(tx.trx, project.id, ref.name);
    if (!found) throw notFound(`preview "${ref.name}" in project "${project.slug}"`);
    const p = await lockPreview(tx, found.id);
    if (!p) throw notFound(`preview "${ref.name}"`);
    if (p.state !== "awaiting_approval")
      throw failedPrecondition(`preview "${p.name}" is ${p.state}, not awaiting approval`);
    if (p.image !== pinned.image)
      throw failedPrecondition(`preview "${p.name}" got a new image (${p.image}) while it was approved: approve again`);
    const base = await findEnvironment(tx.trx, {
      workspace: workspace.id,
      project: project.id,
      environment: p.base_environment_id,
    });
    const env = await startPreviewEnvironment(tx, deps, base, {
      name: p.name,
      region: p.region,
      image: p.image,
      imageDigest: pinned.digest,
      withSecrets: false,
    });
    const patch = {
      environment_id: env.environment.id,
      state: "active" as const,
      approved_at: tx.now,
      expires_at: tx.now + Number(p.ttl_ms),
      status_due_at: p.hook_id === null ? null : tx.now,
    };
    await updatePreview(tx, p.id, patch);
    await quota.check();
    return { preview: { ...p, ...patch }, environmentId: env.environment.id };
  });
}

/**
 * Deletes a preview inside the caller's transaction: its environment's deletion starts (every
 * object it runs, in every region), and the record goes when that deletion is purged; a preview
 * still waiting for approval just goes. Idempotent.
 */
export async function deletePreviewIn(tx: WriteTx, preview: PreviewRow): Promise<PreviewRow> {
  const p = await lockPreview(tx, preview.id);
  if (!p) return { ...preview, state: "deleting" };
  if (p.environment_id === null) {
    await dropPendingPreview(tx, p.id);
    return { ...p, state: "deleting" };
  }
  if (p.state !== "deleting") await updatePreview(tx, p.id, { state: "deleting", status_due_at: null });
  const env = await tx.trx.selectFrom("environments").selectAll().where("id", "=", p.environment_id).executeTakeFirst();
  if (env) await startEnvironmentDeletion(tx, env);
  return { ...p, state: "deleting" };
}

export async function deletePreview(
  store: Store,
  ref: { workspace: string; project: string; name: string },
): Promise<PreviewRow> {
  return store.write(async (tx) => {
    const { project } = await findProject(tx.trx, ref.workspace, ref.project, { includeDeleting: true });
    const p = await findPreview(tx.trx, project.id, ref.name);
    if (!p) throw notFound(`preview "${ref.name}" in project "${project.slug}"`);
    return deletePreviewIn(tx, p);
  });
}

/** A validated hook with its status API's address resolved (the provider's default when none was given). */
export type PreviewHookSpec = Omit<PreviewHookInput, "statusApiUrl"> & { statusApiUrl: string };

/**
 * Registers a pull-request hook of an environment: its secret and status token are sealed with
 * the environment's data key (so they go with it, and a database reader cannot forge deliveries).
 */
export async function createPreviewHook(
  store: Store,
  keyring: Keyring | undefined,
  spec: PreviewHookSpec,
): Promise<PreviewHookRow> {
  if (!keyring)
    throw failedPrecondition(
      "preview hooks keep their secret sealed: start ctrl with a master key (--master-key-file)",
    );
  return store.write(async (tx) => {
    const base = await findEnvironment(tx.trx, {
      workspace: spec.workspace,
      project: spec.project,
      environment: spec.base,
    });
    if (spec.region !== "") {
      const r = await tx.trx.selectFrom("regions").select("name").where("name", "=", spec.region).executeTakeFirst();
      if (!r) throw failedPrecondition(`region "${spec.region}" is not registered`);
    }
    const key = await dataKeyFor(tx, keyring, base.environment.id);
    const id = newPreviewHookId();
    return insertPreviewHook(tx, {
      id,
      workspace_id: base.workspace.id,
      project_id: base.project.id,
      base_environment_id: base.environment.id,
      provider: spec.provider,
      repository: spec.repository,
      verification: webhookVerification(spec.provider, spec.secret),
      secret_sealed: sealWith(key, spec.secret, hookSecretAad(id, "secret")),
      status_token_sealed:
        spec.statusToken === undefined ? null : sealWith(key, spec.statusToken, hookSecretAad(id, "status-token")),
      status_api_url: spec.statusApiUrl,
      image_template: spec.imageTemplate,
      region: spec.region,
      ttl_ms: spec.ttlMs,
      with_secrets: spec.withSecrets ? 1 : 0,
    });
  });
}
