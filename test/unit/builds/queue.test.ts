// The build queue's rules: production first, then the oldest; slots bound what runs; a newer build
// of an environment (or of one pull request) supersedes its older unfinished ones and nothing else.
import assert from "node:assert/strict";
import { test } from "node:test";
import { buildsToStart, supersededBy, type BuildState, type QueuedBuild } from "../../../src/builds/queue.js";

function b(id: string, env: string, createdAt: number, state: BuildState = "queued", production = false): QueuedBuild {
  return { id, environmentId: env, production, createdAt, state };
}

test("production builds start before older preview builds; then the oldest first", () => {
  const q = [
    b("a", "preview", 1),
    b("b", "staging", 2),
    b("c", "prod", 3, "queued", true),
    b("d", "prod2", 4, "queued", true),
  ];
  assert.deepEqual(buildsToStart(q, 4), ["c", "d", "a", "b"]);
  assert.deepEqual(buildsToStart(q, 1), ["c"]);
});

test("running builds take slots; finished ones do not", () => {
  const q = [
    b("r", "x", 0, "running"),
    b("f", "y", 0, "failed"),
    b("s", "z", 0, "succeeded"),
    b("a", "e", 1),
    b("c", "e2", 2),
  ];
  assert.deepEqual(buildsToStart(q, 1), []);
  assert.deepEqual(buildsToStart(q, 2), ["a"]);
  assert.deepEqual(buildsToStart(q, 5), ["a", "c"]);
  assert.deepEqual(buildsToStart([b("r", "x", 0, "running"), b("r2", "x", 0, "running")], 1), []);
});

test("equal times are ordered by id, the same on every replica", () => {
  assert.deepEqual(buildsToStart([b("y", "e", 5), b("x", "f", 5)], 2), ["x", "y"]);
});

test("a newer build supersedes the same environment's queued and running older builds only", () => {
  const q = [
    b("old-queued", "e", 1),
    b("old-running", "e", 2, "running"),
    b("old-done", "e", 3, "succeeded"),
    b("old-failed", "e", 3, "failed"),
    b("other-env", "f", 4),
    b("newer", "e", 9),
  ];
  const newest = b("new", "e", 5);
  assert.deepEqual(supersededBy([...q, newest], newest), ["old-queued", "old-running"]);
  // Never the newer one, never itself.
  assert.ok(!supersededBy([...q, newest], newest).includes("newer"));
  assert.deepEqual(supersededBy([newest], newest), []);
});

test("a pull request's build supersedes that pull request's older builds only, never its base's", () => {
  const pr = (id: string, preview: string, createdAt: number, state: BuildState = "queued"): QueuedBuild => ({
    ...b(id, "production", createdAt, state),
    preview,
  });
  const q = [b("base", "production", 1, "running", true), pr("pr7-old", "pr-7", 2, "running"), pr("pr8", "pr-8", 3)];
  const newer = pr("pr7-new", "pr-7", 4);
  assert.deepEqual(supersededBy([...q, newer], newer), ["pr7-old"]);
  // A push to the base's branch cancels the base's builds, not the pull requests'.
  const push = b("base-new", "production", 5, "queued", true);
  assert.deepEqual(supersededBy([...q, newer, push], push), ["base"]);
  // Production goes first when slots are full, before an older pull request's build.
  assert.deepEqual(buildsToStart([pr("p", "pr-1", 1), b("prod", "production", 2, "queued", true)], 1), ["prod"]);
});
