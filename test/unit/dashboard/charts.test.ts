// The alert rules form and the rollout chart (pure, then drawn into the minimal DOM): the form's
// request (a bound that is not a number goes as NaN, a duration as 0, for ctrl to refuse naming
// the field); the page keeps a sample of the rollout's instance counts only when one moved, none
// older than the window but the last, at most MAX_SAMPLES; the chart's step lines per region,
// new and old; the status tab draws them with each line's last value in its accessible name.
import "./dom.js";
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { RolloutStatusSchema, type RolloutStatus } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { EMPTY_ALERT_FORM, alertRequest } from "../../../src/dashboard/views/environment/alerts-model.js";
import {
  MAX_SAMPLES,
  MOVES_WINDOW_MS,
  movesSeries,
  recordRollout,
  type RolloutSample,
} from "../../../src/dashboard/views/environment/moves-model.js";
import { EnvironmentBody } from "../../../src/dashboard/views/environment/page.js";
import { byTag, h, mount } from "./dom.js";
import { environmentView, PROD } from "./fixtures.js";

function rollout(regions: [string, number, number][]): RolloutStatus {
  return create(RolloutStatusSchema, {
    regions: regions.map(([region, current, updated]) => ({
      region,
      currentReplicas: current,
      updatedReplicas: updated,
    })),
  });
}

describe("alert rule form", () => {
  it("makes AddAlertRule's fields from what was typed", () => {
    assert.deepEqual(
      alertRequest({
        name: " crashloop ",
        metric: "restarts",
        side: "above",
        threshold: "3",
        windowMinutes: "10",
        forMinutes: "1",
      }),
      { name: "crashloop", metric: "restarts", op: ">", threshold: 3, windowSeconds: 600, forSeconds: 60 },
    );
    const bad = alertRequest({ ...EMPTY_ALERT_FORM, side: "below", threshold: "", forMinutes: "soon" });
    assert.equal(bad.op, "<");
    assert.ok(Number.isNaN(bad.threshold));
    assert.equal(bad.forSeconds, 0);
    assert.equal(bad.windowSeconds, 60);
  });
});

describe("rollout chart", () => {
  const T = 1_800_000_000_000;

  it("keeps a sample only when a count moved, within the window and the cap", () => {
    let s: readonly RolloutSample[] = [];
    s = recordRollout(s, rollout([["eu-west", 2, 0]]), T);
    s = recordRollout(s, rollout([["eu-west", 2, 0]]), T + 1_000);
    assert.equal(s.length, 1, "nothing moved");
    s = recordRollout(s, rollout([["eu-west", 3, 1]]), T + 2_000);
    assert.deepEqual(s[1], { atMs: T + 2_000, regions: [{ region: "eu-west", updated: 1, old: 2 }] });
    // Past the window, the last sample before its edge stays (the lines start with what held then).
    s = recordRollout(s, rollout([["eu-west", 2, 2]]), T + 2_000 + MOVES_WINDOW_MS + 1);
    assert.deepEqual(
      s.map((x) => x.atMs),
      [T + 2_000, T + 2_000 + MOVES_WINDOW_MS + 1],
    );
    let many: readonly RolloutSample[] = [];
    for (let i = 0; i < MAX_SAMPLES + 20; i++) many = recordRollout(many, rollout([["eu-west", i, 0]]), T + i);
    assert.equal(many.length, MAX_SAMPLES);
    assert.equal(many.at(-1)?.regions[0]?.old, MAX_SAMPLES + 19);
  });

  it("draws step lines, new and old per region, until now", () => {
    const samples: RolloutSample[] = [
      { atMs: T, regions: [{ region: "eu-west", updated: 0, old: 2 }] },
      {
        atMs: T + 10,
        regions: [
          { region: "eu-west", updated: 1, old: 1 },
          { region: "us-east", updated: 3, old: 0 },
        ],
      },
    ];
    assert.deepEqual(movesSeries(samples, T + 5, T + 20), [
      {
        name: "eu-west new",
        points: [
          { t: T + 5, v: 0 },
          { t: T + 10, v: 0 },
          { t: T + 10, v: 1 },
          { t: T + 20, v: 1 },
        ],
      },
      {
        name: "eu-west old",
        points: [
          { t: T + 5, v: 2 },
          { t: T + 10, v: 2 },
          { t: T + 10, v: 1 },
          { t: T + 20, v: 1 },
        ],
      },
      {
        name: "us-east new",
        points: [
          { t: T + 10, v: 3 },
          { t: T + 20, v: 3 },
        ],
      },
      {
        name: "us-east old",
        points: [
          { t: T + 10, v: 0 },
          { t: T + 20, v: 0 },
        ],
      },
    ]);
  });

  it("is drawn on the status tab with each line's last value in its accessible name", async () => {
    const now = Date.now();
    let moves: readonly RolloutSample[] = [];
    moves = recordRollout(moves, rollout([["eu-west", 2, 0]]), now - 60_000);
    moves = recordRollout(moves, rollout([["eu-west", 3, 2]]), now - 1_000);
    const view = environmentView();
    const { root, unmount } = await mount(
      h(EnvironmentBody, { envRef: PROD, tab: "status", state: "live", error: "", view, moves }),
    );
    const svg = byTag(root, "svg").find((e) => e.getAttribute("aria-label")?.startsWith("Instances per region"));
    assert.equal(
      svg?.getAttribute("aria-label"),
      "Instances per region, new and old: eu-west new: last 2 instances; eu-west old: last 1 instances",
    );
    await unmount();
    // Without samples (a page that has seen no view) there is no chart.
    const bare = await mount(h(EnvironmentBody, { envRef: PROD, tab: "status", state: "live", error: "", view }));
    assert.equal(
      byTag(bare.root, "svg").filter((e) => e.getAttribute("aria-label")?.startsWith("Instances")).length,
      0,
    );
    await bare.unmount();
  });
});
