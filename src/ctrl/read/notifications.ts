// A workspace's notification channels with where their deliveries stand (pending, failing).
// Credentials are never read here.
import { sql, type Kysely } from "kysely";
import type { Database, NotificationChannelRow } from "../db/schema.js";
import { FAILING_AFTER } from "../domain/notifications.js";

type Reader = Kysely<Database>;

export interface ChannelView {
  channel: Omit<NotificationChannelRow, "url_sealed" | "secret_sealed">;
  /** "ok", "failing" or "new". */
  state: string;
  pending: number;
}

export function channelState(c: { consecutive_failures: number; last_success_at: number | null }): string {
  if (Number(c.consecutive_failures) >= FAILING_AFTER) return "failing";
  return c.last_success_at === null ? "new" : "ok";
}

export async function listChannels(db: Reader, workspaceId: string): Promise<ChannelView[]> {
  const rows = await db
    .selectFrom("notification_channels")
    .select([
      "id",
      "workspace_id",
      "name",
      "type",
      "target",
      "config",
      "events",
      "environments",
      "consecutive_failures",
      "last_error",
      "last_failure_at",
      "last_success_at",
      "dropped",
      "created_at",
    ])
    .where("workspace_id", "=", workspaceId)
    .orderBy("name")
    .execute();
  if (rows.length === 0) return [];
  const pending = await db
    .selectFrom("notification_deliveries")
    .select(["channel_id", sql<number>`count(*)`.as("n")])
    .where("state", "=", "pending")
    .where(
      "channel_id",
      "in",
      rows.map((r) => r.id),
    )
    .groupBy("channel_id")
    .execute();
  const byId = new Map(pending.map((p) => [p.channel_id, Number(p.n)]));
  return rows.map((c) => ({ channel: c, state: channelState(c), pending: byId.get(c.id) ?? 0 }));
}
