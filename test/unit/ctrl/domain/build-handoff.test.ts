// Builds handed to a region's builder pods (`ctrl serve --builds-in cluster`) on a real
// (in-memory SQLite) ctrl database: a handed build is the build kind's desired state in that
// region only; ending it (cancelled, finished) or its lease lapsing takes it back from the region
// with a Delete in the same transaction; a rejection by the region's agent fails it with the
// reason, and no other region may reject it. Beside them, the payload and the report's checks.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { fromBinary } from "@bufbuild/protobuf";
import { after, before, describe, it } from "node:test";
import { readDesired } from "../../../../src/ctrl/db/outbox.js";
import { Store } from "../../../../src/ctrl/db/store.js";
import {
  appendSourceChunk,
  buildById,
  buildHandedTo,
  cancelBuild,
  claimBuilds,
  createBuild,
  finishBuild,
  handBuildTo,
  recordBuildReport,
} from "../../../../src/ctrl/domain/builds.js";
import { encodeApplyBuild, type BuildHandoff } from "../../../../src/ctrl/payloads/build.js";
import { reportedOutcome } from "../../../../src/ctrl/cluster-service/builds.js";
import { ApplyBuildSchema, ReportBuildProgressRequestSchema } from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { create } from "@bufbuild/protobuf";
import { seedEnvironment } from "./seed.js";

const HANDOFF: Omit<BuildHandoff, "buildId" | "workspaceId" | "projectId" | "environmentId" | "sourceDigest"> = {
  dockerfile: null,
  registry: "registry.example:5000",
  repository: "acme/shop",
  registryCa: ["-----BEGIN CERTIFICATE-----\n…"],
  cpuMillicores: 1000,
  memoryMib: 2048,
  timeoutMs: 90_500,
  maxSourceBytes: 1 << 20,
};

describe("builds handed to a region", () => {
  let store: Store;
  let ids: Awaited<ReturnType<typeof seedEnvironment>>;
  let n = 0;

  /** A running build of a fresh archive, handed to region "eu". */
  async function handed(leaseMs = 60_000): Promise<string> {
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
    assert.deepEqual(await claimBuilds(store, 1, leaseMs), [build.id]);
    const payload = encodeApplyBuild({ ...HANDOFF, ...ids, buildId: build.id, sourceDigest: digest });
    assert.equal(await handBuildTo(store, build.id, "eu", ids.environmentId, payload), true);
    return build.id;
  }

  async function desiredIn(region: string, id: string): Promise<boolean> {
    return (await readDesired(store.db, region, "build", [id])).has(id);
  }

  async function lastOutboxOp(id: string): Promise<string | undefined> {
    const row = await store.db
      .selectFrom("outbox")
      .select("op")
      .where("kind", "=", "build")
      .where("object_id", "=", id)
      .orderBy("version", "desc")
      .executeTakeFirst();
    return row?.op;
  }

  before(async () => {
    store = await Store.open({ url: ":memory:" });
    ids = await seedEnvironment(store, []);
  });
  after(() => store.close());

  it("is desired in its region only, and answered there only", async () => {
    const id = await handed();
    assert.equal(await desiredIn("eu", id), true);
    assert.equal((await buildHandedTo(store.db, "eu", id))?.id, id);
    assert.equal(await buildHandedTo(store.db, "us", id), undefined, "another region's agent gets nothing");
    const apply = fromBinary(
      ApplyBuildSchema,
      (await readDesired(store.db, "eu", "build", [id])).get(id) ?? new Uint8Array(),
    );
    assert.equal(apply.image, `registry.example:5000/acme/shop:${id}`);
    assert.equal(apply.environmentId, ids.environmentId);
    await finishBuild(store, id, { state: "succeeded", imageDigest: `sha256:${"a".repeat(64)}` });
  });

  it("is taken back from the region when cancelled or finished", async () => {
    const cancelled = await handed();
    await cancelBuild(store, ids.workspaceId, cancelled);
    assert.equal(await desiredIn("eu", cancelled), false);
    assert.equal(await lastOutboxOp(cancelled), "delete", "the agent is told to abort it");
    const failed = await handed();
    await finishBuild(store, failed, { state: "failed", error: "boom" });
    assert.equal(await desiredIn("eu", failed), false);
    assert.equal(await lastOutboxOp(failed), "delete");
  });

  it("is taken back when its lease lapses (its agent stopped reporting) and queued again", async () => {
    const id = await handed(1);
    await new Promise((r) => setTimeout(r, 10));
    // The lapsed build is requeued, then claimed again by this sweep.
    assert.deepEqual(await claimBuilds(store, 1, 60_000), [id]);
    assert.equal(await desiredIn("eu", id), false);
    assert.equal(await lastOutboxOp(id), "delete");
    assert.equal(await handBuildTo(store, id, "eu", ids.environmentId, new Uint8Array()), true);
    await finishBuild(store, id, { state: "cancelled" });
  });

  it("is not handed once it no longer runs", async () => {
    const id = await handed();
    await cancelBuild(store, ids.workspaceId, id);
    assert.equal(await handBuildTo(store, id, "eu", ids.environmentId, new Uint8Array()), false);
    assert.equal(await desiredIn("eu", id), false);
  });

  it("fails with the reason when its region's agent rejects it; no other region may", async () => {
    const id = await handed();
    await assert.rejects(
      recordBuildReport(store, "us", { type: "rejected", id, k8sName: "", reason: "bad payload" }),
      /not handed to region us/,
    );
    assert.equal((await buildById(store.db, id))?.state, "running");
    await recordBuildReport(store, "eu", { type: "rejected", id, k8sName: "", reason: "timeout_seconds: too big" });
    const row = await buildById(store.db, id);
    assert.equal(row?.state, "failed");
    assert.equal(row?.error, "region eu's agent refused it: timeout_seconds: too big");
    assert.equal(await desiredIn("eu", id), false);
  });
});

