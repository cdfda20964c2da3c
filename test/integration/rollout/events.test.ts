// Rollout events on real SQLite and PostgreSQL: a pass that emits more events than one INSERT
// may bind (a first pass over thousands of revisions scales each down, one event each) keeps
// the newest EVENTS_KEPT, numbered as if all had been written, and later passes continue the
// numbering.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { Store } from "../../../src/ctrl/db/store.js";
import { appendEvents, EVENTS_KEPT } from "../../../src/ctrl/domain/rollouts.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { tempDir } from "../ctrl/support.js";

const dir = tempDir("krane-events-");
let server: TestPostgres | undefined;
after(async () => {
  await server?.stop();
  dir.remove();
});

function scenario(name: string, url: () => Promise<string>): void {
  it(`keeps the newest events of a pass with 12,000 of them, numbered in order (${name})`, async () => {
    const store = await Store.open({ url: await url() });
    try {
      const events = (n: number, tag: string) =>
        Array.from({ length: n }, (_, i) => ({
          type: "Normal",
          reason: "ScalingReplicaSet",
          message: `${tag} ${i + 1}`,
        }));
      const seqs = async () =>
        (
          await store.db
            .selectFrom("rollout_events")
            .select(["seq", "message"])
            .where("environment_id", "=", "env_1")
            .where("region", "=", "eu")
            .orderBy("seq")
            .execute()
        ).map((r) => [Number(r.seq), r.message] as const);
      await store.write((tx) => appendEvents(tx, "env_1", "eu", events(3, "first")));
      assert.deepEqual(await seqs(), [
        [1, "first 1"],
        [2, "first 2"],
        [3, "first 3"],
      ]);
      await store.write((tx) => appendEvents(tx, "env_1", "eu", events(12_000, "big")));
      const big = await seqs();
      assert.equal(big.length, EVENTS_KEPT);
      assert.deepEqual(big[0], [12_003 - EVENTS_KEPT + 1, `big ${12_000 - EVENTS_KEPT + 1}`]);
      assert.deepEqual(big.at(-1), [12_003, "big 12000"]);
      await store.write((tx) => appendEvents(tx, "env_1", "eu", events(2, "next")));
      const after2 = await seqs();
      assert.equal(after2.length, EVENTS_KEPT);
      assert.deepEqual(after2.slice(-2), [
        [12_004, "next 1"],
        [12_005, "next 2"],
      ]);
    } finally {
      await store.close();
    }
  });
}

describe("rollout events", () => {
  scenario("SQLite", async () => join(dir.path, "events.db"));
  scenario("PostgreSQL", async () => {
    server ??= await startPostgres();
    return server.newDatabase();
  });
});
