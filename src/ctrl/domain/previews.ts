// Previews (tables previews, preview_limits, preview_hooks, webhook_deliveries — which also
// holds the deliveries of repositories' push hooks, ./repositories.ts): the record of
// each preview environment, a workspace's preview settings (fork approval; how many previews
// it may have is its quota, ./quotas.ts), the pull-request hooks of environments
// and the deliveries those hooks accepted. What a preview does as a whole (create, update,
// approve, delete, expire, in one transaction with the environment it runs as) is
// ./preview-lifecycle.ts; the webhooks and the commit-status reports are ../previews.
//
// The one place a preview's defaults are set is PREVIEW_DEFAULTS below — including its scaling
// policy, where scale-to-zero when idle will be switched on once ctrl has autoscaling.
import type { Kysely } from "kysely";
import type { WriteTx } from "../db/outbox.js";
import type { Database, PreviewHookRow, PreviewRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { noteWriteSubject } from "../db/write-hook.js";
import { notFound } from "../errors.js";
import { newId } from "./ids.js";

type Reader = Kysely<Database>;

/** What every preview gets unless told otherwise. */
export const PREVIEW_DEFAULTS = {
  ttlMs: 72 * 60 * 60 * 1000,
  maxTtlMs: 30 * 24 * 60 * 60 * 1000,
  /** One region, one replica. */
  replicas: 1,
  sentinelReplicas: 1,
  /** A revision's resources when the base environment has none deployed yet. */
  cpuMillicores: 250,
  memoryMib: 256,
} as const;

/**
 * A workspace's preview settings when it has set none. How many previews it may have, and what
 * they may use, are its quotas (./quotas.ts).
 */
export const DEFAULT_PREVIEW_LIMITS: PreviewLimits = { forkApproval: true };

export interface PreviewLimits {
  forkApproval: boolean;
}

export type PreviewState = "awaiting_approval" | "active" | "deleting";

// ---------------------------------------------------------------- limits

export async function previewLimitsOf(db: Reader, workspaceId: string): Promise<PreviewLimits> {
  const row = await db
    .selectFrom("preview_limits")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .executeTakeFirst();
  return row ? { forkApproval: Number(row.fork_approval) === 1 } : DEFAULT_PREVIEW_LIMITS;
}

export async function setPreviewLimits(store: Store, workspaceId: string, l: PreviewLimits): Promise<PreviewLimits> {
  return store.write(async (tx) => {
    // The max_* columns are unused since migration 0034 (previews count in the workspace's quotas).
    const row = {
      max_previews: 0,
      max_cpu_millicores: 0,
      max_memory_mib: 0,
      fork_approval: l.forkApproval ? 1 : 0,
      updated_at: tx.now,
    };
    await tx.trx
      .insertInto("preview_limits")
      .values({ workspace_id: workspaceId, ...row })
      .onConflict((oc) => oc.column("workspace_id").doUpdateSet(row))
      .execute();
    return l;
  });
}

/** What a workspace's previews use now (every preview that is not being deleted counts). */
export async function previewUsage(
  db: Reader,
  workspaceId: string,
): Promise<{ previews: number; cpuMillicores: number; memoryMib: number }> {
  const row = await db
    .selectFrom("previews")
    .select((eb) => [
      eb.fn.countAll<number>().as("n"),
      eb.fn.sum<number>("cpu_millicores").as("cpu"),
      eb.fn.sum<number>("memory_mib").as("memory"),
    ])
    .where("workspace_id", "=", workspaceId)
    .where("state", "!=", "deleting")
    .executeTakeFirst();
  return { previews: Number(row?.n ?? 0), cpuMillicores: Number(row?.cpu ?? 0), memoryMib: Number(row?.memory ?? 0) };
}

// ---------------------------------------------------------------- previews

export async function findPreview(db: Reader, projectId: string, name: string): Promise<PreviewRow | undefined> {
  return db
    .selectFrom("previews")
    .selectAll()
    .where("project_id", "=", projectId)
    .where("name", "=", name)
    .executeTakeFirst();
}

export async function previewOfEnvironment(db: Reader, environmentId: string): Promise<PreviewRow | undefined> {
  return db.selectFrom("previews").selectAll().where("environment_id", "=", environmentId).executeTakeFirst();
}

export async function previewById(db: Reader, id: string): Promise<PreviewRow | undefined> {
  return db.selectFrom("previews").selectAll().where("id", "=", id).executeTakeFirst();
}

export type NewPreview = Omit<PreviewRow, "id" | "created_at" | "updated_at" | "status_reported">;

export async function insertPreview(tx: WriteTx, p: NewPreview): Promise<PreviewRow> {
  const row: PreviewRow = { ...p, id: newId("pvw"), status_reported: "", created_at: tx.now, updated_at: tx.now };
  await tx.trx.insertInto("previews").values(row).execute();
  return row;
}

/** Changes a preview's record (a new image, an approval, its environment, the deletion mark). */
export async function updatePreview(
  tx: WriteTx,
  id: string,
  patch: Partial<
    Pick<
      PreviewRow,
      | "environment_id"
      | "head_sha"
      | "image"
      | "expires_at"
      | "state"
      | "approved_at"
      | "status_due_at"
      | "fork"
      | "with_secrets"
    >
  >,
): Promise<void> {
  await tx.trx
    .updateTable("previews")
    .set({ ...patch, updated_at: tx.now })
    .where("id", "=", id)
    .execute();
}

/** Locks a preview's record for the rest of the transaction. */
export async function lockPreview(tx: WriteTx, id: string): Promise<PreviewRow | undefined> {
  return tx.dialect
    .lockRows(tx.trx.selectFrom("previews").selectAll().where("id", "=", id), "update")
    .executeTakeFirst();
}

/** Previews whose TTL passed (not already being deleted), oldest expiry first. */
export async function expiredPreviews(db: Reader, now: number, limit: number): Promise<PreviewRow[]> {
  return db
    .selectFrom("previews")
    .selectAll()
    .where("expires_at", "<=", now)
    .where("state", "!=", "deleting")
    .orderBy("expires_at")
    .limit(limit)
    .execute();
}

/**
 * Claims the previews whose commit status is due: moves their next look `leaseMs` ahead (another
 * ctrl replica's sweep skips them meanwhile) and returns their ids.
 */
export async function claimDueStatuses(store: Store, limit: number, leaseMs: number): Promise<string[]> {
  return store.write(async (tx) => {
    const due = await tx.trx
      .selectFrom("previews")
      .select("id")
      .where("status_due_at", "<=", tx.now)
      .orderBy("status_due_at")
      .limit(limit)
      .execute();
    const ids = due.map((d) => d.id);
    if (ids.length > 0)
      await tx.trx
        .updateTable("previews")
        .set({ status_due_at: tx.now + leaseMs })
        .where("id", "in", ids)
        .execute();
    return ids;
  });
}

/**
 * Records what was reported to the pull request, and when to look again (null: nothing more to
 * report) — unless the preview changed since it was read (`seenUpdatedAt`): then its own due time
 * stands, and the change is reported next.
 */
export async function recordStatusReport(
  store: Store,
  id: string,
  reported: string | null,
  nextAt: number | null,
  seenUpdatedAt: number,
): Promise<void> {
  await store.write(async (tx) => {
    if (reported !== null)
      await tx.trx.updateTable("previews").set({ status_reported: reported }).where("id", "=", id).execute();
    await tx.trx
      .updateTable("previews")
      .set({ status_due_at: nextAt })
      .where("id", "=", id)
      .where("updated_at", "=", seenUpdatedAt)
      .execute();
  });
}

/** Deletes the preview record of an environment whose rows are purged (the end of its deletion). */
export async function purgePreviews(tx: WriteTx, environmentId: string): Promise<void> {
  await tx.trx.deleteFrom("previews").where("environment_id", "=", environmentId).execute();
  // The hooks of an environment go with it, and the previews still waiting for approval to copy it.
  const hooks = await tx.trx
    .selectFrom("preview_hooks")
    .select("id")
    .where("base_environment_id", "=", environmentId)
    .execute();
  if (hooks.length > 0)
    await tx.trx
      .deleteFrom("webhook_deliveries")
      .where(
        "hook_id",
        "in",
        hooks.map((h) => h.id),
      )
      .execute();
  await tx.trx.deleteFrom("preview_hooks").where("base_environment_id", "=", environmentId).execute();
  await tx.trx
    .deleteFrom("previews")
    .where("base_environment_id", "=", environmentId)
    .where("environment_id", "is", null)
    .execute();
}

/** Forgets a preview that never got an environment (a fork's, closed before approval). */
export async function dropPendingPreview(tx: WriteTx, id: string): Promise<void> {
  await tx.trx.deleteFrom("previews").where("id", "=", id).where("environment_id", "is", null).execute();
}

// ---------------------------------------------------------------- hooks

export type NewPreviewHook = Omit<PreviewHookRow, "id" | "created_at">;

export async function insertPreviewHook(tx: WriteTx, h: NewPreviewHook & { id: string }): Promise<PreviewHookRow> {
  const row: PreviewHookRow = { ...h, created_at: tx.now };
  await tx.trx.insertInto("preview_hooks").values(row).execute();
  await noteWriteSubject(tx, row.id);
  return row;
}

/** Associated data of a hook's sealed secrets (the base environment's data key seals them). */
export function hookSecretAad(hookId: string, what: "secret" | "status-token"): string {
  return `preview hook ${hookId} ${what}`;
}

export function newPreviewHookId(): string {
  return newId("pwh");
}

export async function previewHook(db: Reader, id: string): Promise<PreviewHookRow | undefined> {
  return db.selectFrom("preview_hooks").selectAll().where("id", "=", id).executeTakeFirst();
}

export async function deletePreviewHook(store: Store, workspaceId: string, id: string): Promise<void> {
  await store.write(async (tx) => {
    const res = await tx.trx
      .deleteFrom("preview_hooks")
      .where("id", "=", id)
      .where("workspace_id", "=", workspaceId)
      .executeTakeFirst();
    if (Number(res.numDeletedRows) === 0) throw notFound(`preview hook "${id}"`);
    await forgetDeliveries(tx, id);
  });
}

/** Forgets the deliveries a hook (a preview hook, or a repository's) accepted: it is gone. */
export async function forgetDeliveries(tx: WriteTx, hookId: string): Promise<void> {
  await tx.trx.deleteFrom("webhook_deliveries").where("hook_id", "=", hookId).execute();
}

/**
 * Records a delivery a hook accepts, in the transaction of what it does; false when the hook
 * accepted this delivery id before (a replay).
 */
export async function recordDelivery(tx: WriteTx, hookId: string, deliveryId: string): Promise<boolean> {
  const res = await tx.trx
    .insertInto("webhook_deliveries")
    .values({ hook_id: hookId, delivery_id: deliveryId, received_at: tx.now })
    .onConflict((oc) => oc.columns(["hook_id", "delivery_id"]).doNothing())
    .executeTakeFirst();
  return Number(res.numInsertedOrUpdatedRows ?? 0n) > 0;
}

/** Forgets deliveries received before `before` (older ones are refused by their age anyway). */
export async function pruneDeliveries(db: Reader, before: number): Promise<number> {
  const res = await db.deleteFrom("webhook_deliveries").where("received_at", "<", before).executeTakeFirst();
  return Number(res.numDeletedRows);
}
