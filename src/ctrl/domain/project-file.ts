// krane.yaml in ctrl (ProjectFileService): an environment read into the file's canonical form
// (../validate/project-file.ts), a plan (that form against the target a file makes of it), and
// applying a plan in one transaction — the environment (created when the file names a new one),
// its regions, sentinel, rollout and autoscaling (./environment-update.ts), configuration and
// secrets (./settings.ts), endpoints, domains and jobs, and at most one new revision for all of
// it. Apply carries the state its plan was made against and is refused, with what moved, when
// the environment is no longer that.
import { create } from "@bufbuild/protobuf";
import type { Kysely } from "kysely";
import { parseStoredPolicy, type AutoscalePolicy } from "../../contracts/autoscaling.js";
import { JobSpecSchema } from "../../gen/krane/ctrl/v1/job_pb.js";
import {
  DeploymentFileSchema,
  EnvironmentFileSchema,
  type EnvironmentFile,
} from "../../gen/krane/ctrl/v1/project_file_pb.js";
import { changeLine, diffTrees, type Change } from "../../project-file/diff.js";
import { messageTree, type Tree, type TreeObject } from "../../project-file/tree.js";
import type { WriteTx } from "../db/outbox.js";
import type { Database } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { failedPrecondition } from "../errors.js";
import type { DeploymentContext } from "../payloads/deployment.js";
import { DEFAULTS, validateRollout } from "../validate/api.js";
import { endpointAuth, type EndpointAuthSettings, type Visibility } from "../validate/exposure.js";
import { validateJobSpec } from "../validate/job.js";
import {
  autoscaleFile,
  autoscaleInput,
  deploymentFile,
  endpointFile,
  jobFile,
  planTarget,
  revisionSpecOf,
  rolloutFile,
  sentinelFile,
  sentinelInput,
  validateEnvironmentFile,
  type FileScope,
  type Target,
} from "../validate/project-file.js";
import type { EnvironmentRef, StoredJobSpec } from "../validate/types.js";
import { insertDeployment, revisionCopyOf } from "./deployments.js";
import { addDomainIn, removeDomainIn, type DomainCheckPolicy } from "./domains.js";
import { deleteEndpointIn, putEndpoint } from "./endpoints.js";
import { policyOf, sentinelOf, updateEnvironmentIn } from "./environment-update.js";
import { environmentRegions, insertEnvironment, lockEnvironment } from "./environments.js";
import { isPlatformHostname, type ExposureSettings } from "./exposure.js";
import { guardQuota } from "./quotas.js";
import { deleteJobIn, putJobIn } from "./jobs.js";
import { currentRevision, replaceSettingsIn } from "./settings.js";
import { beingDeleted, findProject, type EnvironmentContext } from "./tenancy.js";

type Reader = Kysely<Database>;

