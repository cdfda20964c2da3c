// build.failed on a real (in-memory SQLite) ctrl database: a build that fails writes one
// notification in the transaction that ends it, with the build's id, the failing step, the error
// and the last lines of its output (at most NOTIFIED_LINES); ending it again writes nothing; a
// cancelled build and a succeeded one write nothing.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import type { NotificationBody } from "../../../../src/contracts/notifications.js";
import { Store } from "../../../../src/ctrl/db/store.js";
import {
  NOTIFIED_LINES,
  appendSourceChunk,
  cancelBuild,
  claimBuilds,
  createBuild,
  finishBuild,
} from "../../../../src/ctrl/domain/builds.js";
import { seedEnvironment } from "./seed.js";

describe("build.failed", () => {
  let store: Store;
  let ids: Awaited<ReturnType<typeof seedEnvironment>>;
  let n = 0;

  /** A queued build of a fresh archive (a new build cancels the one before, so each test starts its own). */
  async function build(): Promise<string> {
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
    return build.id;
  }

  async function events(): Promise<NotificationBody[]> {
    const rows = await store.db.selectFrom("notification_events").select("body").orderBy("seq").execute();
    return rows.map((r) => JSON.parse(r.body) as NotificationBody);
  }

  before(async () => {
    store = await Store.open({ url: ":memory:" });
    ids = await seedEnvironment(store, ["build.failed"]);
  });
  after(() => store.close());

  it("is told once, with the build, the step and the last lines", async () => {
    const id = await build();
    assert.deepEqual(await claimBuilds(store, 1, 60_000), [id]);
    const output = Array.from({ length: 25 }, (_, i) => `line ${i}`);
    const failed = {
      state: "failed",
      error: "process exited with 2",
      failedStep: "[2/3] RUN make",
      failedOutput: output,
    } as const;
    assert.equal(await finishBuild(store, id, failed), true);
    assert.equal(await finishBuild(store, id, failed), false);
    const all = await events();
    assert.equal(all.length, 1);
    assert.equal(all[0]?.type, "build.failed");
    assert.equal(all[0]?.title, "build failed: shop/prod");
    assert.equal(all[0]?.text, `Build ${id} failed at step [2/3] RUN make: process exited with 2`);
    assert.deepEqual(all[0]?.details, {
      build_id: id,
      step: "[2/3] RUN make",
      error: "process exited with 2",
      last_lines: output.slice(-NOTIFIED_LINES).join("\n"),
    });
  });

  it("is not told for a cancelled or succeeded build", async () => {
    const cancelled = await build();
    await cancelBuild(store, ids.workspaceId, cancelled);
    const ok = await build();
    await claimBuilds(store, 1, 60_000);
    assert.equal(await finishBuild(store, ok, { state: "succeeded", image: "r/x:1", imageDigest: "sha256:ab" }), true);
    assert.equal((await events()).length, 1);
  });
});
