// Quotas (table workspace_quotas): a workspace's limits, the installation's defaults (row "*"),
// what a workspace uses, and the guard every change that can grow it runs inside its
// transaction: use before, the change, use after; past a limit the transaction ends with
// resource_exhausted and nothing of the change is kept. The arithmetic is
// src/contracts/quotas.ts.
import type { Kysely } from "kysely";
import {
  buildAllowance,
  buildMinutesUsed,
  monthStartMs,
  type BuildAllowance,
  BUILT_IN_DEFAULTS,
  effectiveLimits,
  exceeded,
  exceededMessage,
  QUOTA_NAMES,
  usageOf,
  type EnvironmentReach,
  type Limits,
  type QuotaName,
  type QuotaSetting,
  type Usage,
} from "../../contracts/quotas.js";
import { parseStoredPolicy, regionPolicy, type AutoscalePolicy } from "../../contracts/autoscaling.js";
import type { WriteTx } from "../db/outbox.js";
import type { Database, WorkspaceQuotasTable } from "../db/schema.js";
import { DomainError } from "../errors.js";

type Reader = Kysely<Database>;

/** The row holding the installation's defaults. */
export const INSTALLATION_DEFAULTS = "*";

const COLUMNS = {
  cpu: "cpu_millicores",
  memory: "memory_mib",
  instances: "instances",
  environments: "environments",
  previews: "previews",
  build_minutes: "build_minutes",
} as const satisfies Record<QuotaName, keyof WorkspaceQuotasTable>;

/** -1 in a column: unlimited (null: the default). */
const UNLIMITED_MARK = -1;

type Own = Record<QuotaName, number | null | undefined>;

/** The stored row of a workspace (or INSTALLATION_DEFAULTS), as it is. */
export async function quotaRow(db: Reader, workspaceId: string): Promise<WorkspaceQuotasTable | undefined> {
  return db.selectFrom("workspace_quotas").selectAll().where("workspace_id", "=", workspaceId).executeTakeFirst();
}

async function ownRow(db: Reader, workspaceId: string): Promise<Own> {
  const row = await quotaRow(db, workspaceId);
  const own = {} as Own;
  for (const q of QUOTA_NAMES) {
    const v = row?.[COLUMNS[q]];
    own[q] = v === null || v === undefined ? undefined : Number(v) === UNLIMITED_MARK ? null : Number(v);
  }
  return own;
}

/** The installation's defaults (`ctrl serve --default-quota`), over the built-in ones. */
export async function installationDefaults(db: Reader): Promise<Limits> {
  return effectiveLimits(await ownRow(db, INSTALLATION_DEFAULTS), BUILT_IN_DEFAULTS);
}

export interface WorkspaceLimits {
  /** What is in force. */
  limits: Limits;
  /** The quotas the workspace set itself (the others are the installation's defaults). */
  own: ReadonlySet<QuotaName>;
}

export async function limitsOf(db: Reader, workspaceId: string): Promise<WorkspaceLimits> {
  const own = await ownRow(db, workspaceId);
  return {
    limits: effectiveLimits(own, await installationDefaults(db)),
    own: new Set(QUOTA_NAMES.filter((q) => own[q] !== undefined)),
  };
}

/** Writes settings of a workspace (or of INSTALLATION_DEFAULTS); quotas not named keep theirs. */
export async function setQuotasIn(
  tx: WriteTx,
  workspaceId: string,
  settings: ReadonlyMap<QuotaName, QuotaSetting>,
): Promise<void> {
  const values: Partial<Record<(typeof COLUMNS)[QuotaName], number | null>> = {};
  for (const [q, s] of settings)
    values[COLUMNS[q]] = s.kind === "default" ? null : s.kind === "unlimited" ? UNLIMITED_MARK : s.value;
  await tx.trx
    .insertInto("workspace_quotas")
    .values({ workspace_id: workspaceId, ...values, updated_at: tx.now })
    .onConflict((oc) => oc.column("workspace_id").doUpdateSet({ ...values, updated_at: tx.now }))
    .execute();
}

