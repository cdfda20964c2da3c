// Migration 0003_commit_sequencer (PostgreSQL only): allocate outbox versions at commit time.
//
// Before this, a writer bumped its stream's counter row from Node and held that row lock until
// its COMMIT came back: a client round trip (plus any event-loop lag under load) during which no
// other writer of the region could commit.
//
// Now a writer only inserts its changes into `outbox_staging`, in the same statement that
// changes `desired_objects` (no lock on the counter). A deferred constraint trigger fires inside
// the COMMIT, on the server: it takes the counter row locks, numbers the staged rows, moves them
// into `outbox`, queues the NOTIFYs, and the commit completes. The lock still serializes commits
// of one stream in version order (so a reader that sees version v can see every version below
// it) but is held only for the commit itself, never across a round trip. Versions are still
// allocated inside the writer's transaction, and a rolled-back transaction leaves no gap.
//
// The staging table is UNLOGGED: its rows never outlive the transaction that wrote them.
// The trigger fires once per transaction (`head` marks its first staged row) and handles every
// stream the transaction touched in (kind, region) order, so two writers of several regions lock
// counters in the same order and cannot deadlock.
//
// The NOTIFY channel is written out here ('krane_outbox'): ../notify.ts LISTENs on the same name.
// Never edit once shipped.
import { sql, type Kysely } from "kysely";
import type { KraneMigration, MigrationDialect } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>, dialect: MigrationDialect): Promise<void> {
    // SQLite has one writer at a time: its transaction is the lock, nothing to shorten.
    if (!dialect.versionsAtCommit) return;
    await sql`
      CREATE UNLOGGED TABLE outbox_staging (
        xact xid8 NOT NULL DEFAULT pg_current_xact_id(),
        kind text NOT NULL,
        region text NOT NULL,
        seq integer NOT NULL,
        head boolean NOT NULL,
        object_id text NOT NULL,
        op text NOT NULL,
        payload bytea NOT NULL,
        created_at bigint NOT NULL
      )`.execute(db);
    await sql`CREATE INDEX outbox_staging_xact ON outbox_staging (xact, kind, region, seq)`.execute(db);
    await sql`
      CREATE FUNCTION krane_outbox_commit() RETURNS trigger LANGUAGE plpgsql AS $fn$
      DECLARE
        me xid8 := pg_current_xact_id();
        s record;
        last bigint;
      BEGIN
        FOR s IN SELECT kind, region, count(*) AS n FROM outbox_staging
                 WHERE xact = me GROUP BY kind, region ORDER BY kind, region LOOP
          UPDATE stream_versions SET version = version + s.n
            WHERE region = s.region AND kind = s.kind RETURNING version INTO last;
          IF NOT FOUND THEN
            INSERT INTO stream_versions (region, kind, version, compacted_through)
              VALUES (s.region, s.kind, 0, 0) ON CONFLICT DO NOTHING;
            UPDATE stream_versions SET version = version + s.n
              WHERE region = s.region AND kind = s.kind RETURNING version INTO last;
          END IF;
          INSERT INTO outbox (region, kind, version, object_id, op, payload, created_at)
            SELECT region, kind, last - s.n + row_number() OVER (ORDER BY seq), object_id, op, payload, created_at
            FROM outbox_staging WHERE xact = me AND kind = s.kind AND region = s.region;
          PERFORM pg_notify('krane_outbox', s.kind || '/' || s.region || '/' || last::text);
        END LOOP;
        DELETE FROM outbox_staging WHERE xact = me;
        RETURN NULL;
      END
      $fn$`.execute(db);
    await sql`
      CREATE CONSTRAINT TRIGGER outbox_staging_commit
        AFTER INSERT ON outbox_staging
        DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW WHEN (NEW.head)
        EXECUTE FUNCTION krane_outbox_commit()`.execute(db);
  },
};