function sorted<T>(entries: Iterable<[string, T]>): Record<string, T> {
  return Object.fromEntries([...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** A file's environment as the plain tree plans compare. */
export function fileTree(f: EnvironmentFile): TreeObject {
  return messageTree(EnvironmentFileSchema, f as unknown as Record<string, unknown>);
}

export interface CurrentEnvironment {
  /** The environment in canonical form. */
  file: EnvironmentFile;
  /** The replicas each region runs now (the form leaves them out where the autoscaler sets them). */
  counts: Map<string, number>;
}

/** An environment as it is, in the file's canonical form (what export writes and plans compare). */
export async function readEnvironmentFile(db: Reader, ctx: EnvironmentContext): Promise<CurrentEnvironment> {
  const e = ctx.environment;
  const id = e.id;
  const envPolicy = parseStoredPolicy(e.autoscale);
  const regionRows = await environmentRegions(db, id);
  const regions = sorted(
    regionRows.map((r) => {
      const off = r.autoscale === "off";
      const own = off ? null : parseStoredPolicy(r.autoscale);
      const autoscaled = !off && (own ?? envPolicy) !== null;
      return [
        r.region,
        {
          ...(autoscaled ? {} : { replicas: r.replicas }),
          ...(own !== null ? { autoscale: autoscaleFile(own) } : {}),
          autoscaleOff: off,
        },
      ];
    }),
  );
  const revision = await currentRevision(db, id);
  const endpoints = await db
    .selectFrom("endpoints")
    .select(["visibility", "path_prefix", "auth"])
    .where("environment_id", "=", id)
    .execute();
  const domains = await db.selectFrom("domains").select("hostname").where("environment_id", "=", id).execute();
  const config = await db
    .selectFrom("environment_config")
    .select(["key", "value"])
    .where("environment_id", "=", id)
    .execute();
  const secrets = await db
    .selectFrom("environment_secrets")
    .select(["key", "source", "external_path"])
    .where("environment_id", "=", id)
    .execute();
  const jobs = await db.selectFrom("jobs").select(["name", "spec"]).where("environment_id", "=", id).execute();
  const file = create(EnvironmentFileSchema, {
    regions,
    ...(revision ? { deployment: deploymentFile(revisionCopyOf(revision)) } : {}),
    ...(sentinelOf(e) !== null ? { sentinel: sentinelFile(sentinelOf(e)) } : {}),
    rollout: rolloutFile(policyOf(e)),
    ...(envPolicy !== null ? { autoscale: autoscaleFile(envPolicy) } : {}),
    endpoints: sorted(
      endpoints.map((p) => [
        p.visibility,
        endpointFile(p.path_prefix, p.auth === null ? null : (JSON.parse(p.auth) as EndpointAuthSettings)),
      ]),
    ),
    domains: domains.map((d) => d.hostname).sort(),
    config: sorted(config.map((c) => [c.key, c.value])),
    secrets: secrets
      .filter((s) => s.source !== "external")
      .map((s) => s.key)
      .sort(),
    externalSecrets: sorted(
      secrets.filter((s) => s.source === "external").map((s) => [s.key, s.external_path ?? ""] as [string, string]),
    ),
    jobs: sorted(jobs.map((j) => [j.name, jobFile(JSON.parse(j.spec) as StoredJobSpec)])),
  });
  return { file, counts: new Map(regionRows.map((r) => [r.region, r.replicas])) };
}

/** The project's environments (previews excepted), by slug. */
export async function projectEnvironments(
  db: Reader,
  ref: { workspace: string; project: string },
): Promise<{ project: EnvironmentContext["project"]; environments: EnvironmentContext[] }> {
  const { workspace, project } = await findProject(db, ref.workspace, ref.project);
  const previews = new Set(
    (
      await db
        .selectFrom("previews")
        .select("environment_id")
        .where("project_id", "=", project.id)
        .where("environment_id", "is not", null)
        .execute()
    ).map((p) => p.environment_id),
  );
  const rows = await db
    .selectFrom("environments")
    .selectAll()
    .where("project_id", "=", project.id)
    .where("deleting_at", "is", null)
    .orderBy("slug")
    .execute();
  return {
    project,
    environments: rows.filter((e) => !previews.has(e.id)).map((environment) => ({ workspace, project, environment })),
  };
}

export interface Plan {
  /** The environment as it is; null when it does not exist yet. */
  current: CurrentEnvironment | null;
  target: Target;
  changes: Change[];
}

async function findIn(
  db: Reader,
  ref: EnvironmentRef,
): Promise<{ parent: Omit<EnvironmentContext, "environment">; ctx: EnvironmentContext | null }> {
  const { workspace, project } = await findProject(db, ref.workspace, ref.project);
  const environment = await db
    .selectFrom("environments")
    .selectAll()
    .where("project_id", "=", project.id)
    .where("slug", "=", ref.environment)
    .executeTakeFirst();
  if (environment?.deleting_at != null) throw beingDeleted(`environment "${environment.slug}"`);
  return { parent: { workspace, project }, ctx: environment ? { workspace, project, environment } : null };
}

/** Regions the target names that are not registered: refused at the file's path. */
async function checkRegions(db: Reader, target: EnvironmentFile): Promise<void> {
  const names = Object.keys(target.regions);
  if (names.length === 0) return;
  const known = new Set(
    (await db.selectFrom("regions").select("name").where("name", "in", names).execute()).map((r) => r.name),
  );
  const missing = names.find((n) => !known.has(n));
  if (missing !== undefined)
    throw failedPrecondition(
      `regions.${missing}: region "${missing}" is not registered (create it with \`krane region create ${missing}\`)`,
    );
}

function planOf(
  current: CurrentEnvironment | null,
  desired: EnvironmentFile,
  prune: boolean,
  scope: FileScope,
  settings: ExposureSettings,
): Plan {
  const target = planTarget(
    current?.file ?? null,
    current?.counts ?? new Map(),
    validateEnvironmentFile(desired, scope),
    prune,
    scope,
  );
  target.file.domains.forEach((h) => {
    if (isPlatformHostname(settings, h))
      throw failedPrecondition(
        `domains.${JSON.stringify(h)}: is under the platform's own domain (${settings.publicApex} / ${settings.organizationApex}); endpoints get those names`,
      );
  });
  return {
    current,
    target,
    // A new environment: each of its parts is one change.
    changes: diffTrees(current === null ? {} : fileTree(current.file), fileTree(target.file)),
  };
}

/** What applying `desired` to the environment would change (nothing is written). */
export async function planEnvironmentFile(
  db: Reader,
  ref: EnvironmentRef,
  desired: EnvironmentFile,
  prune: boolean,
  settings: ExposureSettings,
): Promise<Plan> {
  const { parent, ctx } = await findIn(db, ref);
  const current = ctx === null ? null : await readEnvironmentFile(db, ctx);
  const plan = planOf(
    current,
    desired,
    prune,
    { project: parent.project.slug, environment: ref.environment },
    settings,
  );
  await checkRegions(db, plan.target.file);
  return plan;
}

export interface ApplyInput {
  ref: EnvironmentRef;
  desired: EnvironmentFile;
  prune: boolean;
  /** The `current` of the plan being applied; null: the plan found no environment. */
  plannedFrom: EnvironmentFile | null;
  /**
   * A build's file (krane.yaml of the source it built): applied over the environment as it is now
   * (no plan to check against), its revision running this image.
   */
  built?: BuiltImage;
}

/** The image a build pushed, for the revision its source's krane.yaml makes. */
export interface BuiltImage {
  readonly image: string;
  readonly imageDigest: string;
  readonly buildId: string;
}

/**
 * The file's environment with the built image as its revision's: the file's deployment part
 * when it has one (an image it names is replaced), else the current revision's settings.
 */
function withBuiltImage(desired: EnvironmentFile, current: CurrentEnvironment | null, image: string): EnvironmentFile {
  const base = desired.deployment ?? current?.file.deployment ?? create(DeploymentFileSchema, {});
  return { ...desired, deployment: { ...base, image } };
}

export interface Applied {
  context: EnvironmentContext;
  changed: boolean;
  changes: Change[];
  /** The revision the apply made. */
  revision: DeploymentContext | null;
}

/** Applies a plan in one transaction, or refuses it (nothing written) when the environment moved. */
export async function applyEnvironmentFile(
  store: Store,
  input: ApplyInput,
  settings: ExposureSettings,
  domainPolicy: DomainCheckPolicy,
): Promise<Applied> {
  try {
    return await store.write((tx) => applyEnvironmentFileIn(tx, input, settings, domainPolicy));
  } catch (err) {
    // Another apply created the environment, or another environment claimed a domain, meanwhile.
    if (store.isUniqueViolation(err))
      throw failedPrecondition(
        `environment "${input.ref.environment}" changed since the plan (created meanwhile, or a domain it names was claimed): plan again`,
      );
    throw err;
  }
}

/** applyEnvironmentFile inside the caller's transaction (a preview's build: with its preview's change). */
export async function applyEnvironmentFileIn(
  tx: WriteTx,
  input: ApplyInput,
  settings: ExposureSettings,
  domainPolicy: DomainCheckPolicy,
): Promise<Applied> {
  const found = await findIn(tx.trx, input.ref);
  // The whole file is one change: refused as a whole when it takes the workspace past a quota.
  const quota = await guardQuota(tx, found.parent.workspace.id);
  let ctx = found.ctx;
  if (ctx !== null) {
    const locked = await lockEnvironment(tx, ctx.environment.id, "update");
    if (locked) ctx = { ...ctx, environment: locked };
  }
  const current = ctx === null ? null : await readEnvironmentFile(tx.trx, ctx);
  const scope = { project: found.parent.project.slug, environment: input.ref.environment };
  const { built } = input;
  const desired = built ? withBuiltImage(input.desired, current, built.image) : input.desired;
  const plan = planOf(current, desired, input.prune, scope, settings);
  // Already as planned (a repeat of this apply): nothing to do.
  if (plan.changes.length === 0 && ctx !== null) return { context: ctx, changed: false, changes: [], revision: null };
  const moved = built
    ? []
    : diffTrees(
        input.plannedFrom === null ? null : fileTree(input.plannedFrom),
        current === null ? null : fileTree(current.file),
      );
  if (moved.length > 0)
    throw failedPrecondition(
      `environment "${input.ref.environment}" changed since the plan (plan again and review): ${moved.map(changeLine).join("; ")}`,
    );
  await checkRegions(tx.trx, plan.target.file);
  const applied = await write(
    tx,
    found.parent,
    ctx,
    current,
    plan.target.file,
    input.ref,
    settings,
    domainPolicy,
    built,
  );
  await quota.check();
  return { ...applied, changed: true, changes: plan.changes };
}

/** A policy the (validated) file states. */
function statedPolicy(m: NonNullable<EnvironmentFile["autoscale"]>): AutoscalePolicy {
  const p = autoscaleInput(m);
  if (p === null) throw new Error("unreachable: a stated policy reads as none");
  return p;
}

const same = (a: Tree | undefined, b: Tree | undefined): boolean => JSON.stringify(a) === JSON.stringify(b);
const entry = (t: TreeObject, key: string, name: string): Tree | undefined => {
  const m = t[key];
  return typeof m === "object" && m !== null && !Array.isArray(m) ? m[name] : undefined;
};

async function write(
  tx: WriteTx,
  parent: Omit<EnvironmentContext, "environment">,
  existing: EnvironmentContext | null,
  current: CurrentEnvironment | null,
  target: EnvironmentFile,
  ref: EnvironmentRef,
  settings: ExposureSettings,
  domainPolicy: DomainCheckPolicy,
  built: BuiltImage | undefined,
): Promise<{ context: EnvironmentContext; revision: DeploymentContext | null }> {
  const cur = current?.file ?? create(EnvironmentFileSchema, {});
  const curTree = fileTree(cur);
  const targetTree = fileTree(target);
  if (existing === null) {
    // Made bare; the update below gives it what the file states.
    await insertEnvironment(tx, parent, {
      slug: ref.environment,
      regions: [],
      sentinel: null,
      rollout: validateRollout(undefined),
      autoscale: null,
    });
  }
  const regionNames = Object.keys(target.regions);
  const sentinel = sentinelInput(target.sentinel);
  const joining: { index: number; region: string; replicas: number }[] = [];
  regionNames.forEach((region, index) => {
    const r = target.regions[region];
    // A region that autoscales states no count: it joins at its floor, and the autoscaler sizes it.
    const floor = Math.max(1, (r?.autoscale ?? target.autoscale)?.minReplicas ?? DEFAULTS.replicas);
    const replicas = r?.replicas ?? (region in cur.regions ? undefined : floor);
    if (replicas !== undefined) joining.push({ index, region, replicas });
  });
  const updated = await updateEnvironmentIn(tx, {
    ...ref,
    sentinel,
    removeSentinel: sentinel === null && cur.sentinel !== undefined,
    rollout: validateRollout(target.rollout, regionNames),
    regions: joining,
    removeRegions: Object.keys(cur.regions)
      .filter((r) => !(r in target.regions))
      .map((region, index) => ({ index, region })),
    autoscale:
      target.autoscale === undefined
        ? cur.autoscale === undefined
          ? null
          : "remove"
        : { replace: statedPolicy(target.autoscale) },
    regionAutoscale: regionNames.map((region, index) => {
      const r = target.regions[region];
      const change = r?.autoscaleOff
        ? ("off" as const)
        : r?.autoscale !== undefined
          ? { replace: statedPolicy(r.autoscale) }
          : ("inherit" as const);
      return { index, region, change };
    }),
  });
  const ctx = updated.context;
  const envId = ctx.environment.id;

  const settingsChanged = await replaceSettingsIn(tx, envId, {
    config: target.config,
    secrets: target.secrets,
    external: target.externalSecrets,
  });

  // At most one revision, for changed revision settings or a changed working set.
  let revision: DeploymentContext | null = null;
  if (target.deployment !== undefined && (settingsChanged || !same(curTree.deployment, targetTree.deployment)))
    revision = await insertDeployment(tx, ctx, {
      ...revisionSpecOf(target.deployment),
      replicas: null,
      ...(built ? { imageDigest: built.imageDigest, buildId: built.buildId } : {}),
    });

  for (const [vis, e] of Object.entries(target.endpoints)) {
    if (same(entry(curTree, "endpoints", vis), entry(targetTree, "endpoints", vis))) continue;
    await putEndpoint(
      tx,
      ctx,
      {
        visibility: vis as Visibility,
        pathRouting: e.pathRouting,
        pathPrefix: e.pathRouting ? e.pathPrefix : undefined,
        auth: endpointAuth(`endpoints.${vis}.auth`, e.auth),
      },
      settings,
    );
  }
  for (const vis of Object.keys(cur.endpoints))
    if (!(vis in target.endpoints)) await deleteEndpointIn(tx, ctx.environment, vis as Visibility);

  for (const h of target.domains) if (!cur.domains.includes(h)) await addDomainIn(tx, ctx, h, domainPolicy);
  const gone = cur.domains.filter((h) => !target.domains.includes(h));
  if (gone.length > 0) {
    const rows = await tx.trx
      .selectFrom("domains")
      .select(["id", "environment_id"])
      .where("environment_id", "=", envId)
      .where("hostname", "in", gone)
      .execute();
    for (const d of rows) await removeDomainIn(tx, d);
  }

  for (const [name, j] of Object.entries(target.jobs)) {
    if (same(entry(curTree, "jobs", name), entry(targetTree, "jobs", name))) continue;
    await putJobIn(tx, ctx, validateJobSpec(create(JobSpecSchema, { ...j, name })));
  }
  for (const name of Object.keys(cur.jobs)) if (!(name in target.jobs)) await deleteJobIn(tx, ctx, name);

  return { context: ctx, revision };
}
