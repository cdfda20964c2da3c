// How the builds tab writes a build: its state's tone, its source, how long it took, and the log it keeps.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { BuildSchema } from "../../../src/gen/krane/ctrl/v1/build_pb.js";
import {
  appendLog,
  BUILD_TONE,
  buildSource,
  buildTook,
  isActive,
  KEEP_BUILD_LINES,
} from "../../../src/dashboard/views/environment/builds-model.js";

describe("the builds tab's model", () => {
  it("gives every state a tone; only queued and running builds may still move", () => {
    for (const state of ["queued", "running", "succeeded", "failed", "cancelled"]) {
      assert.ok(BUILD_TONE[state] !== undefined, state);
      assert.equal(isActive({ state }), state === "queued" || state === "running", state);
    }
    assert.equal(BUILD_TONE.failed, "bad");
    assert.equal(BUILD_TONE.succeeded, "ok");
  });

  it("names a repository build by branch and short commit, an upload by its digest", () => {
    const commit = "0123456789abcdef0123456789abcdef01234567";
    assert.equal(buildSource(create(BuildSchema, { commit, branch: "main" })), "main @ 0123456");
    assert.equal(buildSource(create(BuildSchema, { commit })), "commit @ 0123456");
    assert.equal(
      buildSource(create(BuildSchema, { sourceDigest: `sha256:${"ab".repeat(32)}` })),
      "upload abababababab",
    );
    assert.equal(buildSource(create(BuildSchema, {})), "upload");
  });

  it("says how long a build took, and how long so far while it runs", () => {
    const now = 1_800_000_000_000;
    assert.equal(buildTook(create(BuildSchema, { state: "queued" }), now), "queued");
    const started = BigInt(now - 125_000);
    assert.equal(
      buildTook(create(BuildSchema, { state: "running", startedAtUnixMs: started }), now),
      "2 min 5 s so far",
    );
    assert.equal(
      buildTook(
        create(BuildSchema, { state: "failed", startedAtUnixMs: started, finishedAtUnixMs: started + 12_400n }),
        now,
      ),
      "12 s",
    );
    // Cancelled before it started.
    assert.equal(buildTook(create(BuildSchema, { state: "cancelled" }), now), "—");
  });

  it("keeps the newest lines of a long log, in order", () => {
    const first = Array.from({ length: KEEP_BUILD_LINES - 1 }, (_, i) => `line ${i}`);
    const kept = appendLog(first, ["a", "b", "c"]);
    assert.equal(kept.length, KEEP_BUILD_LINES);
    assert.deepEqual(kept.slice(-3), ["a", "b", "c"]);
    assert.equal(kept[0], "line 2");
    assert.deepEqual(appendLog([], ["x"]), ["x"]);
  });
});
