// Upgrading a database written by the previous release (be3ed9d), on SQLite and PostgreSQL.
// The fixtures (test/fixtures/upgrade-be3ed9d, made by make.mjs there with that release's code)
// are loaded into a fresh database; this release's ctrl starts on it, which runs the new
// migrations; then nothing may be lost:
//   - every row of every table is still there, unchanged, except for what migrations 0006 and
//     0007 do (desired_objects gains `replicas`, rollout_revisions loses its copy of it;
//     environments gain the routing version, 1, routing by instances (0015 leaves the version
//     and per-region routing only), and sentinels the reported address and served version,
//     empty; krane_migrations records them — under the names the old release recorded for the
//     rest); and 0009's: its new tables, empty; deleting_at
//     (null) on workspaces, projects and environments; a revision's configuration and secrets
//     columns (null) on deployments; desired_objects.environment_id, back-filled from the
//     deployment's or sentinel's environment; migration 0010 adds two tables (idempotency keys,
//     agents' stream cursors), empty; 0008 adds the exposure tables, empty, and
//     environments.edge_auth, null; 0011 adds progressive_rollouts, empty, and
//     environments.progressive / routing_regions, null;
//   - the new replicas column equals the count inside each deployment's payload (sentinels: null),
//     and the dropped copy agreed with it;
//   - each stream's outbox still replays, version by version, to exactly the desired state;
//   - through the new ctrl, the old tokens still work, an agent's snapshot is the old desired
//     state byte for byte, status shows the old replica counts, and a new write streams as the
//     next version (PostgreSQL: through the old commit trigger) with its payload rendered from
//     the rows at the new count.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { create, fromBinary, toBinary, type DescService } from "@bufbuild/protobuf";
import { Migrator, type Kysely, type Migration } from "kysely";
import { createClient, type Client } from "@connectrpc/connect";
import SQLite from "better-sqlite3";
import pg from "pg";
import { RegionService, StatusService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import {
  ApplyDeploymentSchema,
  ClusterService,
  type DeploymentState,
} from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { RolloutService } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import type { Dialect } from "../../../src/ctrl/db/dialect.js";
import { migrateToLatest } from "../../../src/ctrl/db/migrate.js";
import { MIGRATIONS } from "../../../src/ctrl/db/migrations/index.js";
import { dialectFor } from "../../../src/ctrl/db/open.js";
import type { EnvironmentRow } from "../../../src/ctrl/db/schema.js";
import { routingPolicyOf } from "../../../src/ctrl/payloads/sentinel.js";
import { startCtrl, type RunningCtrl } from "../../../src/ctrl/server/server.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { tempDir, transportFor, withoutBookmarks } from "./support.js";

const FIXTURES = join(import.meta.dirname, "..", "..", "fixtures", "upgrade-be3ed9d");
/** The tables migration 0009 creates: empty after the upgrade. */
const TABLES_0009 = [
  "environment_config",
  "environment_secrets",
  "data_keys",
  "releases",
  "release_objects",
  "release_kinds",
  "release_status",
  "jobs",
  "job_status",
  "deletions",
  "pending_deletions",
];
const OLD_MIGRATIONS = [
  "0001_initial",
  "0002_rollouts",
  "0003_commit_sequencer",
  "0004_api_tokens",
  "0005_revoked_tokens",
];
/**
 * Tables other migrations add (empty after an upgrade): 0008, 0010_a, 0010_b, 0011, 0012, 0020 (the
 * audit log, which replaced 0009's audit_log), 0021 (previews), 0022 (instance events), 0025
 * (autoscaling decisions), 0026 (dashboard sessions), 0031 (members, service accounts). 0027 adds
 * columns only (api_tokens.workspace_id, audit_events.actor_scope), and 0031 two more to api_tokens.
 * 0028 adds registry credentials (and deployments.image_digest); 0029 adds columns only (the warm
 * window and pin of environments, the warm revision of rollouts); 0030 adds the notification tables;
 * 0032 the builds and their uploaded sources.
 * 0034 the workspaces' quotas (copied from preview_limits, which the fixture has none of).
 * 0036 the metrics history (metric_points). 0038 adds a column only (member_sessions.ip).
 * 0041 the log history (log_lines, log_retention). 0042 alert rules (alert_rules). 0043 repositories
 * (and columns of builds). 0044 API keys (api_keys, and environments.edge_api_keys). 0045 adds
 * columns only (repositories.preview_base and preview_forks; builds.preview, pr_number, pr_fork).
 * 0046 adds a column only (alert_rules.window_ms). 0048 the log archive's leases (log_archive_leases).
 * window and pin of environments, the warm revision of rollouts); 0030 adds the notification tables; 0033 the sign-in tables.
 */
const NEW_TABLES = [
  "registry_credentials",
  "notification_channels",
  "notification_events",
  "notification_deliveries",
  "smtp_settings",
  "autoscale_status",
  "dashboard_sessions",
  "instance_events",
  "audit_events",
  "audit_chains",
  "audit_sink_cursors",
  "audit_sink_leases",
  "previews",
  "preview_limits",
  "preview_hooks",
  "webhook_deliveries",
  "cluster_cursors",
  "domains",
  "endpoints",
  "gateway_reports",
  "idempotency_keys",
  "progressive_rollouts",
  "measurements",
  "members",
  "service_accounts",
  "builds",
  "build_source_chunks",
  "workspace_quotas",
  "metric_points",
  "alert_rules",
  "api_keys",
  "repositories",
  "log_lines",
  "log_retention",
  "log_archive_leases",
  "oidc_logins",
  "member_sessions",
];

type Row = Record<string, string | null>;
type Tables = Map<string, Row[]>;

interface Raw {
  tables(): Promise<Tables>;
  close(): Promise<void>;
}

/** A cell as text: bytes as hex, numbers and bigints as their digits (PostgreSQL INT8 comes as text). */
function cell(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  if (Buffer.isBuffer(v) || v instanceof Uint8Array) return `x${Buffer.from(v).toString("hex")}`;
  return String(v);
}

function normalize(rows: Record<string, unknown>[]): Row[] {
  return rows
    .map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, cell(v)])))
    .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
}

