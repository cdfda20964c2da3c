// The log history store on SQLite (the same checks run on PostgreSQL in
// test/integration/ctrl/log-history.test.ts): see test/support/log-history.ts.
import { after, before, describe, it } from "node:test";
import { Store } from "../../../../src/ctrl/db/store.js";
import { checkArchiveLeases, checkLogHistory } from "../../../support/log-history.js";

describe("log history store (SQLite)", () => {
  let store: Store;
  before(async () => {
    store = await Store.open({ url: ":memory:" });
  });
  after(async () => {
    await store.close();
  });

  it("keeps each line once, searches to the seam, prunes by retention and bound", async () => {
    await checkLogHistory(store);
  });

  it("leases an environment's archive to one replica at a time; another takes it once it ended", async () => {
    const clock = { now: 1_800_000_000_000 };
    const leases = await Store.open({ url: ":memory:" }, { clock: () => clock.now });
    try {
      await checkArchiveLeases(leases, clock);
    } finally {
      await leases.close();
    }
  });
});
