// Alert rules on a real (in-memory SQLite) ctrl database with a clock of the test's own: a rule
// added while errors are already going on fires as soon as its minutes close, once, with the
// rule, the value and the window in the event; evaluating again (another replica, a ctrl that
// restarted: the state is read from the database each time) notifies nothing more; a minute
// without any report in the middle of the episode changes nothing; the first good minute resolves
// it, once; the runner part's sweep does the same work; names are unique per environment and a
// rule that is not there is not_found; a restarts rule over a 10-minute window adds up the
// instances' restarts (the usage reports' minutes) of minutes before its first one.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { NotificationBody } from "../../../../src/contracts/notifications.js";
import { alertRunner } from "../../../../src/ctrl/alerts/runner.js";
import { Store } from "../../../../src/ctrl/db/store.js";
import {
  addAlertRule,
  evaluateAlertRule,
  listAlertRules,
  removeAlertRule,
} from "../../../../src/ctrl/domain/alerts.js";
import { addMinutes, setUsageMinutes } from "../../../../src/ctrl/history/store.js";
import { MINUTE_MS, emptySums } from "../../../../src/ctrl/history/sums.js";
import { REF, seedEnvironment } from "./seed.js";

const M0 = 1_800_000_000_000 - (1_800_000_000_000 % MINUTE_MS);
const SETTLE = 5_000;

describe("alert rules", () => {
  let store: Store;
  let now = M0 + 10_000;
  let envId = "";

  async function minute(atMs: number, requests: number, errors: number, region = "eu"): Promise<void> {
    const sums = emptySums();
    sums.requests = requests;
    sums.errors = errors;
    await addMinutes(store.db, [{ environmentId: envId, deploymentId: "dep_1", region, instance: "", atMs, sums }]);
  }

  async function events(): Promise<NotificationBody[]> {
    const rows = await store.db.selectFrom("notification_events").select("body").orderBy("seq").execute();
    return rows.map((r) => JSON.parse(r.body) as NotificationBody);
  }

  before(async () => {
    store = await Store.open({ url: ":memory:" }, { clock: () => now });
    envId = (await seedEnvironment(store, ["alert.firing", "alert.resolved"])).environmentId;
  });
  after(() => store.close());

  it("fires once for an episode already going on, with the rule, value and window", async () => {
    // Errors at 10 % in the three minutes before the rule exists (two regions add up).
    for (const m of [-3, -2, -1]) {
      await minute(M0 + m * MINUTE_MS, 50, 5);
      await minute(M0 + m * MINUTE_MS, 50, 5, "us");
    }
    const rule = await addAlertRule(store, {
      ref: REF,
      name: "errors",
      metric: "error_rate",
      op: ">",
      threshold: 2,
      forMs: 3 * MINUTE_MS,
      windowMs: MINUTE_MS,
    });
    assert.equal(Number(rule.next_minute_ms), M0 - 3 * MINUTE_MS);
    const fired = await evaluateAlertRule(store, rule.id, SETTLE);
    assert.deepEqual(fired, [{ kind: "firing", value: 10, fromMs: M0 - 3 * MINUTE_MS, toMs: M0 }]);
    // Again at the same time (another replica, a restarted ctrl): nothing more.
    assert.deepEqual(await evaluateAlertRule(store, rule.id, SETTLE), []);
    const [ev] = await events();
    assert.equal(ev?.type, "alert.firing");
    assert.equal(ev?.severity, "critical");
    assert.equal(ev?.title, "alert errors firing: shop/prod");
    assert.deepEqual(ev?.details, {
      rule: "errors",
      metric: "error_rate",
      op: ">",
      threshold: 2,
      for_seconds: 180,
      value_window_seconds: 60,
      value: 10,
      window_start: new Date(M0 - 3 * MINUTE_MS).toISOString(),
      window_end: new Date(M0).toISOString(),
    });
  });

  it("stays firing over a minute nobody reported, then resolves once on a good minute", async () => {
    // Minute M0 has no report; M0+1 is still bad; M0+2 is good.
    await minute(M0 + MINUTE_MS, 100, 9);
    await minute(M0 + 2 * MINUTE_MS, 100, 1);
    const [rule] = await listAlertRules(store.db, REF);
    assert.ok(rule);
    now = M0 + 2 * MINUTE_MS + SETTLE; // M0 and M0+1 have closed
    assert.deepEqual(await evaluateAlertRule(store, rule.id, SETTLE), []);
    assert.equal((await listAlertRules(store.db, REF))[0]?.phase, "firing");
    now = M0 + 3 * MINUTE_MS + SETTLE;
    const runner = alertRunner({
      store,
      settleMs: SETTLE,
      sweepIntervalMs: 0,
      onError: (err) => assert.fail(String(err)),
    });
    await runner.sweep();
    await runner.stop();
    assert.deepEqual(await evaluateAlertRule(store, rule.id, SETTLE), []);
    const all = await events();
    assert.deepEqual(
      all.map((e) => e.type),
      ["alert.firing", "alert.resolved"],
    );
    assert.equal(all[1]?.details.value, 1);
    assert.equal(all[1]?.details.window_end, new Date(M0 + 3 * MINUTE_MS).toISOString());
    assert.equal((await listAlertRules(store.db, REF))[0]?.phase, "inactive");
  });

  it("refuses a second rule of the same name and removing one that is not there", async () => {
    const again = {
      ref: REF,
      name: "errors",
      metric: "p99_ms",
      op: ">",
      threshold: 500,
      forMs: MINUTE_MS,
      windowMs: MINUTE_MS,
    } as const;
    await assert.rejects(addAlertRule(store, again), /already exists/);
    await removeAlertRule(store, REF, "errors");
    await assert.rejects(removeAlertRule(store, REF, "errors"), /not found|not_found/i);
    assert.deepEqual(await listAlertRules(store.db, REF), []);
  });

  it("fires a restarts rule on the instances' restarts over its window, minutes before the rule included", async () => {
    const base = M0 + 20 * MINUTE_MS;
    const restarts: [number, string, number][] = [
      [1, "pod-a", 1],
      [5, "pod-a", 1],
      [8, "pod-b", 2],
      [9, "pod-a", 0],
    ];
    await setUsageMinutes(
      store.db,
      restarts.map(([m, instance, n]) => {
        const sums = emptySums();
        sums.usageSamples = 4;
        sums.restarts = n;
        return {
          environmentId: envId,
          deploymentId: "dep_1",
          region: "eu",
          instance,
          atMs: base + m * MINUTE_MS,
          sums,
        };
      }),
    );
    now = base + 10 * MINUTE_MS + 10_000;
    const rule = await addAlertRule(store, {
      ref: REF,
      name: "crashloop",
      metric: "restarts",
      op: ">",
      threshold: 3,
      forMs: MINUTE_MS,
      windowMs: 10 * MINUTE_MS,
    });
    now += SETTLE;
    // Only minute base+9 is the rule's (0 restarts); the window reaches back to base.
    assert.deepEqual(await evaluateAlertRule(store, rule.id, SETTLE), [
      { kind: "firing", value: 4, fromMs: base + 9 * MINUTE_MS, toMs: base + 10 * MINUTE_MS },
    ]);
    const ev = (await events()).at(-1);
    assert.equal(ev?.title, "alert crashloop firing: shop/prod");
    assert.match(ev?.text ?? "", /instance restarts was 4 \(rule: restarts > 3 in 10 min for 1 min\)/);
    assert.equal(ev?.details.value_window_seconds, 600);
  });
});
