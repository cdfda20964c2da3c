// Alert rules through a real ctrl (HTTP/2), on SQLite and on PostgreSQL, with a real HTTP
// receiver (node:http) behind a signed webhook channel: an agent reports three minutes of 10 %
// errors as the agents do (ClusterService.ReportMeasurements, into the metrics history); a rule
// "error_rate > 2 for 3m" added afterwards looks back and fires; ctrl is stopped and started
// again on the same database; the agent reports a healthy minute, and once that minute has closed
// the rule resolves. The receiver gets exactly one alert.firing (value 10, the three minutes as
// its window) and one alert.resolved, each under one idempotency key, in that order; the rule
// lists as inactive with the healthy minute's value. Bad input is refused naming the field.
//
// The test waits for real minutes to close (about one): ctrl evaluates a minute `settleMs` after
// its end, on its own clock.
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import type { NotificationBody } from "../../../src/contracts/notifications.js";
import type { Keyring } from "../../../src/ctrl/secrets/keyring.js";
import { AlertService } from "../../../src/gen/krane/ctrl/v1/alerts_pb.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { ClusterService, ReportMeasurementsRequestSchema } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { NotificationService } from "../../../src/gen/krane/ctrl/v1/notify_pb.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { expectCode, randomKeyring, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const MIN = 60_000;
const SETTLE_MS = 2_000;
const KEY = "alerts-integration-key-0123456789";
const REF = { workspace: "acme", project: "shop", environment: "prod" };

/** A signed-webhook receiver: each delivery's idempotency key and body, repeats included. */
async function hookReceiver(): Promise<{ url: string; got: [string, NotificationBody][]; close: () => Promise<void> }> {
  const got: [string, NotificationBody][] = [];
  const server: Server = createServer((req, res) => {
    let text = "";
    req.on("data", (c: Buffer) => (text += c.toString("utf8")));
    req.on("end", () => {
      const mac = createHmac("sha256", KEY).update(`${String(req.headers["x-krane-timestamp"])}.${text}`);
      if (req.headers["x-krane-signature"] !== `sha256=${mac.digest("hex")}`) return res.writeHead(401).end();
      got.push([String(req.headers["idempotency-key"]), JSON.parse(text) as NotificationBody]);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    got,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function until<T>(what: string, check: () => T | undefined | Promise<T | undefined>, ms = 150_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

async function scenario(start: () => Promise<TestCtrl>): Promise<void> {
  let ctrl = await start();
  const hook = await hookReceiver();
  try {
    const admin = ctrl.adminToken;
    await ctrl.client(RegionService, admin).createRegion({ name: "eu" });
    const agentToken = await ctrl.agentToken("eu");
    await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: "acme" });
    await ctrl.client(ProjectService, admin).createProject({ workspace: "acme", slug: "shop" });
    const { environment } = await ctrl.client(EnvironmentService, admin).createEnvironment({
      workspace: "acme",
      project: "shop",
      slug: "prod",
      regions: [{ region: "eu", replicas: 1 }],
      sentinel: { image: "registry.example.com/sentinel:1", replicas: 1, cpuMillicores: 0n, memoryMib: 0n },
    });
    const { deployment } = await ctrl
      .client(DeploymentService, admin)
      .createDeployment({ ...REF, image: "registry.example.com/shop:1" });
    const envId = environment?.id ?? "";
    const depId = deployment?.id ?? "";
    await ctrl.client(NotificationService, admin).addChannel({
      workspace: "acme",
      name: "oncall",
      target: { case: "webhook", value: { url: hook.url, secret: KEY } },
      events: ["alert.firing", "alert.resolved"],
    });
    const report = (c: TestCtrl, fromMs: number, toMs: number, ok: number, failed: number) =>
      c.client(ClusterService, agentToken).reportMeasurements(
        create(ReportMeasurementsRequestSchema, {
          region: "eu",
          fromUnixMs: BigInt(fromMs),
          toUnixMs: BigInt(toMs),
          revisions: [
            { environmentId: envId, deploymentId: depId, responses2xx: BigInt(ok), responses5xx: BigInt(failed) },
          ],
        }),
      );
    const alerts = (c: TestCtrl) => c.client(AlertService, admin);

    // Bad input: each refused naming the field, nothing added.
    const rule = { ...REF, name: "errors", metric: "error_rate", op: ">", threshold: 2, forSeconds: 180 };
    await expectCode(alerts(ctrl).addAlertRule({ ...rule, metric: "cpu" }), Code.InvalidArgument, /^metric: /);
    await expectCode(
      alerts(ctrl).addAlertRule({ ...rule, windowSeconds: 90 }),
      Code.InvalidArgument,
      /^window_seconds: /,
    );
    await expectCode(alerts(ctrl).addAlertRule({ ...rule, forSeconds: 90 }), Code.InvalidArgument, /^for_seconds: /);
    assert.deepEqual((await alerts(ctrl).listAlertRules(REF)).rules, []);

    // Start early in a minute, so that the steps up to the rule's firing stay within it.
    while (Date.now() % MIN < 3_000 || Date.now() % MIN > 30_000) await sleep(500);
    const current = Date.now() - (Date.now() % MIN);
    // Three closed minutes of 10 % errors, then the rule (which looks back over its 3 minutes).
    for (const m of [3, 2, 1]) await report(ctrl, current - m * MIN + 1_000, current - m * MIN + 50_000, 90, 10);
    await alerts(ctrl).addAlertRule(rule);
    const firing = await until("alert.firing", () => hook.got.find(([, b]) => b.type === "alert.firing"));
    assert.equal(firing[1].title, "alert errors firing: shop/prod");
    assert.equal(firing[1].severity, "critical");
    assert.deepEqual(
      [firing[1].details.value, firing[1].details.window_start, firing[1].details.window_end],
      [10, new Date(current - 3 * MIN).toISOString(), new Date(current).toISOString()],
    );
    assert.equal((await alerts(ctrl).listAlertRules(REF)).rules[0]?.state, "firing");

    // ctrl restarts; the state it stored goes on from where it was.
    await ctrl.close();
    ctrl = await start();
    assert.equal((await alerts(ctrl).listAlertRules(REF)).rules[0]?.state, "firing");
    // A healthy current minute: once it has closed, the rule resolves.
    await report(ctrl, current + 1_000, Math.min(Date.now(), current + 59_000), 100, 0);
    const resolved = await until("alert.resolved", () => hook.got.find(([, b]) => b.type === "alert.resolved"));
    assert.equal(resolved[1].details.value, 0);
    assert.equal(resolved[1].details.window_end, new Date(current + MIN).toISOString());
    // Ordered per environment: a second firing would have come before the resolution.
    assert.deepEqual(
      hook.got.map(([k, b]) => [k, b.type]),
      [
        [firing[0], "alert.firing"],
        [resolved[0], "alert.resolved"],
      ],
    );
    assert.notEqual(firing[0], resolved[0]);
    const [listed] = (await alerts(ctrl).listAlertRules(REF)).rules;
    assert.equal(listed?.state, "inactive");
    assert.equal(listed?.lastValue, 0);
    await alerts(ctrl).removeAlertRule({ ...REF, name: "errors" });
    await expectCode(alerts(ctrl).removeAlertRule({ ...REF, name: "errors" }), Code.NotFound, /alert rule "errors"/);
  } finally {
    await ctrl.close();
    await hook.close();
  }
}

function settings(keyring: Keyring) {
  return {
    keyring,
    notifications: { allowLoopback: true, sweepIntervalMs: 200 },
    alerts: { settleMs: SETTLE_MS, sweepIntervalMs: 250 },
  };
}

describe("alert rules (SQLite)", () => {
  const dir = tempDir("krane-alerts-");
  after(() => dir.remove());
  it("fires once for an episode of errors and resolves once after it, across a restart", async () => {
    const keyring = randomKeyring();
    await scenario(() => startTestCtrl(join(dir.path, "ctrl.db"), settings(keyring)));
  });
});

describe("alert rules (PostgreSQL)", () => {
  let server: TestPostgres;
  let url = "";
  before(async () => {
    server = await startPostgres();
    url = await server.newDatabase();
  });
  after(async () => {
    await server?.stop();
  });
  it("fires once for an episode of errors and resolves once after it, across a restart", async () => {
    const keyring = randomKeyring();
    await scenario(() => startTestCtrl(url, settings(keyring)));
  });
});
