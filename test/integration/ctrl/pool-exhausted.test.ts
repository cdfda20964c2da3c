// ctrl's PostgreSQL pool full under a real `krane ctrl serve`: with every connection of the pool
// held by a query that waits on a lock someone else holds, a further call waits the pool's bounded
// time and is answered resource_exhausted naming the pool (a client retries that with backoff),
// instead of hanging until its deadline or answering internal. Once the lock goes, the waiting
// calls finish with their real answers and ctrl serves again: nothing stuck, nothing half-applied.
import { randomBytes } from "node:crypto";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Code, createClient } from "@connectrpc/connect";
import pg from "pg";
import { WorkspaceService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { POOL_WAIT_MS } from "../../../src/ctrl/db/postgres.js";
import { generateToken } from "../../../src/ctrl/domain/tokens.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { eventually } from "../../support/cluster.js";
import { spawnCtrl, type CtrlProcess } from "./process.js";
import { expectCode, tempDir, transportFor } from "./support.js";

const POOL_SIZE = 2;
const dir = tempDir();
const admin = generateToken("user");
let postgres: TestPostgres;
let url: string;
let ctrl: CtrlProcess;

before(async () => {
  postgres = await startPostgres();
  url = await postgres.newDatabase();
  const tokenFile = join(dir.path, "admin-token");
  writeFileSync(tokenFile, `${admin}\n`, { mode: 0o600 });
  ctrl = await spawnCtrl(["--database", url, "--admin-token-file", tokenFile, "--pool-size", String(POOL_SIZE)], {
    KRANE_MASTER_KEY: randomBytes(32).toString("base64"),
  });
});

after(async () => {
  await ctrl?.stop();
  await postgres?.stop();
  dir.remove();
});

test(
  "a full pool answers resource_exhausted after its bounded wait; the waiting calls finish once the lock goes",
  { timeout: 120_000 },
  async () => {
    const client = createClient(WorkspaceService, transportFor(ctrl.url, admin));
    await client.createWorkspace({ slug: "acme", name: "Acme" });

    const locker = new pg.Client({ connectionString: url });
    await locker.connect();
    try {
      await locker.query("BEGIN");
      await locker.query("LOCK TABLE workspaces IN ACCESS EXCLUSIVE MODE");
      // As many reads as the pool has connections: each holds one while it waits on the lock.
      const held = Array.from({ length: POOL_SIZE }, () => client.listWorkspaces({}));
      await eventually(
        "every pool connection waiting on the lock",
        async () => {
          const r = await locker.query<{ n: string }>(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
          );
          return Number(r.rows[0]?.n ?? 0) >= POOL_SIZE ? true : undefined;
        },
        30_000,
      );
      const started = Date.now();
      await expectCode(
        client.getWorkspace({ workspace: "acme" }),
        Code.ResourceExhausted,
        /no free connection in ctrl's pool/,
      );
      const waited = Date.now() - started;
      // It waited for a connection (the bounded wait), it was not refused without trying.
      assert.ok(
        waited >= POOL_WAIT_MS - 500,
        `answered after ${waited} ms, before the pool's wait of ${POOL_WAIT_MS} ms`,
      );
      await locker.query("COMMIT");
      const answers = await Promise.all(held);
      for (const a of answers)
        assert.deepEqual(
          a.workspaces.map((w) => w.slug),
          ["acme"],
        );
    } finally {
      await locker.end();
    }
    // Served again, and a write goes through.
    await client.createWorkspace({ slug: "after", name: "After" });
    const list = await client.listWorkspaces({});
    assert.deepEqual(list.workspaces.map((w) => w.slug).sort(), ["acme", "after"]);
  },
);
