// Migration 0020 on a real SQLite file written up to 0015 with deletion records in the old
// audit_log: they become the installation chain's first events, in time order, and that chain
// verifies (the hash form a migration writes is the one clients check); audit_log is gone; and
// ctrl, started on the database, appends after them without breaking the chain.
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, it } from "node:test";
import SQLite from "better-sqlite3";
import { Kysely, Migrator, SqliteDialect, type Migration } from "kysely";
import { ChainVerifier } from "../../../src/contracts/audit.js";
import { sqliteDialect } from "../../../src/ctrl/db/sqlite.js";
import { MIGRATIONS } from "../../../src/ctrl/db/migrations/index.js";
import { chainHead, recordOfRow } from "../../../src/ctrl/domain/audit.js";
import { RegionService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { startTestCtrl, tempDir } from "./support.js";

describe("migration 0020: the old audit_log into the installation chain", () => {
  it("keeps every deletion record, chained and verifiable", async () => {
    const dir = tempDir("krane-audit-migration-");
    const file = join(dir.path, "ctrl.db");
    try {
      const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: new SQLite(file) }) });
      const upTo = (last: string): Record<string, Migration> => {
        const out: Record<string, Migration> = {};
        for (const [name, m] of Object.entries(MIGRATIONS))
          if (name <= last) out[name] = { up: (k) => m.up(k, sqliteDialect) };
        return out;
      };
      const old = new Migrator({
        db,
        provider: { getMigrations: async () => upTo("0015_routing_in_one_place") },
        migrationTableName: "krane_migrations",
        migrationLockTableName: "krane_migrations_lock",
      });
      assert.equal((await old.migrateToLatest()).error, undefined);
      const raw = new SQLite(file);
      const insert = raw.prepare(
        "INSERT INTO audit_log (id, at, actor, action, target_id, detail) VALUES (?, ?, ?, ?, ?, ?)",
      );
      insert.run("aud_b", 2000, "ctrl", "environment.deleted", "env_1", JSON.stringify({ slug: "prod" }));
      insert.run("aud_a", 1000, "tok_admin", "environment.delete.requested", "env_1", JSON.stringify({ slug: "prod" }));
      insert.run("aud_c", 3000, "ctrl", "project.deleted", "prj_1", "not json");
      raw.close();
      await db.destroy();

      const ctrl = await startTestCtrl(file);
      try {
        const tables = await ctrl.store.db.introspection.getTables();
        assert.ok(!tables.some((t) => t.name === "audit_log"), "audit_log is gone");
        const rows = await ctrl.store.db
          .selectFrom("audit_events")
          .selectAll()
          .where("workspace_id", "=", "")
          .orderBy("seq")
          .execute();
        assert.deepEqual(
          rows.map((r) => [Number(r.seq), r.id, r.method, r.actor_kind]),
          [
            [1, "aud_a", "legacy/environment.delete.requested", "user"],
            [2, "aud_b", "legacy/environment.deleted", "system"],
            [3, "aud_c", "legacy/project.deleted", "system"],
          ],
        );
        // ctrl appends after them (a new region is an installation event).
        await ctrl.client(RegionService, ctrl.adminToken).createRegion({ name: "eu" });
        const head = await chainHead(ctrl.store.db, "");
        assert.equal(head.seq, 4);
        const v = new ChainVerifier(head);
        for (const r of await ctrl.store.db
          .selectFrom("audit_events")
          .selectAll()
          .where("workspace_id", "=", "")
          .orderBy("seq")
          .execute())
          v.add(recordOfRow(r));
        assert.deepEqual(v.finish(), []);
      } finally {
        await ctrl.close();
      }
    } finally {
      dir.remove();
    }
  });
});
