// What an environment's page derives from its live view (pure): the revisions and the rollout's
// target (the one revision not offered as a rollback), what a scale asks for, the instances with
// their last event, the canary's steps, a rollback's diff; the events timeline, the log lines and
// their filters, the charts' series and the config tab's columns.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { InstanceEventSchema, type InstanceEvent } from "../../../src/gen/krane/ctrl/v1/events_pb.js";
import { MetricsSeriesSchema, RevisionMetricsSchema } from "../../../src/gen/krane/ctrl/v1/live_pb.js";
import { LogEntrySchema, LogMarkerKind } from "../../../src/gen/krane/ctrl/v1/logs_pb.js";
import { AddressRegionStatusSchema } from "../../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { SecretEntrySchema } from "../../../src/gen/krane/ctrl/v1/config_pb.js";
import { ClusterSchema, DeploymentSchema, type Deployment } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import {
  ProgressiveStatusSchema,
  RegionRolloutSchema,
  RolloutStatusSchema,
  WarmRevisionSchema,
} from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import {
  AGENT_SILENT_MS,
  agentHint,
  canarySteps,
  instanceRows,
  offersRollback,
  regionState,
  revisions,
  rollbackDiff,
  rollbackLines,
  ROLLOUT_ACTIONS,
  scaleReplicas,
  scaleTitle,
  verdictTone,
} from "../../../src/dashboard/views/environment/status-model.js";
import { mergeEvents, timeline } from "../../../src/dashboard/views/environment/events-model.js";
import { logFilters, logLine, matchingLines, type Line } from "../../../src/dashboard/views/environment/logs-model.js";
import {
  MAX_INSTANCE_LINES,
  alertRows,
  instanceSeries,
  revisionSeries,
} from "../../../src/dashboard/views/environment/charts-model.js";
import { AlertRuleSchema } from "../../../src/gen/krane/ctrl/v1/alerts_pb.js";
import {
  httpsPerRegion,
  readinessPerRegion,
  secretSource,
} from "../../../src/dashboard/views/environment/settings-model.js";
import { environmentView, NOW } from "./fixtures.js";

