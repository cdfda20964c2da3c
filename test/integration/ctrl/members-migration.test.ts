// Migration 0031 on a real SQLite file written up to 0027 with a workspace token: the token becomes
// a service account of its own name with the admin role (what it could do before roles), so it
// keeps working for everything of its workspace an admin may, and is refused what only an owner
// may. Installation tokens stay ownerless.
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, it } from "node:test";
import SQLite from "better-sqlite3";
import { Code } from "@connectrpc/connect";
import { Kysely, Migrator, SqliteDialect, type Migration } from "kysely";
import { sqliteDialect } from "../../../src/ctrl/db/sqlite.js";
import { MIGRATIONS } from "../../../src/ctrl/db/migrations/index.js";
import { generateToken, hashToken } from "../../../src/ctrl/domain/tokens.js";
import { MemberService } from "../../../src/gen/krane/ctrl/v1/access_pb.js";
import { ApiTokenService, ProjectService, WorkspaceService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { expectCode, startTestCtrl, tempDir } from "./support.js";

describe("migration 0031: workspace tokens from before roles", () => {
  it("become admin service accounts of their own names", async () => {
    const dir = tempDir("krane-members-migration-");
    const file = join(dir.path, "ctrl.db");
    try {
      const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: new SQLite(file) }) });
      const upTo: Record<string, Migration> = {};
      for (const [name, m] of Object.entries(MIGRATIONS))
        if (name <= "0027_workspace_tokens") upTo[name] = { up: (k) => m.up(k, sqliteDialect) };
      const old = new Migrator({
        db,
        provider: { getMigrations: async () => upTo },
        migrationTableName: "krane_migrations",
        migrationLockTableName: "krane_migrations_lock",
      });
      assert.equal((await old.migrateToLatest()).error, undefined);
      await db.destroy();
      const token = generateToken("user");
      const raw = new SQLite(file);
      raw
        .prepare("INSERT INTO workspaces (id, slug, name, k8s_namespace, created_at) VALUES (?, ?, ?, ?, ?)")
        .run("ws_acme", "acme", "Acme", "krane-acme", 1);
      raw
        .prepare("INSERT INTO api_tokens (id, name, token_hash, created_at, workspace_id) VALUES (?, ?, ?, ?, ?)")
        .run("tok_ci", "ci", hashToken(token), 1, "ws_acme");
      raw.close();

      const ctrl = await startTestCtrl(file);
      try {
        const accounts = await ctrl.client(MemberService, ctrl.adminToken).listServiceAccounts({ workspace: "acme" });
        assert.deepEqual(
          accounts.serviceAccounts.map((s) => `${s.name}=${s.role}`),
          ["ci=admin"],
        );
        const listed = await ctrl.client(ApiTokenService, token).listApiTokens({});
        assert.deepEqual(
          listed.apiTokens.map((t) => [t.name, t.serviceAccount, t.role, t.current]),
          [["ci", "ci", "admin", true]],
        );
        await ctrl.client(ProjectService, token).createProject({ workspace: "acme", slug: "web" });
        await expectCode(
          ctrl.client(WorkspaceService, token).deleteWorkspace({ workspace: "acme", confirm: "acme" }),
          Code.PermissionDenied,
        );
        const admin = (await ctrl.client(ApiTokenService, ctrl.adminToken).listApiTokens({})).apiTokens.find(
          (t) => t.name === "admin",
        );
        assert.deepEqual([admin?.serviceAccount, admin?.member, admin?.role], ["", "", ""]);
      } finally {
        await ctrl.close();
      }
    } finally {
      dir.remove();
    }
  });
});
