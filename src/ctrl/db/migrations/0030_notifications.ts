// Migration 0030_notifications: notifications.
//  - notification_channels: a workspace's channels (slack, webhook, email), their subscriptions
//    (events, environments as "project/env"), credentials sealed with the workspace's data key,
//    and their delivery health (failures in a row, the last error, events dropped);
//  - notification_events: what happened, written in the transaction of the change, numbered per
//    lane (an environment, or "ws:<workspace>" for the workspace's own), so deliveries keep the
//    order the changes committed in; the id is the receivers' idempotency key;
//  - notification_deliveries: one per (channel, event) the channel subscribed to when the event
//    was written: the outbox the deliverer drains, head of each (channel, lane) first;
//  - smtp_settings: the installation's SMTP server (one row), its password sealed.
// Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>, dialect): Promise<void> {
    await db.schema
      .createTable("notification_channels")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("type", "text", (c) => c.notNull())
      .addColumn("target", "text", (c) => c.notNull())
      .addColumn("config", "text", (c) => c.notNull())
      .addColumn("url_sealed", dialect.binaryType)
      .addColumn("secret_sealed", dialect.binaryType)
      .addColumn("events", "text", (c) => c.notNull())
      .addColumn("environments", "text", (c) => c.notNull())
      .addColumn("consecutive_failures", "integer", (c) => c.notNull())
      .addColumn("last_error", "text")
      .addColumn("last_failure_at", "bigint")
      .addColumn("last_success_at", "bigint")
      .addColumn("dropped", "bigint", (c) => c.notNull())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addUniqueConstraint("notification_channels_name", ["workspace_id", "name"])
      .execute();

    await db.schema
      .createTable("notification_events")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("environment_id", "text")
      .addColumn("lane", "text", (c) => c.notNull())
      .addColumn("seq", "bigint", (c) => c.notNull())
      .addColumn("type", "text", (c) => c.notNull())
      .addColumn("at", "bigint", (c) => c.notNull())
      .addColumn("body", "text", (c) => c.notNull())
      .addUniqueConstraint("notification_events_lane_seq", ["lane", "seq"])
      .execute();
    await db.schema.createIndex("notification_events_at").on("notification_events").columns(["at"]).execute();

    await db.schema
      .createTable("notification_deliveries")
      .addColumn("channel_id", "text", (c) => c.notNull())
      .addColumn("event_id", "text", (c) => c.notNull())
      .addColumn("lane", "text", (c) => c.notNull())
      .addColumn("seq", "bigint", (c) => c.notNull())
      .addColumn("state", "text", (c) => c.notNull())
      .addColumn("attempts", "integer", (c) => c.notNull())
      .addColumn("next_attempt_at", "bigint", (c) => c.notNull())
      .addColumn("last_error", "text")
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addColumn("done_at", "bigint")
      .addPrimaryKeyConstraint("notification_deliveries_pk", ["channel_id", "event_id"])
      .execute();
    await db.schema
      .createIndex("notification_deliveries_due")
      .on("notification_deliveries")
      .columns(["state", "next_attempt_at"])
      .execute();
    await db.schema
      .createIndex("notification_deliveries_lane")
      .on("notification_deliveries")
      .columns(["channel_id", "lane", "state", "seq"])
      .execute();
    await db.schema
      .createIndex("notification_deliveries_event")
      .on("notification_deliveries")
      .columns(["event_id"])
      .execute();

    await db.schema
      .createTable("smtp_settings")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("host", "text", (c) => c.notNull())
      .addColumn("port", "integer", (c) => c.notNull())
      .addColumn("security", "text", (c) => c.notNull())
      .addColumn("username", "text", (c) => c.notNull())
      .addColumn("password_sealed", dialect.binaryType)
      .addColumn("from_address", "text", (c) => c.notNull())
      .addColumn("updated_at", "bigint", (c) => c.notNull())
      .execute();
  },
};
