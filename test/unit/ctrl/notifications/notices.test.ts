// What changes say to people (pure): a rolling pass notifies once per region's outcome, a
// progressive decision once per promotion, abort (with the verdict) or rollback, and an
// instance's OOM kill or crash loop once per instance within the quiet period.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { certificateNotices, type StoredRouteStatus } from "../../../../src/ctrl/domain/exposure.js";
import { instanceNotices, NOTICE_QUIET_MS, type ReportedEvent } from "../../../../src/ctrl/domain/instance-events.js";
import { passNotice, progressiveNotices, rollbackNotice } from "../../../../src/ctrl/rollout/notices.js";
import type { Condition } from "../../../../src/rollout/index.js";
import { INITIAL_STATE, type ProgressiveState } from "../../../../src/rollout/progressive/index.js";

const progressing = (status: string, reason: string): Condition =>
  ({ type: "Progressing", status, reason, message: "m", lastUpdateTime: "", lastTransitionTime: "" }) as Condition;
const target = { id: "dep_b", revision: 2, image: "shop:2" };

describe("passNotice", () => {
  it("says succeeded or failed once, when the condition turns", () => {
    const env = (conditions: Condition[]) => ({ conditions, progressDeadlineSeconds: 60 });
    const available = progressing("True", "NewReplicaSetAvailable");
    const stuck = progressing("False", "ProgressDeadlineExceeded");
    const moving = progressing("True", "ReplicaSetUpdated");
    assert.equal(passNotice(env([moving]), [available], "eu", target)?.type, "deploy.succeeded");
    assert.equal(passNotice(env([available]), [available], "eu", target), null);
    const failed = passNotice(env([moving]), [stuck], "eu", target);
    assert.equal(failed?.type, "deploy.failed");
    assert.equal(failed?.severity, "critical");
    assert.deepEqual(failed?.deployment, { id: "dep_b", revision: 2 });
    assert.equal(passNotice(env([stuck]), [stuck], "eu", target), null);
    assert.equal(passNotice(env([moving]), [moving], "eu", target), null);
  });
});

describe("progressiveNotices", () => {
  const revisions = [{ id: "dep_a", revision: 1, image: "shop:1" }, target];
  const canarying: ProgressiveState = { ...INITIAL_STATE, stable: "dep_a", canary: "dep_b", phase: "Progressing" };
  const fail = { result: "fail" as const, reason: "error rate 7 % > 2 %", at: 1 };

  it("tells an abort with the analysis verdict", () => {
    const state: ProgressiveState = {
      ...canarying,
      aborted: true,
      phase: "Degraded",
      reason: "analysis failed",
      analysis: { ...canarying.analysis, last: fail },
    };
    const [n, more] = progressiveNotices(
      canarying,
      {
        state,
        aborted: true,
        events: [{ type: "Warning", reason: "RolloutAborted", message: "analysis failed" }],
      },
      revisions,
    );
    assert.equal(more, undefined);
    assert.equal(n?.type, "canary.aborted");
    assert.equal(n?.details?.verdict, "fail");
    assert.equal(n?.details?.verdict_reason, "error rate 7 % > 2 %");
    assert.deepEqual(n?.deployment, { id: "dep_b", revision: 2 });
  });

  it("tells a promotion once the new revision serves everywhere", () => {
    const pass = { result: "pass" as const, reason: "all checks passed", at: 2 };
    const [n] = progressiveNotices(
      { ...canarying, lastVerdict: pass },
      {
        state: { ...canarying, stable: "dep_b", canary: null, phase: "Healthy", lastVerdict: pass },
        aborted: false,
        events: [{ type: "Normal", reason: "RolloutCompleted", message: "dep_b serves 100 %" }],
      },
      revisions,
    );
    assert.equal(n?.type, "canary.promoted");
    assert.equal(n?.details?.verdict, "pass");
    // The first revision (no canary before it) is no promotion.
    assert.deepEqual(
      progressiveNotices(
        INITIAL_STATE,
        {
          state: { ...INITIAL_STATE, stable: "dep_a" },
          aborted: false,
          events: [{ type: "Normal", reason: "RolloutCompleted", message: "" }],
        },
        revisions,
      ),
      [],
    );
  });

  it("tells a blue-green abort within the window as a rollback, not twice", () => {
    const ns = progressiveNotices(
      { ...canarying, canary: null, stable: "dep_b", previous: "dep_a" },
      {
        state: { ...canarying, stable: "dep_a", canary: "dep_b", aborted: true },
        aborted: true,
        events: [{ type: "Warning", reason: "RolledBack", message: "traffic switched back to dep_a" }],
      },
      revisions,
    );
    assert.deepEqual(
      ns.map((n) => n.type),
      ["rollback"],
    );
    assert.deepEqual(ns[0]?.deployment, { id: "dep_a", revision: 1 });
  });

  it("says nothing of an ordinary step", () => {
    assert.deepEqual(
      progressiveNotices(
        canarying,
        { state: canarying, aborted: false, events: [{ type: "Normal", reason: "StepStarted", message: "" }] },
        revisions,
      ),
      [],
    );
  });

  it("names the revision a rolling rollback goes to", () => {
    assert.match(rollbackNotice(3).summary, /revision 3/);
    assert.match(rollbackNotice(null).summary, /previous revision/);
  });
});

