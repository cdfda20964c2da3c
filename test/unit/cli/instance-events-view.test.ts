import { test } from "node:test";
import assert from "node:assert/strict";
import { create, toJson } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describeInstanceEvent, describeInstanceEventAgo } from "../../../src/cli/status-view.js";
import { InstanceEventSchema } from "../../../src/gen/krane/ctrl/v1/events_pb.js";

/** An event in the JSON form the views read (what ctrl sends, and what toJson makes of a message). */
const ev = (init: Parameters<typeof create<typeof InstanceEventSchema>>[1]) =>
  toJson(InstanceEventSchema, create(InstanceEventSchema, init));

test("each kind of instance event reads as a few words", () => {
  const now = Date.parse("2026-01-01T00:10:00Z");
  const oom = ev({
    kind: "terminated",
    reason: "OOMKilled",
    exitCode: 137,
    restarts: 1,
    atUnixMs: BigInt(now - 120_000),
  });
  assert.equal(describeInstanceEventAgo(oom, now), "OOMKilled (exit 137, 1 restart) 2m ago");
  assert.equal(
    describeInstanceEvent(ev({ kind: "waiting", reason: "CrashLoopBackOff", exitCode: 3, restarts: 5 })),
    "CrashLoopBackOff, exit 3, 5 restarts",
  );
  assert.equal(
    describeInstanceEvent(
      ev({ kind: "waiting", reason: "ErrImagePull", image: "docker.io/nope:1", message: "not found" }),
    ),
    "ErrImagePull (registry docker.io: not found): docker.io/nope:1: not found",
  );
  // A wrong or expired credential names the registry and the refusal (containerd's own message).
  assert.equal(
    describeInstanceEvent(
      ev({
        kind: "waiting",
        reason: "ErrImagePull",
        image: "10.1.255.1:5000/shop/web@sha256:" + "a".repeat(64),
        message:
          'failed to pull and unpack image "10.1.255.1:5000/shop/web@sha256:aaa": failed to resolve reference: unexpected status from HEAD request to https://10.1.255.1:5000/v2/shop/web/manifests/sha256:aaa: 401 Unauthorized',
      }),
    ).startsWith("ErrImagePull (registry 10.1.255.1:5000: 401 unauthorized): 10.1.255.1:5000/shop/web@sha256:"),
    true,
  );
  assert.equal(
    describeInstanceEvent(ev({ kind: "unready", reason: "ReadinessProbeFailing" })),
    "readiness probe failing",
  );
  assert.equal(
    describeInstanceEvent(ev({ kind: "evicted", reason: "Evicted", message: "The node was low on memory." })),
    "Evicted: The node was low on memory.",
  );
  assert.equal(
    describeInstanceEvent(ev({ kind: "evicted", reason: "EvictionByEvictionAPI", message: "Eviction API: evicting" })),
    "Evicted (EvictionByEvictionAPI): Eviction API: evicting",
  );
  assert.equal(describeInstanceEvent(ev({ kind: "terminated", reason: "Error" })), "Error (no exit code)");
});

test("property: a description is one line of bounded length that names the reason", () => {
  fc.assert(
    fc.property(
      fc.constantFrom("terminated", "waiting", "unready", "evicted", "other"),
      fc.constantFrom("OOMKilled", "Error", "CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff", "Evicted", "X"),
      fc.option(fc.integer({ min: -1000, max: 1000 }), { nil: undefined }),
      fc.string({ maxLength: 512 }).map((s) => s.replace(/[\n\r]/g, " ")),
      (kind, reason, exitCode, message) => {
        const d = describeInstanceEvent(ev({ kind, reason, exitCode, message, image: "img:1" }));
        assert.ok(!d.includes("\n"));
        assert.ok(d.length <= 400, `${d.length}`);
        if (kind !== "unready" && kind !== "evicted") assert.ok(d.includes(reason));
      },
    ),
  );
});