describe("environment status", () => {
  it("lists revisions newest first, and takes the rollout's target as current (a rollback's is older)", () => {
    const revs = revisions(environmentView());
    assert.deepEqual(
      revs.all.map((d) => d.deployment?.revision),
      [3n, 2n, 1n],
    );
    assert.equal(revs.current?.id, "dep-2");
    assert.equal(revs.revisionOf("dep-3"), 3n);
    assert.equal(revs.revisionOf("gone"), undefined);
  });

  it("takes the newest as current when no rollout names a target", () => {
    const revs = revisions(environmentView({ rollout: undefined }));
    assert.equal(revs.current?.id, "dep-3");
    assert.equal(revisions(environmentView({ status: undefined })).current, undefined);
  });

  it("says when krane rollback pinned the environment, and which revision each region keeps warm", () => {
    const none = create(RolloutStatusSchema, { regions: [create(RegionRolloutSchema, { region: "eu" })] });
    assert.deepEqual(
      rollbackLines(none, () => undefined),
      [],
    );
    const at = Date.parse("2026-01-01T12:30:00Z");
    const pinned = create(RolloutStatusSchema, {
      pinnedDeploymentId: "dep-1",
      pinnedRevision: 1n,
      regions: [
        create(RegionRolloutSchema, {
          region: "eu",
          warm: create(WarmRevisionSchema, {
            deploymentId: "dep-2",
            deploymentRevision: 2n,
            replicas: 3,
            untilUnixMs: BigInt(at),
          }),
        }),
        create(RegionRolloutSchema, {
          region: "us",
          warm: create(WarmRevisionSchema, { deploymentId: "dep-2", deploymentRevision: 2n, replicas: 2 }),
        }),
      ],
    });
    const lines = rollbackLines(pinned, (id) => (id === "dep-2" ? 2n : undefined));
    assert.deepEqual(
      lines.map((l) => l.tone),
      ["warn", "muted", "muted"],
    );
    assert.match(lines[0]?.text ?? "", /^Pinned to r1 by krane rollback: .* until krane rollback --unpin$/);
    assert.equal(
      lines[1]?.text,
      `Warm in eu: r2 (3 pods) for an instant rollback, until ${new Date(at).toLocaleTimeString()}`,
    );
    assert.match(lines[2]?.text ?? "", /^Warm in us: r2 \(2 pods\) .* until this rollout ends/);
  });

  it("offers a rollback to every revision but the current one", () => {
    const revs = revisions(environmentView());
    assert.deepEqual(
      revs.all.map((d) => offersRollback(d, revs.current)),
      [true, false, true],
    );
    // Before any revision is known to be current, every revision is offered.
    assert.equal(
      revs.all.every((d) => offersRollback(d, undefined)),
      true,
    );
  });

  it("offers the rollout's five actions, each confirmed with a title that says what it does", () => {
    assert.deepEqual(
      ROLLOUT_ACTIONS.map(([label, , call]) => [label, call]),
      [
        ["Pause", "pause"],
        ["Resume", "resume"],
        ["Promote", "promote"],
        ["Abort", "abort"],
        ["Restart", "restart"],
      ],
    );
    assert.match(ROLLOUT_ACTIONS[3][1], /stable revision/);
  });

  it("asks ctrl to scale to a whole number only; anything else is -1, which ctrl refuses by name", () => {
    assert.equal(scaleReplicas("3"), 3);
    assert.equal(scaleReplicas(" 0 "), 0);
    for (const bad of ["2.5", "three", "1e400"]) assert.equal(scaleReplicas(bad), -1, bad);
    assert.equal(scaleTitle("3", ""), "Scale to 3 in every region");
    assert.equal(scaleTitle("3", "eu-west"), "Scale to 3 in eu-west");
  });

  it("lists every instance with its state and its last event (reason, exit code, when)", () => {
    assert.deepEqual(instanceRows(environmentView(), NOW), [
      {
        key: "eu-west/web-a",
        region: "eu-west",
        name: "web-a",
        revision: 2,
        state: "running",
        node: "node-1",
        event: "",
        eventTitle: "",
      },
      {
        key: "eu-west/web-b",
        region: "eu-west",
        name: "web-b",
        revision: 2,
        state: "failed",
        node: "node-2",
        event: "OOMKilled (exit 137) 2m ago",
        eventTitle: "the container ran out of memory",
      },
    ]);
  });

  it("says a region's rollout in one word, failure before pause", () => {
    const r = (over: object) => regionState(create(RegionRolloutSchema, over));
    assert.equal(r({ complete: true, paused: true }), "complete");
    assert.equal(r({ deadlineExceeded: true, paused: true }), "failed");
    assert.equal(r({ paused: true }), "paused");
    assert.equal(r({}), "progressing");
  });

  it("says when no agent runs a region's rollout: none ever connected, or none heard lately", () => {
    const now = 10 * AGENT_SILENT_MS;
    const c = (region: string, seenAgo: number | null) =>
      create(ClusterSchema, { region, lastHeartbeatUnixMs: seenAgo === null ? 0n : BigInt(now - seenAgo) });
    assert.match(agentHint("eu", [], now), /no agent has connected for eu/);
    assert.match(agentHint("eu", [c("us", 1_000), c("eu", null)], now), /no agent has connected for eu/);
    assert.match(agentHint("eu", [c("eu", 5 * 60_000)], now), /last heard 5m ago/);
    assert.equal(agentHint("eu", [c("eu", 5 * 60_000), c("eu", 2_000)], now), "");
    assert.equal(agentHint("eu", [c("eu", AGENT_SILENT_MS - 1)], now), "");
  });

  it("writes a canary's steps and marks the one it is at, and those done", () => {
    const steps = environmentView().status?.environment?.rollout?.progressive?.canary?.steps ?? [];
    const at = (p: object | undefined) =>
      canarySteps(steps, p === undefined ? undefined : create(ProgressiveStatusSchema, p));
    assert.deepEqual(at({ step: 2, canaryDeploymentId: "dep-2" }), [
      { text: "weight 20 %", at: "done" },
      { text: "pause until promoted", at: "now" },
      { text: "analysis", at: "ahead" },
      { text: "pause 30 s", at: "ahead" },
    ]);
    // No canary any more (promoted or aborted): every step is behind it.
    assert.deepEqual(
      at({ step: 2, canaryDeploymentId: "" }).map((s) => s.at),
      ["done", "done", "done", "done"],
    );
    // No progressive rollout reported: nothing is marked.
    assert.deepEqual(
      at(undefined).map((s) => s.at),
      ["ahead", "ahead", "ahead", "ahead"],
    );
  });

  it("colours a verdict: pass, fail, anything else pending", () => {
    assert.deepEqual(["pass", "fail", "inconclusive"].map(verdictTone), ["ok", "bad", "warn"]);
  });

  it("diffs a rollback field by field: command with args, variables by name, config with values, secrets by name", () => {
    const from = create(DeploymentSchema, {
      image: "shop:3",
      command: ["node"],
      args: ["a.js"],
      port: 8080,
      env: [
        { name: "B", value: "hidden-b" },
        { name: "A", value: "hidden-a" },
      ],
      config: [{ name: "LOG_LEVEL", value: "debug" }],
      secretKeys: ["Z_KEY", "API_KEY"],
    });
    const to: Deployment = create(DeploymentSchema, { image: "shop:1", port: 8080, command: ["node"], args: ["a.js"] });
    assert.deepEqual(rollbackDiff(from, to), [
      { field: "image", now: "shop:3", then: "shop:1" },
      { field: "command", now: "node a.js", then: "node a.js" },
      { field: "port", now: "8080", then: "8080" },
      { field: "environment variables", now: "A, B", then: "" },
      { field: "config", now: "LOG_LEVEL=debug", then: "" },
      { field: "secret names", now: "API_KEY, Z_KEY", then: "" },
    ]);
    const text = JSON.stringify(rollbackDiff(from, to));
    assert.doesNotMatch(text, /hidden-/, "variables' values are not shown");
    // No current revision known: every field is new.
    assert.equal(rollbackDiff(undefined, to)[0]?.now, "");
  });
});

