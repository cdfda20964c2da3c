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
import { binaryType, runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>, dialect): Promise<void> {
    const bytes = binaryType(db, dialect);
    await runSchema(db)`
      create table "notification_channels" ("id" text primary key, "workspace_id" text not null, "name" text not null,
        "type" text not null, "target" text not null, "config" text not null, "url_sealed" ${bytes},
        "secret_sealed" ${bytes}, "events" text not null, "environments" text not null,
        "consecutive_failures" integer not null, "last_error" text, "last_failure_at" bigint,
        "last_success_at" bigint, "dropped" bigint not null, "created_at" bigint not null,
        constraint "notification_channels_name" unique ("workspace_id", "name"));
      create table "notification_events" ("id" text primary key, "workspace_id" text not null, "environment_id" text,
        "lane" text not null, "seq" bigint not null, "type" text not null, "at" bigint not null, "body" text not null,
        constraint "notification_events_lane_seq" unique ("lane", "seq"));
      create index "notification_events_at" on "notification_events" ("at");
      create table "notification_deliveries" ("channel_id" text not null, "event_id" text not null,
        "lane" text not null, "seq" bigint not null, "state" text not null, "attempts" integer not null,
        "next_attempt_at" bigint not null, "last_error" text, "created_at" bigint not null, "done_at" bigint,
        constraint "notification_deliveries_pk" primary key ("channel_id", "event_id"));
      create index "notification_deliveries_due" on "notification_deliveries" ("state", "next_attempt_at");
      create index "notification_deliveries_lane" on "notification_deliveries" ("channel_id", "lane", "state", "seq");
      create index "notification_deliveries_event" on "notification_deliveries" ("event_id");
      create table "smtp_settings" ("id" text primary key, "host" text not null, "port" integer not null,
        "security" text not null, "username" text not null, "password_sealed" ${bytes}, "from_address" text not null,
        "updated_at" bigint not null);
    `;
  },
};