/** The database read with its plain driver (not ctrl's code). */
function rawSqlite(file: string): Raw {
  const db = new SQLite(file, { readonly: true });
  return {
    async tables() {
      const out: Tables = new Map();
      const names = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .all() as { name: string }[];
      for (const { name } of names)
        out.set(name, normalize(db.prepare(`SELECT * FROM "${name}"`).all() as Record<string, unknown>[]));
      return out;
    },
    async close() {
      db.close();
    },
  };
}

async function rawPostgres(url: string): Promise<Raw> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  return {
    async tables() {
      const out: Tables = new Map();
      const names = await c.query<{ name: string }>(
        "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name",
      );
      for (const { name } of names.rows)
        out.set(name, normalize((await c.query(`SELECT * FROM "${name}"`)).rows as Record<string, unknown>[]));
      return out;
    },
    close: () => c.end(),
  };
}

function rowsOf(t: Tables, table: string): Row[] {
  const rows = t.get(table);
  assert.ok(rows, `table ${table} is missing`);
  return rows;
}

function without(rows: Row[], column: string): Row[] {
  return normalize(rows.map(({ [column]: _gone, ...rest }) => rest));
}

function payloadOf(hex: string | null): Uint8Array {
  if (hex === null || !hex.startsWith("x")) throw new Error(`not bytes: ${hex}`);
  return Buffer.from(hex.slice(1), "hex");
}

/** Replays each (region, kind) stream's outbox from version 1; returns the desired state it ends at. */
function replay(t: Tables): Map<string, string | null> {
  const versions = rowsOf(t, "stream_versions");
  const outbox = rowsOf(t, "outbox");
  const state = new Map<string, string | null>();
  for (const s of versions) {
    const rows = outbox
      .filter((o) => o.region === s.region && o.kind === s.kind)
      .sort((a, b) => Number(a.version) - Number(b.version));
    assert.equal(Number(s.compacted_through), 0, "the fixture was never compacted");
    assert.deepEqual(
      rows.map((r) => Number(r.version)),
      Array.from({ length: Number(s.version) }, (_, i) => i + 1),
      `${s.kind}/${s.region}: dense versions up to the head`,
    );
    for (const r of rows) {
      const key = `${r.region}/${r.kind}/${r.object_id}`;
      if (r.op === "apply") state.set(key, r.payload ?? null);
      else state.delete(key);
    }
  }
  return state;
}