describe("instanceNotices", () => {
  const d = { id: "dep_b", revision: 2, image: "shop:2" };
  const ev = (over: Partial<ReportedEvent>): ReportedEvent => ({
    instance: "shop-b-1",
    kind: "terminated",
    reason: "OOMKilled",
    atMs: 10 * NOTICE_QUIET_MS,
    exitCode: 137,
    restarts: 1,
    image: "",
    message: "",
    ...over,
  });

  it("tells an OOM kill and a crash loop, and nothing else", () => {
    const ns = instanceNotices(
      [ev({}), ev({ kind: "waiting", reason: "CrashLoopBackOff", restarts: 4 }), ev({ reason: "Error", exitCode: 1 })],
      [],
      d,
      "eu",
    );
    assert.deepEqual(
      ns.map((n) => n.type),
      ["instance.oom", "instance.crashloop"],
    );
    assert.equal(ns[0]?.details?.instance, "shop-b-1");
    assert.equal(ns[0]?.details?.image, "shop:2");
  });

  it("tells an instance's repeats once per quiet period", () => {
    const at = 10 * NOTICE_QUIET_MS;
    assert.equal(instanceNotices([ev({ atMs: at }), ev({ atMs: at + 1000 })], [], d, "eu").length, 1);
    const stored = [{ instance: "shop-b-1", reason: "OOMKilled", at_ms: at - 60_000 }];
    assert.equal(instanceNotices([ev({ atMs: at })], stored, d, "eu").length, 0);
    assert.equal(instanceNotices([ev({ atMs: at + NOTICE_QUIET_MS })], stored, d, "eu").length, 1);
    assert.equal(instanceNotices([ev({ atMs: at, instance: "shop-b-2" })], stored, d, "eu").length, 1);
  });
});

describe("certificateNotices", () => {
  const cond = (status: string, reason = "", message = "") => ({ status, reason, message });
  const route = (certs: [string, string, string?][]): StoredRouteStatus => ({
    name: "web",
    visibility: "public",
    gateway: "krane/public",
    accepted: cond("True"),
    resolvedRefs: cond("True"),
    certificates: certs.map(([hostname, status, reason]) => ({
      hostname,
      secretName: `tls-${hostname}`,
      ready: cond(status, reason ?? "", reason === undefined ? "" : `because ${reason}`),
    })),
    problem: "",
  });

  it("tells a certificate that was ready and is not, once, naming the host, region and reason", () => {
    const before = [
      route([
        ["a.example.com", "True"],
        ["b.example.com", "True"],
      ]),
    ];
    const after = [
      route([
        ["a.example.com", "False", "Expired"],
        ["b.example.com", "True"],
      ]),
    ];
    const ns = certificateNotices(before, after, "eu");
    assert.deepEqual(
      ns.map((n) => [n.type, n.details?.hostname, n.details?.reason, n.region]),
      [["certificate.failing", "a.example.com", "Expired", "eu"]],
    );
    assert.match(ns[0]?.text ?? "", /Expired: because Expired/);
    // The next report that still says False tells nothing more: it was told at the turn.
    assert.equal(certificateNotices(after, after, "eu").length, 0);
  });

  it("tells nothing of a first issuance, an unknown state or a hostname on two routes twice", () => {
    assert.equal(certificateNotices([], [route([["a.example.com", "False", "DoesNotExist"]])], "eu").length, 0);
    assert.equal(
      certificateNotices([route([["a.example.com", "True"]])], [route([["a.example.com", "Unknown"]])], "eu").length,
      0,
    );
    const twice = [route([["a.example.com", "False", "Expired"]]), route([["a.example.com", "False", "Expired"]])];
    assert.equal(certificateNotices([route([["a.example.com", "True"]])], twice, "eu").length, 1);
  });
});
