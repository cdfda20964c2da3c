// The log history store and the archive's leases on a real PostgreSQL (the same checks as on SQLite in
// test/unit/ctrl/logs/history.test.ts): see test/support/log-history.ts.
import { after, before, describe, it } from "node:test";
import { Store } from "../../../src/ctrl/db/store.js";
import { checkArchiveLeases, checkLogHistory } from "../../support/log-history.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";

describe("log history store (PostgreSQL)", () => {
  let pg: TestPostgres;
  let store: Store;
  before(async () => {
    pg = await startPostgres();
    store = await Store.open({ url: await pg.newDatabase() });
  });
  after(async () => {
    await store?.close();
    await pg?.stop();
  });

  it("keeps each line once, searches to the seam, prunes by retention and bound", async () => {
    await checkLogHistory(store);
  });

  it("leases an environment's archive to one replica at a time; another takes it once it ended", async () => {
    const clock = { now: 1_800_000_000_000 };
    const leases = await Store.open({ url: await pg.newDatabase() }, { clock: () => clock.now });
    try {
      await checkArchiveLeases(leases, clock);
    } finally {
      await leases.close();
    }
  });
});