function desiredState(t: Tables): Map<string, string | null> {
  return new Map(rowsOf(t, "desired_objects").map((r) => [`${r.region}/${r.kind}/${r.object_id}`, r.payload ?? null]));
}

async function next(it: AsyncIterator<DeploymentState>): Promise<DeploymentState> {
  const r = await it.next();
  if (r.done) throw new Error("stream ended");
  return r.value;
}

function scenario(name: "sqlite" | "postgres", load: () => Promise<{ url: string; raw: () => Promise<Raw> }>): void {
  describe(`upgrading a ${name === "sqlite" ? "SQLite" : "PostgreSQL"} database of release be3ed9d`, () => {
    it("migrates at start and loses nothing: rows, desired objects, outbox history, tokens, streams", async () => {
      const tokens = (
        JSON.parse(readFileSync(join(FIXTURES, "tokens.json"), "utf8")) as Record<
          string,
          { admin: string; agents: { eu: string } }
        >
      )[name];
      assert.ok(tokens);
      const { url, raw } = await load();
      const r0 = await raw();
      const before = await r0.tables();
      await r0.close();
      assert.deepEqual(
        rowsOf(before, "krane_migrations").map((m) => m.name),
        OLD_MIGRATIONS,
      );
      // The old state is self-consistent to begin with.
      assert.deepEqual(replay(before), desiredState(before));
      const deploymentRows = rowsOf(before, "desired_objects").filter((r) => r.kind === "deployment");
      assert.ok(
        deploymentRows.length >= 5 &&
          new Set(deploymentRows.map((r) => fromBinary(ApplyDeploymentSchema, payloadOf(r.payload ?? null)).replicas))
            .size >= 2,
      );

      let ctrl: RunningCtrl | undefined;
      try {
        // No sweep: nothing may write between the migration and the look at what it left.
        ctrl = await startCtrl({
          databaseUrl: url,
          listen: { host: "127.0.0.1", port: 0 },
          opsListen: null,
          shutdownGraceMs: 1000,
          rolloutSweepIntervalMs: 0,
        });
        const r1 = await raw();
        const upgraded = await r1.tables();
        await r1.close();

        assert.deepEqual(
          [...upgraded.keys()].filter((t) => !NEW_TABLES.includes(t) && !TABLES_0009.includes(t)),
          [...before.keys()],
          "the same tables, and the new ones",
        );
        // The log archive leases the fixture's environments with instances as soon as ctrl runs.
        for (const t of [...TABLES_0009, ...NEW_TABLES])
          if (t !== "log_archive_leases") assert.deepEqual(rowsOf(upgraded, t), [], `${t} starts empty`);
        for (const [table, rows] of before) {
          if (
            [
              "desired_objects",
              "rollout_revisions",
              "krane_migrations",
              "environments",
              "sentinels",
              "workspaces",
              "projects",
              "deployments",
              "environment_regions",
              "api_tokens",
              "rollouts",
            ].includes(table)
          )
            continue;
          assert.deepEqual(rowsOf(upgraded, table), rows, `table ${table} is unchanged`);
        }
        const migrations = rowsOf(upgraded, "krane_migrations");
        assert.deepEqual(
          migrations.map((m) => m.name),
          Object.keys(MIGRATIONS),
          "every migration since, in order",
        );
        assert.deepEqual(Object.keys(MIGRATIONS).slice(0, OLD_MIGRATIONS.length + 2), [
          ...OLD_MIGRATIONS,
          "0006_desired_replicas",
          "0007_routing",
        ]);
        // Migration 0009: nothing being deleted, no revision with configuration or secrets.
        for (const t of ["workspaces", "projects"]) {
          assert.deepEqual(without(rowsOf(upgraded, t), "deleting_at"), rowsOf(before, t));
          for (const row of rowsOf(upgraded, t)) assert.equal(row.deleting_at, null);
        }
        const revisionColumns = ["config", "secrets", "secret_keys", "secrets_digest", "external_secrets"];
        assert.deepEqual(
          [...revisionColumns, "protocol", "image_digest"].reduce(
            (rows, c) => without(rows, c),
            rowsOf(upgraded, "deployments"),
          ),
          rowsOf(before, "deployments"),
        );
        for (const d of rowsOf(upgraded, "deployments")) {
          assert.deepEqual(
            revisionColumns.map((c) => d[c]),
            revisionColumns.map(() => null),
          );
          // Migration 0024: every revision from before speaks HTTP/1.1 to its instances.
          assert.equal(d.protocol, "http1");
          // Migration 0028: revisions from before run their image as named.
          assert.equal(d.image_digest, null);
        }
        // Migrations 0007 and 0015: the routing every environment served (by instances, version 1),
        // and nothing reported yet of it.
        const environments = rowsOf(upgraded, "environments");
        const added = [
          "routing_version",
          "deleting_at",
          "edge_auth",
          "progressive",
          "routing_regions",
          "autoscale",
          "warm_window_seconds",
          "pinned_deployment_id",
          "edge_policies",
          "edge_api_keys",
        ];
        assert.deepEqual(added.reduce(without, environments), rowsOf(before, "environments"));
        for (const e of environments)
          assert.deepEqual(
            added.map((c) => e[c]),
            // Migration 0029: the default warm window (30 minutes), nothing pinned; 0035: no edge
            // policies; 0044: no API keys.
            ["1", null, null, null, null, null, "1800", null, null, null],
          );
        // Migration 0029: no region keeps a revision warm yet.
        const warmColumns = ["warm_deployment_id", "warm_replicas", "warm_until"];
        const rollouts = rowsOf(upgraded, "rollouts");
        assert.deepEqual(warmColumns.reduce(without, rollouts), rowsOf(before, "rollouts"));
        for (const r of rollouts)
          assert.deepEqual(
            warmColumns.map((c) => r[c]),
            [null, "0", null],
          );
        // Migration 0027: every token from before is an installation token (bound to no workspace).
        const apiTokens = rowsOf(upgraded, "api_tokens");
        assert.ok(apiTokens.length > 0);
        assert.deepEqual(
          ["workspace_id", "member_id", "service_account_id"].reduce(without, apiTokens),
          rowsOf(before, "api_tokens"),
        );
        // Migration 0031: an installation token has no owner.
        for (const t of apiTokens)
          assert.deepEqual([t.workspace_id, t.member_id, t.service_account_id], [null, null, null]);
        // Migration 0025: no environment autoscales, and no region has a policy of its own.
        const regionRows = rowsOf(upgraded, "environment_regions");
        assert.deepEqual(without(regionRows, "autoscale"), rowsOf(before, "environment_regions"));
        for (const r of regionRows) assert.equal(r.autoscale, null);
        // Migration 0015: routing lives in routing_regions (empty: by instances) and routing_version only.
        for (const e of environments) assert.ok(!("routing_mode" in e) && !("routing_weights" in e));
        const sentinels = rowsOf(upgraded, "sentinels");
        assert.deepEqual(without(without(sentinels, "address"), "served_routing_version"), rowsOf(before, "sentinels"));
        for (const x of sentinels) assert.deepEqual([x.address, x.served_routing_version], [null, null]);
        assert.deepEqual(
          migrations.filter((m) => OLD_MIGRATIONS.includes(m.name ?? "")),
          rowsOf(before, "krane_migrations"),
          "old migration records untouched",
        );

        // desired_objects: the same rows plus the typed replicas, equal to what the payloads say,
        // and (0009) the environment of each, from its deployment or sentinel.
        const desired = rowsOf(upgraded, "desired_objects");
        assert.deepEqual(without(without(desired, "replicas"), "environment_id"), rowsOf(before, "desired_objects"));
        const environmentOf = new Map(
          [...rowsOf(before, "deployments"), ...rowsOf(before, "sentinels")].map((r) => [r.id, r.environment_id]),
        );
        for (const d of desired) {
          assert.ok(d.environment_id, `${d.kind} ${d.object_id}: an environment`);
          assert.equal(d.environment_id, environmentOf.get(d.object_id), `${d.kind} ${d.object_id}: its environment`);
        }
        const replicasOf = new Map<string, number>();
        for (const d of desired) {
          if (d.kind === "deployment") {
            const fromPayload = fromBinary(ApplyDeploymentSchema, payloadOf(d.payload ?? null)).replicas;
            assert.equal(d.replicas, String(fromPayload), `${d.region}/${d.object_id}: replicas column = payload`);
            replicasOf.set(`${d.object_id}/${d.region}`, fromPayload);
          } else {
            assert.equal(d.replicas, null, `${d.kind} ${d.object_id}: no per-region replicas`);
          }
        }

        // rollout_revisions: the same rows without the dropped copy, which agreed with the column.
        const oldRecords = rowsOf(before, "rollout_revisions");
        assert.deepEqual(rowsOf(upgraded, "rollout_revisions"), without(oldRecords, "replicas"));
        for (const rec of oldRecords) {
          const n = replicasOf.get(`${rec.deployment_id}/${rec.region}`);
          if (n !== undefined) assert.equal(rec.replicas, String(n), `record of ${rec.deployment_id} in ${rec.region}`);
        }
        assert.ok(oldRecords.length >= 4);

        // The outbox still replays to the desired state.
        assert.deepEqual(replay(upgraded), desiredState(upgraded));

        // Through the new ctrl: the old admin token, status with the old counts.
        const client = <S extends DescService>(service: S, token: string): Client<S> =>
          createClient(service, transportFor(ctrl?.url ?? "", token));
        const prod = { workspace: "acme", project: "shop", environment: "prod" };
        const status = await client(StatusService, tokens.admin).getEnvironmentStatus(prod);
        // …which is an installation token: installation calls are open to it.
        assert.ok((await client(RegionService, tokens.admin).listRegions({})).regions.length > 0);
        const shown = new Map(
          status.deployments.flatMap((d) =>
            (d.deployment?.regions ?? []).map((r): [string, number] => [`${d.deployment?.id}/${r.region}`, r.replicas]),
          ),
        );
        const prodIds = new Set(status.deployments.map((d) => d.deployment?.id));
        assert.deepEqual(shown, new Map([...replicasOf].filter(([k]) => prodIds.has(k.split("/")[0]))));
        assert.equal(shown.size, 4, "two revisions desired in two regions");
        assert.equal(status.sentinels.length, 2);

        // The old agent token: a snapshot of eu is the old desired state, byte for byte.
        const head = Number(
          rowsOf(before, "stream_versions").find((s) => s.region === "eu" && s.kind === "deployment")?.version,
        );
        const ac = new AbortController();
        const stream = withoutBookmarks(
          client(ClusterService, tokens.agents.eu).watchDeployments(
            { region: "eu", versionLastSeen: 0n },
            { signal: ac.signal },
          ),
        )[Symbol.asyncIterator]();
        assert.equal((await next(stream)).state.case, "snapshotStart");
        const snapshot = new Map<string, string>();
        for (;;) {
          const m = await next(stream);
          if (m.state.case === "snapshotEnd") {
            assert.equal(m.state.value.headVersion, BigInt(head));
            break;
          }
          assert.equal(m.state.case, "apply");
          if (m.state.case === "apply") snapshot.set(m.state.value.deploymentId, m.state.value.replicas.toString());
        }
        const oldEu = new Map(
          deploymentRows
            .filter((r) => r.region === "eu")
            .map((r) => {
              const msg = fromBinary(ApplyDeploymentSchema, payloadOf(r.payload ?? null));
              return [msg.deploymentId, msg.replicas.toString()];
            }),
        );
        assert.deepEqual(snapshot, oldEu);

        // A new write: scaling prod in eu streams as the next version, rendered at the new count.
        await client(RolloutService, tokens.admin).scale({ ...prod, region: "eu", replicas: 6 });
        const m = await next(stream);
        assert.equal(m.version, BigInt(head + 1));
        assert.equal(m.state.case, "apply");
        ac.abort();
        const r2 = await raw();
        const written = await r2.tables();
        await r2.close();
        const changed = rowsOf(written, "desired_objects").filter(
          (d) =>
            d.region === "eu" && d.kind === "deployment" && d.replicas !== String(replicasOf.get(`${d.object_id}/eu`)),
        );
        assert.ok(changed.length >= 1, "the scale changed a desired count in eu");
        for (const d of rowsOf(written, "desired_objects").filter((x) => x.kind === "deployment")) {
          assert.equal(
            d.replicas,
            String(fromBinary(ApplyDeploymentSchema, payloadOf(d.payload ?? null)).replicas),
            "payloads are rendered at the column's count",
          );
        }
        assert.deepEqual(replay(written), desiredState(written));
      } finally {
        await ctrl?.close();
      }
    });
  });
}

