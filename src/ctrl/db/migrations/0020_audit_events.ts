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
import type { KraneMigration } from "./migration.js";

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
    await db.schema
      .createTable("audit_events")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("seq", "bigint", (c) => c.notNull())
      .addColumn("at", "bigint", (c) => c.notNull())
      .addColumn("actor_kind", "text", (c) => c.notNull())
      .addColumn("actor_id", "text", (c) => c.notNull())
      .addColumn("actor_name", "text", (c) => c.notNull())
      .addColumn("method", "text", (c) => c.notNull())
      // JSON list of ids.
      .addColumn("targets", "text", (c) => c.notNull())
      .addColumn("request_id", "text", (c) => c.notNull())
      .addColumn("client_ip", "text", (c) => c.notNull())
      .addColumn("user_agent", "text", (c) => c.notNull())
      .addColumn("idempotency_key", "text", (c) => c.notNull())
      .addColumn("code", "text", (c) => c.notNull())
      .addColumn("message", "text", (c) => c.notNull())
      // JSON list of field changes.
      .addColumn("changes", "text", (c) => c.notNull())
      .addColumn("prev_hash", "text", (c) => c.notNull())
      .addColumn("hash", "text", (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("audit_events_chain")
      .on("audit_events")
      .columns(["workspace_id", "seq"])
      .unique()
      .execute();
    await db.schema.createIndex("audit_events_at").on("audit_events").columns(["workspace_id", "at"]).execute();

    await db.schema
      .createTable("audit_chains")
      .addColumn("workspace_id", "text", (c) => c.primaryKey())
      .addColumn("seq", "bigint", (c) => c.notNull())
      .addColumn("hash", "text", (c) => c.notNull())
      .addColumn("pruned_through_seq", "bigint", (c) => c.notNull())
      .addColumn("pruned_through_hash", "text", (c) => c.notNull())
      .addColumn("updated_at", "bigint", (c) => c.notNull())
      .execute();

    await db.schema
      .createTable("audit_sink_cursors")
      .addColumn("sink", "text", (c) => c.notNull())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("seq", "bigint", (c) => c.notNull())
      .addPrimaryKeyConstraint("audit_sink_cursors_pk", ["sink", "workspace_id"])
      .execute();
    await db.schema
      .createTable("audit_sink_leases")
      .addColumn("sink", "text", (c) => c.primaryKey())
      .addColumn("owner", "text", (c) => c.notNull())
      .addColumn("expires_at", "bigint", (c) => c.notNull())
      .execute();

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
    await db.schema.dropTable("audit_log").execute();
  },
};
