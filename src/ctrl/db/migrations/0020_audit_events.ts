// Migration 0020_audit_events: the audit log as hash chains, one per workspace and one for the
// installation (workspace_id ""):
//   - audit_events: one row per event (who, what, from where, the outcome, the field-level
//     changes as JSON text, and the chain's links: seq dense per chain, prev_hash, hash);
//   - audit_chains: each chain's head (last seq and hash) and the anchor retention leaves (the
//     last pruned event's seq and hash);
//   - audit_sink_cursors: per sink and chain, the last event delivered; audit_sink_leases: which
//     ctrl replica delivers a sink (the lease expires if it stops).
// The deletion records 0009 kept in audit_log become the installation chain's first events (method
// `legacy/<action>`), hashed here with the chain's version-1 form (src/contracts/audit.ts), and
// audit_log goes. Never edit once shipped.
import { createHash } from "node:crypto";
import { sql, type Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

interface LegacyRow {
  id: string;
  at: number | string;
  actor: string;
  action: string;
  target_id: string;
  detail: string;
}

const GENESIS = "0".repeat(64);

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    // audit_events.targets is a JSON list of ids, .changes a JSON list of field changes.
    await runSchema(db)`
      create table "audit_events" ("id" text primary key, "workspace_id" text not null, "seq" bigint not null,
        "at" bigint not null, "actor_kind" text not null, "actor_id" text not null, "actor_name" text not null,
        "method" text not null, "targets" text not null, "request_id" text not null, "client_ip" text not null,
        "user_agent" text not null, "idempotency_key" text not null, "code" text not null, "message" text not null,
        "changes" text not null, "prev_hash" text not null, "hash" text not null);
      create unique index "audit_events_chain" on "audit_events" ("workspace_id", "seq");
      create index "audit_events_at" on "audit_events" ("workspace_id", "at");
      create table "audit_chains" ("workspace_id" text primary key, "seq" bigint not null, "hash" text not null,
        "pruned_through_seq" bigint not null, "pruned_through_hash" text not null, "updated_at" bigint not null);
      create table "audit_sink_cursors" ("sink" text not null, "workspace_id" text not null, "seq" bigint not null,
        constraint "audit_sink_cursors_pk" primary key ("sink", "workspace_id"));
      create table "audit_sink_leases" ("sink" text primary key, "owner" text not null, "expires_at" bigint not null);
    `;

    const legacy = (
      await sql<LegacyRow>`SELECT id, at, actor, action, target_id, detail FROM audit_log ORDER BY at, id`.execute(db)
    ).rows;
    let prev = GENESIS;
    let seq = 0;
    let last = 0;
    for (const row of legacy) {
      seq++;
      const at = Number(row.at);
      last = at;
      let detail: unknown;
      try {
        detail = JSON.parse(row.detail);
      } catch {
        detail = row.detail;
      }
      const system = row.actor === "ctrl";
      const ev = {
        id: row.id,
        workspace_id: "",
        seq,
        at,
        actor_kind: system ? "system" : "user",
        actor_id: system ? "ctrl" : "",
        actor_name: row.actor,
        method: `legacy/${row.action}`,
        targets: [row.target_id],
        request_id: "",
        client_ip: "",
        user_agent: "",
        idempotency_key: "",
        code: "ok",
        message: "",
        changes: [{ field: "detail", op: "added", after: detail }],
        prev_hash: prev,
      };
      // The version-1 hashed form: every field but the hash, in this order, as JSON.
      const hash = createHash("sha256")
        .update(
          JSON.stringify([
            "krane.audit.v1",
            ev.id,
            ev.workspace_id,
            ev.seq,
            ev.at,
            ev.actor_kind,
            ev.actor_id,
            ev.actor_name,
            ev.method,
            ev.targets,
            ev.request_id,
            ev.client_ip,
            ev.user_agent,
            ev.idempotency_key,
            ev.code,
            ev.message,
            ev.changes,
            ev.prev_hash,
          ]),
        )
        .digest("hex");
      await sql`INSERT INTO audit_events (id, workspace_id, seq, at, actor_kind, actor_id, actor_name, method, targets,
        request_id, client_ip, user_agent, idempotency_key, code, message, changes, prev_hash, hash)
        VALUES (${ev.id}, ${ev.workspace_id}, ${ev.seq}, ${ev.at}, ${ev.actor_kind}, ${ev.actor_id}, ${ev.actor_name},
        ${ev.method}, ${JSON.stringify(ev.targets)}, '', '', '', '', 'ok', '', ${JSON.stringify(ev.changes)},
        ${ev.prev_hash}, ${hash})`.execute(db);
      prev = hash;
    }
    if (seq > 0)
      await sql`INSERT INTO audit_chains (workspace_id, seq, hash, pruned_through_seq, pruned_through_hash, updated_at)
        VALUES ('', ${seq}, ${prev}, 0, ${GENESIS}, ${last})`.execute(db);
    await runSchema(db)`drop table "audit_log";`;
  },
};