/** Migrates to `last` only (the schema an older release left). */
async function migrateTo(db: Kysely<unknown>, dialect: Dialect, last: string): Promise<void> {
  const all: Record<string, Migration> = {};
  for (const [name, m] of Object.entries(MIGRATIONS)) all[name] = { up: (x) => m.up(x, dialect) };
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => all },
    migrationTableName: "krane_migrations",
    migrationLockTableName: "krane_migrations_lock",
  });
  const { error } = await migrator.migrateTo(last);
  if (error !== undefined) throw error;
}

/**
 * The back-fill of migration 0006 pages through the desired deployments (1,000 at a time, in key
 * order, over region boundaries): 2,600 rows in three regions at varied counts all get theirs.
 */
function backfillScenario(name: string, url: () => Promise<string>): void {
  it(`migration 0006 back-fills every desired deployment's replicas across pages (${name})`, async () => {
    const u = await url();
    const dialect = dialectFor(u);
    const conn = await dialect.connect({ url: u, poolSize: 2 });
    try {
      const db = conn.db as unknown as Kysely<unknown>;
      await migrateTo(db, dialect, "0005_revoked_tokens");
      const expected = new Map<string, number>();
      const rows: { region: string; kind: string; object_id: string; payload: Buffer }[] = [];
      for (const [r, region] of ["ap", "eu", "us"].entries()) {
        for (let i = 0; i < 800 + r * 100; i++) {
          const id = `dep_${String(i).padStart(6, "0")}`;
          const replicas = (i * 7 + r) % 13;
          expected.set(`${region}/${id}`, replicas);
          rows.push({
            region,
            kind: "deployment",
            object_id: id,
            payload: Buffer.from(
              toBinary(ApplyDeploymentSchema, create(ApplyDeploymentSchema, { deploymentId: id, region, replicas })),
            ),
          });
        }
        rows.push({ region, kind: "sentinel", object_id: `snt_${region}`, payload: Buffer.from([0x0a, 0x01, 0x61]) });
      }
      for (let i = 0; i < rows.length; i += 200)
        await conn.db
          .insertInto("desired_objects")
          .values(rows.slice(i, i + 200))
          .execute();
      await migrateToLatest(db, dialect);
      const after = await conn.db
        .selectFrom("desired_objects")
        .select(["region", "kind", "object_id", "replicas"])
        .execute();
      assert.equal(after.length, rows.length);
      for (const a of after) {
        if (a.kind === "sentinel") assert.equal(a.replicas, null);
        else assert.equal(a.replicas, expected.get(`${a.region}/${a.object_id}`), `${a.region}/${a.object_id}`);
      }
    } finally {
      await conn.close();
    }
  });
}