describe("environment events", () => {
  const ev = (over: object): InstanceEvent =>
    create(InstanceEventSchema, {
      deploymentId: "dep-2",
      revision: 2n,
      region: "eu-west",
      instance: "web-b",
      kind: "terminated",
      reason: "OOMKilled",
      atUnixMs: BigInt(NOW - 1_000),
      ...over,
    });

  it("replaces an event by its newer copy, and keeps only the newest", () => {
    const first = ev({ restarts: 1 });
    const other = ev({ reason: "Error", atUnixMs: BigInt(NOW - 500) });
    const merged = mergeEvents([first], [ev({ restarts: 2 }), other]);
    assert.deepEqual(
      merged.map((e) => [e.reason, e.restarts]),
      [
        ["OOMKilled", 2],
        ["Error", 0],
      ],
    );
    assert.deepEqual(
      mergeEvents(merged, [ev({ reason: "Completed", atUnixMs: BigInt(NOW) })], 2).map((e) => e.reason),
      ["Error", "Completed"],
    );
  });

  it("puts instance and rollout events in one timeline, newest first; only a rollout's warnings warn", () => {
    const view = environmentView();
    const rows = timeline([ev({ exitCode: 137, restarts: 3, message: "out of memory" })], view.rollout);
    assert.deepEqual(
      rows.map((r) => [r.source, r.region, r.what, r.detail, r.warning]),
      [
        ["r2 web-b", "eu-west", "terminated: OOMKilled (exit 137), 3 restarts", "out of memory", true],
        ["rollout", "eu-west", "StepFailed", "analysis failed", true],
      ],
    );
    const normal = timeline(
      [],
      create(RolloutStatusSchema, {
        regions: [{ region: "us-east", events: [{ atUnixMs: BigInt(NOW), type: "Normal", reason: "ScaledUp" }] }],
      }),
    );
    assert.equal(normal[0]?.warning, false);
    assert.equal(new Set(rows.map((r) => r.key)).size, rows.length, "keys are unique");
  });
});

describe("environment logs", () => {
  it("writes a line with its UTC time and where it came from, and a marker as a marker", () => {
    const at = BigInt(Date.UTC(2026, 0, 2, 3, 4, 5, 678)) * 1_000_000n;
    const line = logLine(
      create(LogEntrySchema, {
        timeUnixNano: at,
        region: "eu-west",
        instance: "web-a",
        revision: 2n,
        entry: { case: "line", value: "listening on 8080" },
      }),
      7,
    );
    assert.deepEqual(line, {
      n: 7,
      time: "03:04:05.678",
      source: "eu-west r2 web-a",
      text: "listening on 8080",
      marker: false,
    });
    const marker = logLine(
      create(LogEntrySchema, {
        timeUnixNano: at,
        region: "us-east",
        entry: { case: "marker", value: { kind: LogMarkerKind.DROPPED, message: "12 lines dropped" } },
      }),
      8,
    );
    assert.equal(marker.source, "us-east");
    assert.equal(marker.text, "[dropped] 12 lines dropped");
    assert.equal(marker.marker, true);
  });

  it("shows the newest lines whose text or source matches, in any case", () => {
    const lines: Line[] = Array.from({ length: 10 }, (_, n) => ({
      n,
      time: "",
      source: n % 2 ? "eu-west r2 web-a" : "us-east r2 web-b",
      text: n === 3 ? "ERROR boom" : `line ${n}`,
      marker: false,
    }));
    assert.deepEqual(
      matchingLines(lines, " error ").map((l) => l.n),
      [3],
    );
    assert.deepEqual(
      matchingLines(lines, "WEB-A").map((l) => l.n),
      [1, 3, 5, 7, 9],
    );
    assert.deepEqual(
      matchingLines(lines, "", 3).map((l) => l.n),
      [7, 8, 9],
    );
  });

  it("offers the view's regions, revisions and instances as filters", () => {
    assert.deepEqual(logFilters(environmentView()), {
      regions: ["eu-west", "us-east"],
      revisions: ["1", "3", "2"],
      instances: ["web-a", "web-b"],
    });
    assert.deepEqual(logFilters(environmentView({ status: undefined })), { regions: [], revisions: [], instances: [] });
  });
});