/** Replaces the installation's defaults with exactly `settings` (what ctrl serve was given). */
export async function setInstallationDefaultsIn(
  tx: WriteTx,
  settings: ReadonlyMap<QuotaName, QuotaSetting>,
): Promise<void> {
  const all = new Map<QuotaName, QuotaSetting>(QUOTA_NAMES.map((q) => [q, settings.get(q) ?? { kind: "default" }]));
  await setQuotasIn(tx, INSTALLATION_DEFAULTS, all);
}

// ---------------------------------------------------------------- use

/**
 * What the workspace's live environments can reach (./../../contracts/quotas.ts usageOf): each at
 * the resources of the revision it runs (the pinned one, else the newest), in every region at
 * its replicas or autoscaling max; a preview waiting for approval at what it reserved.
 */
export async function workspaceUsage(db: Reader, workspaceId: string): Promise<Usage> {
  const envs = await db
    .selectFrom("environments")
    .select(["id", "autoscale", "pinned_deployment_id"])
    .where("workspace_id", "=", workspaceId)
    .where("deleting_at", "is", null)
    .execute();
  const previews = await db
    .selectFrom("previews")
    .select(["environment_id", "cpu_millicores", "memory_mib"])
    .where("workspace_id", "=", workspaceId)
    .where("state", "!=", "deleting")
    .execute();
  const previewEnvs = new Set(previews.flatMap((p) => (p.environment_id === null ? [] : [p.environment_id])));
  const ids = envs.map((e) => e.id);
  const regions =
    ids.length === 0
      ? []
      : await db
          .selectFrom("environment_regions")
          .select(["environment_id", "region", "replicas", "autoscale"])
          .where("environment_id", "in", ids)
          .execute();
  const newest =
    ids.length === 0
      ? []
      : await db
          .selectFrom("deployments as d")
          .innerJoin(
            (eb) =>
              eb
                .selectFrom("deployments")
                .select(["environment_id", (e) => e.fn.max("revision").as("revision")])
                .where("workspace_id", "=", workspaceId)
                .groupBy("environment_id")
                .as("m"),
            (j) => j.onRef("m.environment_id", "=", "d.environment_id").onRef("m.revision", "=", "d.revision"),
          )
          .select(["d.environment_id", "d.cpu_millicores", "d.memory_mib"])
          .execute();
  const pinnedIds = envs.flatMap((e) => (e.pinned_deployment_id === null ? [] : [e.pinned_deployment_id]));
  const pinned =
    pinnedIds.length === 0
      ? []
      : await db
          .selectFrom("deployments")
          .select(["environment_id", "cpu_millicores", "memory_mib"])
          .where("id", "in", pinnedIds)
          .execute();
  const size = new Map<string, { cpu: number; memory: number }>();
  for (const d of [...newest, ...pinned])
    // pinned last: it wins
    size.set(d.environment_id, { cpu: Number(d.cpu_millicores), memory: Number(d.memory_mib) });

  const reach: EnvironmentReach[] = envs.map((e) => {
    const own = regions.filter((r) => r.environment_id === e.id);
    const overrides = new Map<string, AutoscalePolicy | null>();
    for (const r of own)
      if (r.autoscale !== null) overrides.set(r.region, r.autoscale === "off" ? null : parseStoredPolicy(r.autoscale));
    const envPolicy = parseStoredPolicy(e.autoscale);
    const s = size.get(e.id);
    return {
      preview: previewEnvs.has(e.id),
      regions: own.map((r) => ({
        replicas: Number(r.replicas),
        autoscaleMax: regionPolicy(envPolicy, overrides, r.region)?.maxReplicas ?? null,
      })),
      cpuMillicores: s?.cpu ?? 0,
      memoryMib: s?.memory ?? 0,
    };
  });
  // A preview waiting for approval has no environment yet: one instance of what it reserved.
  for (const p of previews)
    if (p.environment_id === null)
      reach.push({
        preview: true,
        regions: [{ replicas: 1, autoscaleMax: null }],
        cpuMillicores: Number(p.cpu_millicores),
        memoryMib: Number(p.memory_mib),
      });
  return usageOf(reach);
}