/**
 * Migration 0015 folds the environment-wide routing of 0007 into routing_regions: a weighted
 * environment's weights become each of its regions' routing where the region had none of its
 * own, and every sentinel renders the same policy before and after (routing_version unchanged).
 */
function routingScenario(name: string, url: () => Promise<string>): void {
  it(`migration 0015 keeps every region's routing when it drops the environment-wide columns (${name})`, async () => {
    const u = await url();
    const dialect = dialectFor(u);
    const conn = await dialect.connect({ url: u, poolSize: 2 });
    try {
      await migrateTo(conn.db as unknown as Kysely<unknown>, dialect, "0014_idempotency_subject");
      const db = conn.db;
      await db
        .insertInto("workspaces")
        .values({ id: "ws_1", slug: "acme", name: "Acme", k8s_namespace: "ws-acme", created_at: 1 })
        .execute();
      await db
        .insertInto("projects")
        .values({ id: "prj_1", workspace_id: "ws_1", slug: "shop", name: "Shop", created_at: 1 })
        .execute();
      await db
        .insertInto("regions")
        .values(["eu", "us", "ap"].map((name) => ({ name, created_at: 1 })))
        .execute();
      const weights = [
        { deploymentId: "dep_a", weight: 90 },
        { deploymentId: "dep_b", weight: 10 },
      ];
      const usOwn = { us: { weights: [{ deploymentId: "dep_b", weight: 100 }], preview: "dep_b" } };
      const environments: Record<string, { mode: string; weights: string; regions: string[]; own: string | null }> = {
        env_weighted: {
          mode: "weighted",
          weights: JSON.stringify(weights),
          regions: ["eu", "us"],
          own: JSON.stringify(usOwn),
        },
        env_instances: { mode: "instances", weights: "[]", regions: ["eu"], own: null },
        env_no_weights: { mode: "weighted", weights: "[]", regions: ["ap"], own: null },
      };
      for (const [id, e] of Object.entries(environments)) {
        const row = {
          id,
          workspace_id: "ws_1",
          project_id: "prj_1",
          slug: id.replace("_", "-"),
          sentinel_image: "",
          sentinel_replicas: 1,
          sentinel_cpu_millicores: 100,
          sentinel_memory_mib: 64,
          strategy: "RollingUpdate",
          max_surge: "25%",
          max_unavailable: "25%",
          min_ready_seconds: 0,
          progress_deadline_seconds: 600,
          revision_history_limit: 10,
          paused: 0,
          last_revision: 0,
          created_at: 1,
          updated_at: 1,
          routing_version: 7,
          routing_regions: e.own,
          // The columns 0015 drops, as an environment of 0007 to 0014 has them.
          routing_mode: e.mode,
          routing_weights: e.weights,
        };
        await db
          .insertInto("environments")
          .values(row as unknown as EnvironmentRow)
          .execute();
        await db
          .insertInto("environment_regions")
          .values(e.regions.map((region) => ({ environment_id: id, region, replicas: 1 })))
          .execute();
      }
      await migrateToLatest(conn.db as unknown as Kysely<unknown>, dialect);
      const rows = await db.selectFrom("environments").selectAll().orderBy("id").execute();
      for (const r of rows) {
        assert.ok(
          !("routing_mode" in r) && !("routing_weights" in r),
          `${r.id}: the environment-wide columns are gone`,
        );
        assert.equal(Number(r.routing_version), 7, `${r.id}: the same routing version`);
      }
      const byId = new Map(rows.map((r) => [r.id, r]));
      const policy = (id: string, region: string) => {
        const env = byId.get(id);
        assert.ok(env);
        const p = routingPolicyOf(env, region);
        return { mode: p.mode, revisions: p.revisions, preview: p.previewDeploymentId };
      };
      assert.deepEqual(policy("env_weighted", "eu"), { mode: "weighted", revisions: weights, preview: "" });
      assert.deepEqual(policy("env_weighted", "us"), {
        mode: "weighted",
        revisions: usOwn.us.weights,
        preview: "dep_b",
      });
      for (const [id, region] of [
        ["env_instances", "eu"],
        ["env_no_weights", "ap"],
      ] as const) {
        assert.deepEqual(policy(id, region), { mode: "instances", revisions: [], preview: "" });
        assert.equal(byId.get(id)?.routing_regions, null, `${id}: nothing to fold`);
      }
    } finally {
      await conn.close();
    }
  });
}