describe("environment charts and config", () => {
  it("draws one series per revision, leaves out buckets without the measure, and past-30-s at 30 s", () => {
    const revs = [
      create(RevisionMetricsSchema, {
        revision: 2n,
        points: [
          { atUnixMs: 1_000n, requestsPerSecond: 4, p99Ms: 250 },
          { atUnixMs: 2_000n, requestsPerSecond: 5, p99Ms: -1 },
          { atUnixMs: 3_000n, requestsPerSecond: 0 },
        ],
      }),
    ];
    assert.deepEqual(
      revisionSeries(revs, (p) => p.p99Ms),
      [
        {
          name: "r2",
          points: [
            { t: 1_000, v: 250 },
            { t: 2_000, v: 30_000 },
          ],
        },
      ],
    );
    assert.equal(revisionSeries(revs, (p) => p.requestsPerSecond)[0]?.points.length, 3);
  });

  it("draws each instance's CPU, the busiest first, without the revisions' series or instances with no figure", () => {
    const inst = (instance: string, cpu: (number | undefined)[]) =>
      create(MetricsSeriesSchema, {
        revision: 3n,
        region: "eu",
        instance,
        points: cpu.map((c, i) => ({ atUnixMs: BigInt(60_000 * (i + 1)), cpuMillicores: c })),
      });
    const series = [
      inst("", [undefined, undefined]),
      inst("web-7d9f-abcde", [10, 20]),
      inst("web-7d9f-fghij", [90, undefined]),
      inst("web-7d9f-klmno", [undefined]),
    ];
    assert.deepEqual(
      instanceSeries(series, (p) => p.cpuMillicores),
      [
        { name: "r3 eu …fghij", points: [{ t: 60_000, v: 90 }] },
        {
          name: "r3 eu …abcde",
          points: [
            { t: 60_000, v: 10 },
            { t: 120_000, v: 20 },
          ],
        },
      ],
    );
    const many = Array.from({ length: MAX_INSTANCE_LINES + 3 }, (_, i) => inst(`web-${i}`, [i]));
    assert.equal(instanceSeries(many, (p) => p.cpuMillicores).length, MAX_INSTANCE_LINES);
  });

  it("lists alert rules with their condition, a tone per state and the last minute's value", () => {
    const rows = alertRows([
      create(AlertRuleSchema, {
        name: "errors",
        metric: "error_rate",
        op: ">",
        threshold: 2,
        forSeconds: 300,
        state: "firing",
        sinceUnixMs: 5_000n,
        lastValue: 10.456,
      }),
      create(AlertRuleSchema, { name: "quiet", metric: "request_rate", op: "<", threshold: 1, forSeconds: 900 }),
      create(AlertRuleSchema, {
        name: "crashloop",
        metric: "restarts",
        op: ">",
        threshold: 3,
        forSeconds: 60,
        windowSeconds: 600,
      }),
    ]);
    assert.deepEqual(rows[0], {
      name: "errors",
      condition: "error_rate > 2 for 5m",
      state: "firing",
      tone: "bad",
      last: "10.46",
      sinceMs: 5_000,
    });
    assert.equal(rows[1]?.condition, "request_rate < 1 for 15m");
    assert.equal(rows[1]?.last, "-");
    assert.equal(rows[2]?.condition, "restarts > 3 in 10m for 1m");
  });

  it("says per region whether the HTTPS listeners are programmed, pending, refused or not reported", () => {
    const region = (name: string, listeners: { status: string; reason?: string }[]) =>
      create(AddressRegionStatusSchema, {
        region: name,
        readiness: "ready",
        route: { certificates: listeners.map((l) => ({ listener: { status: l.status, reason: l.reason ?? "" } })) },
      });
    assert.equal(
      httpsPerRegion([
        region("a", [{ status: "True" }, { status: "True" }]),
        region("b", [{ status: "True" }, { status: "" }]),
        region("c", [{ status: "False", reason: "InvalidCertificateRef" }]),
        region("d", [{ status: "Unknown" }]),
        region("e", []),
      ]),
      "a: programmed, b: pending, c: InvalidCertificateRef, d: Unknown, e: -",
    );
    assert.equal(readinessPerRegion([region("a", []), region("b", [])]), "a: ready, b: ready");
  });

  it("names where a secret's value comes from, never the value", () => {
    assert.equal(secretSource(create(SecretEntrySchema, { key: "K", source: "value" })), "value");
    assert.equal(
      secretSource(create(SecretEntrySchema, { key: "K", source: "external", externalPath: "vault:kv/app#k" })),
      "external: vault:kv/app#k",
    );
  });
});