describe("the build payload and progress reports", () => {
  it("carries the build's limits in whole seconds and its image name", () => {
    const a = fromBinary(
      ApplyBuildSchema,
      encodeApplyBuild({
        ...HANDOFF,
        buildId: "bld_1",
        workspaceId: "ws_1",
        projectId: "prj_1",
        environmentId: "env_1",
        sourceDigest: "sha256:x",
        dockerfile: "docker/Dockerfile",
        timeLimitReason: "the workspace's build minutes ran out",
      }),
    );
    assert.equal(a.timeoutSeconds, 91n, "90.5 s rounds up");
    assert.equal(a.image, "registry.example:5000/acme/shop:bld_1");
    assert.equal(a.tag, "bld_1");
    assert.equal(a.dockerfile, "docker/Dockerfile");
    assert.equal(a.timeLimitReason, "the workspace's build minutes ran out");
    assert.deepEqual(a.registryCa, HANDOFF.registryCa);
  });

  it("checks an outcome's fields, naming the field", () => {
    const req = (outcome: ReturnType<typeof create<typeof ReportBuildProgressRequestSchema>>["outcome"]) =>
      create(ReportBuildProgressRequestSchema, { buildId: "bld_1", outcome });
    assert.equal(reportedOutcome(req({ case: undefined })), undefined);
    const digest = `sha256:${"b".repeat(64)}`;
    assert.deepEqual(reportedOutcome(req({ case: "succeeded", value: { imageDigest: digest } as never })), {
      state: "succeeded",
      imageDigest: digest,
    });
    assert.throws(
      () => reportedOutcome(req({ case: "succeeded", value: { imageDigest: "latest" } as never })),
      /succeeded.image_digest/,
    );
    assert.throws(
      () =>
        reportedOutcome(
          req({ case: "failed", value: { error: "", failedStep: "", failedOutput: [], cancelled: false } as never }),
        ),
      /failed.error/,
    );
    assert.deepEqual(
      reportedOutcome(
        req({
          case: "failed",
          value: { error: "cancelled", failedStep: "", failedOutput: ["x"], cancelled: true } as never,
        }),
      ),
      { state: "cancelled", error: "cancelled", failedOutput: ["x"] },
    );
  });
});