let server: TestPostgres | undefined;
after(async () => server?.stop());
const dir = tempDir("krane-upgrade-");
after(() => dir.remove());

describe("migration 0006 on a large region", () => {
  backfillScenario("SQLite", async () => join(dir.path, "backfill.db"));
  backfillScenario("PostgreSQL", async () => {
    server ??= await startPostgres();
    return server.newDatabase();
  });
});

describe("migration 0015: routing in one place", () => {
  routingScenario("SQLite", async () => join(dir.path, "routing.db"));
  routingScenario("PostgreSQL", async () => {
    server ??= await startPostgres();
    return server.newDatabase();
  });
});

scenario("sqlite", async () => {
  const file = join(dir.path, "ctrl.db");
  const db = new SQLite(file);
  db.exec(readFileSync(join(FIXTURES, "sqlite.sql"), "utf8"));
  db.close();
  return { url: file, raw: async () => rawSqlite(file) };
});

scenario("postgres", async () => {
  server ??= await startPostgres();
  const url = await server.newDatabase();
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    // pg_dump's plain output, minus psql's own commands (\restrict …).
    const script = readFileSync(join(FIXTURES, "postgres.sql"), "utf8")
      .split("\n")
      .filter((l) => !l.startsWith("\\"))
      .join("\n");
    await c.query(script);
  } finally {
    await c.end();
  }
  return { url, raw: () => rawPostgres(url) };
});