/** The workspace's build minutes this calendar month (builds started, running or finished). */
export async function buildMinutesOf(db: Reader, workspaceId: string, nowMs: number): Promise<number> {
  const rows = await db
    .selectFrom("builds")
    .select(["started_at", "finished_at"])
    .where("workspace_id", "=", workspaceId)
    .where("started_at", "is not", null)
    .where((eb) => eb.or([eb("finished_at", "is", null), eb("finished_at", ">=", monthStartMs(nowMs))]))
    .execute();
  return buildMinutesUsed(
    rows.map((r) => ({
      startedAtMs: Number(r.started_at),
      finishedAtMs: r.finished_at === null ? null : Number(r.finished_at),
    })),
    nowMs,
  );
}

/**
 * What a build of the workspace may run now (its own minutes so far not counted: it is about to
 * start, or `excludeBuildId` is it): refused once the month's build minutes are spent, else its
 * time limit capped at the minutes left.
 */
export async function buildAllowanceOf(
  db: Reader,
  workspaceId: string,
  timeoutMs: number,
  nowMs: number,
  excludeBuildId?: string,
): Promise<BuildAllowance> {
  const { limits } = await limitsOf(db, workspaceId);
  if (limits.build_minutes === null) return { ok: true, timeoutMs };
  const ws = await db.selectFrom("workspaces").select("slug").where("id", "=", workspaceId).executeTakeFirst();
  let used = await buildMinutesOf(db, workspaceId, nowMs);
  if (excludeBuildId !== undefined) {
    const own = await db
      .selectFrom("builds")
      .select(["started_at", "finished_at"])
      .where("id", "=", excludeBuildId)
      .executeTakeFirst();
    if (own?.started_at != null)
      used -= buildMinutesUsed(
        [
          {
            startedAtMs: Number(own.started_at),
            finishedAtMs: own.finished_at === null ? null : Number(own.finished_at),
          },
        ],
        nowMs,
      );
  }
  return buildAllowance(ws?.slug ?? workspaceId, limits.build_minutes, used, timeoutMs);
}

// ---------------------------------------------------------------- the guard

export interface QuotaGuard {
  /** Refuses (resource_exhausted) when the transaction's change took the workspace past a quota. */
  check(): Promise<void>;
}

/**
 * Starts guarding a change of the workspace: takes the workspace's quota lock (so two changes
 * at once cannot both fit in the last room) and reads its use before. Call it before taking any
 * other lock of the transaction, then `check()` once the change is written.
 */
export async function guardQuota(tx: WriteTx, workspaceId: string): Promise<QuotaGuard> {
  await tx.dialect.lockNamed(tx.trx, `krane quota ${workspaceId}`);
  const before = await workspaceUsage(tx.trx, workspaceId);
  return {
    async check() {
      const { limits } = await limitsOf(tx.trx, workspaceId);
      const e = exceeded(before, await workspaceUsage(tx.trx, workspaceId), limits);
      if (!e) return;
      const w = await tx.trx.selectFrom("workspaces").select("slug").where("id", "=", workspaceId).executeTakeFirst();
      throw new DomainError("resource_exhausted", exceededMessage(w?.slug ?? workspaceId, e));
    },
  };
}

/** Runs `change` under the workspace's quota guard (see guardQuota). */
export async function withinQuota<T>(tx: WriteTx, workspaceId: string, change: () => Promise<T>): Promise<T> {
  const guard = await guardQuota(tx, workspaceId);
  const out = await change();
  await guard.check();
  return out;
}
