// The overview's rows as pushed by WatchOverview: the whole list on reset, then only what changed;
// a keepalive changes nothing; each change is a new map (the table redraws on a new one only).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { ClusterSchema } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import {
  EnvironmentSummarySchema,
  WatchOverviewResponseSchema,
  type EnvironmentSummary,
} from "../../../src/gen/krane/ctrl/v1/live_pb.js";
import {
  applyOverview,
  envRow,
  envStateTone,
  isKeepalive,
  isStale,
} from "../../../src/dashboard/views/overview-model.js";

function summary(id: string, over: MessageInitShape<typeof EnvironmentSummarySchema> = {}): EnvironmentSummary {
  return create(EnvironmentSummarySchema, {
    environmentId: id,
    workspace: "acme",
    project: "shop",
    environment: id,
    regions: [
      { region: "eu-west", replicas: 2 },
      { region: "us-east", replicas: 3 },
    ],
    running: 4,
    state: "progressing",
    revision: 7n,
    image: "registry.example.com/shop:7",
    updatedAtUnixMs: 1_700_000_000_000n,
    ...over,
  });
}

describe("overview rows", () => {
  it("writes a summary as a row: replicas per region and in all", () => {
    assert.deepEqual(envRow(summary("production")), {
      id: "production",
      workspace: "acme",
      project: "shop",
      environment: "production",
      regions: "eu-west=2, us-east=3",
      replicas: 5,
      running: 4,
      state: "progressing",
      revision: 7,
      image: "registry.example.com/shop:7",
      updated: 1_700_000_000_000,
    });
  });

  it("starts from the whole list, then adds, replaces and removes what a message names", () => {
    const first = applyOverview(
      undefined,
      create(WatchOverviewResponseSchema, { reset: true, environments: [summary("a"), summary("b")] }),
    );
    assert.deepEqual([...first.keys()], ["a", "b"]);
    const next = applyOverview(
      first,
      create(WatchOverviewResponseSchema, {
        environments: [summary("b", { state: "complete" }), summary("c")],
        removedEnvironmentIds: ["a"],
      }),
    );
    assert.deepEqual([...next.keys()], ["b", "c"]);
    assert.equal(next.get("b")?.state, "complete");
    // The old map is left as it was: a new map is what tells the table to redraw.
    assert.notEqual(next, first);
    assert.deepEqual([...first.keys()], ["a", "b"]);
    assert.equal(first.get("b")?.state, "progressing");
  });

  it("drops every row a reset does not name (after a reconnect, the whole list again)", () => {
    const before = applyOverview(
      undefined,
      create(WatchOverviewResponseSchema, { reset: true, environments: [summary("a"), summary("b")] }),
    );
    const after = applyOverview(
      before,
      create(WatchOverviewResponseSchema, { reset: true, environments: [summary("b")] }),
    );
    assert.deepEqual([...after.keys()], ["b"]);
  });

  it("knows a keepalive: nothing named, no reset, no cluster change", () => {
    assert.equal(isKeepalive(create(WatchOverviewResponseSchema, { sentAtUnixMs: 5n })), true);
    assert.equal(isKeepalive(create(WatchOverviewResponseSchema, { reset: true })), false, "a reset to none");
    assert.equal(isKeepalive(create(WatchOverviewResponseSchema, { removedEnvironmentIds: ["a"] })), false);
    assert.equal(isKeepalive(create(WatchOverviewResponseSchema, { clustersChanged: true })), false);
    assert.equal(isKeepalive(create(WatchOverviewResponseSchema, { environments: [summary("a")] })), false);
  });

  it("colours states it knows, and mutes the others", () => {
    assert.equal(envStateTone("complete"), "ok");
    assert.equal(envStateTone("failed"), "bad");
    assert.equal(envStateTone("paused"), "warn");
    assert.equal(envStateTone("progressing"), "warn");
    assert.equal(envStateTone("something new"), "muted");
  });

  it("calls a cluster stale after a minute without its agent", () => {
    const now = 1_800_000_000_000;
    const seen = (ago: number) => create(ClusterSchema, { lastHeartbeatUnixMs: BigInt(now - ago) });
    assert.equal(isStale(seen(60_000), now), false);
    assert.equal(isStale(seen(60_001), now), true);
  });
});
