// Build minutes on a real (in-memory SQLite) ctrl database: a workspace's builds this calendar
// month are counted (each rounded up to a whole minute; last month's not, a build that spans the
// month's start only from it); GetQuota's view shows them; a build may start only with minutes
// left, its time limit capped at what is left with a reason naming the quota; without a limit
// nothing is counted against it.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { before, describe, it } from "node:test";
import { monthStartMs, type QuotaSetting } from "../../../../src/contracts/quotas.js";
import { Store } from "../../../../src/ctrl/db/store.js";
import { appendSourceChunk, claimBuilds, createBuild } from "../../../../src/ctrl/domain/builds.js";
import { buildAllowanceOf, buildMinutesOf, setQuotasIn } from "../../../../src/ctrl/domain/quotas.js";
import { quotaViews } from "../../../../src/ctrl/read/quotas.js";
import { seedEnvironment } from "./seed.js";

const MIN = 60_000;
const TIMEOUT = 15 * MIN;

describe("build minutes", () => {
  let store: Store;
  let ids: Awaited<ReturnType<typeof seedEnvironment>>;
  let n = 0;

  /** A build that ran from `startedAt` to `finishedAt` (null: still running). */
  async function ran(startedAt: number, finishedAt: number | null): Promise<string> {
    const data = Buffer.from(`archive ${++n}`);
    const digest = `sha256:${createHash("sha256").update(data).digest("hex")}`;
    await appendSourceChunk(store, { projectId: ids.projectId, digest, position: 0, size: data.length, data });
    const { build } = await createBuild(store, {
      workspaceId: ids.workspaceId,
      projectId: ids.projectId,
      environmentId: ids.environmentId,
      production: true,
      sourceDigest: digest,
      dockerfile: undefined,
      deploy: false,
    });
    assert.deepEqual(await claimBuilds(store, 1, 60_000), [build.id]);
    // The times a worker's run would have left (the clock cannot be moved here).
    await store.db
      .updateTable("builds")
      .set({
        started_at: startedAt,
        finished_at: finishedAt,
        state: finishedAt === null ? "running" : "succeeded",
      })
      .where("id", "=", build.id)
      .execute();
    return build.id;
  }

  const limit = (minutes: number | null) => {
    const setting: QuotaSetting = minutes === null ? { kind: "unlimited" } : { kind: "limit", value: minutes };
    return store.write((tx) => setQuotasIn(tx, ids.workspaceId, new Map([["build_minutes", setting]])));
  };

  before(async () => {
    store = await Store.open({ url: ":memory:" });
    ids = await seedEnvironment(store, []);
  });

  it("counts this month's builds, each rounded up to a whole minute", async () => {
    const now = Date.now();
    const month = monthStartMs(now);
    assert.equal(await buildMinutesOf(store.db, ids.workspaceId, now), 0);
    await ran(month - 40 * MIN, month - 10 * MIN); // last month's: not counted
    await ran(month - 2 * MIN, month + 90_000); // 1.5 minutes of this month: 2
    await ran(month + 2 * MIN, month + 2 * MIN + 130_000); // 2 min 10 s: 3
    assert.equal(await buildMinutesOf(store.db, ids.workspaceId, now), 5);
    const view = (await quotaViews(store.db, ids.workspaceId)).find((q) => q.name === "build_minutes");
    assert.equal(view?.used, 5, "GetQuota answers the minutes used");
  });

  it("lets a build run only the minutes left, and refuses one when none are", async () => {
    const now = Date.now();
    await limit(null);
    assert.deepEqual(await buildAllowanceOf(store.db, ids.workspaceId, TIMEOUT, now), { ok: true, timeoutMs: TIMEOUT });

    await limit(10);
    const capped = await buildAllowanceOf(store.db, ids.workspaceId, TIMEOUT, now);
    assert.equal(capped.ok, true);
    assert.ok(capped.ok);
    assert.equal(capped.timeoutMs, 5 * MIN, "10 minutes less the 5 used");
    assert.match(
      capped.cappedBy ?? "",
      /ran out of build minutes during the build: its build_minutes quota is 10 minutes/,
    );

    await limit(100);
    assert.deepEqual(
      await buildAllowanceOf(store.db, ids.workspaceId, TIMEOUT, now),
      { ok: true, timeoutMs: TIMEOUT },
      "more left than the time limit: the limit stands",
    );

    await limit(5);
    const refused = await buildAllowanceOf(store.db, ids.workspaceId, TIMEOUT, now);
    assert.deepEqual(refused, {
      ok: false,
      message: 'workspace "acme" has used its build_minutes quota: 5 of 5 minutes this month (krane quota get acme)',
    });
  });

  it("does not count a starting build against itself; a running one counts its time so far", async () => {
    const now = Date.now();
    await limit(9);
    const running = await ran(now - 3 * MIN - 1000, null); // running for 3 min 1 s: 4
    assert.equal(await buildMinutesOf(store.db, ids.workspaceId, now), 9);
    assert.equal((await buildAllowanceOf(store.db, ids.workspaceId, TIMEOUT, now)).ok, false, "others are refused");
    const own = await buildAllowanceOf(store.db, ids.workspaceId, TIMEOUT, now, running);
    assert.ok(own.ok);
    assert.equal(own.timeoutMs, 4 * MIN, "its own minutes are not counted against it");
  });
});
