// Notifications through a real ctrl process, the real CLI, a real HTTP receiver (node:http) and a
// real SMTP server (smtp-server, the nodemailer project's), on SQLite and on PostgreSQL: channels
// of each kind get a deploy that succeeded, a deploy that failed and an OOM kill, each event once
// per idempotency key, in order; ctrl killed (SIGKILL) between an event and its delivery delivers
// it after the restart; a receiver answering 500 is retried with the same key until the channel
// shows failing; bad input (a channel URL that is not https, an SMTP server that does not answer)
// is refused naming the field, with nothing applied.
import assert from "node:assert/strict";
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { writeFileSync } from "node:fs";
import { createServer as createHttpServer, type Server } from "node:http";
import { createServer as createNetServer, type AddressInfo } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { SMTPServer } from "smtp-server";
import type { NotificationBody } from "../../../src/contracts/notifications.js";
import {
  ClusterService,
  InstanceStatus,
  ReportDeploymentStatusRequestSchema,
  ReportGatewayStatusRequestSchema,
} from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { generateToken } from "../../../src/ctrl/domain/tokens.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { generatedAdminToken, kraneAsync, spawnCtrl, type CtrlProcess } from "./process.js";
import { tempDir, transportFor } from "./support.js";

const SECRET = "notify-integration-key-0123456789";

interface Received {
  /** Every request's idempotency key, in arrival order (repeats included). */
  keys: string[];
  /** The first body of each key, in arrival order. */
  bodies: NotificationBody[];
}

function receiver() {
  const hook: Received = { keys: [], bodies: [] };
  const slack: { payloads: unknown[]; ids: string[] } = { payloads: [], ids: [] };
  const failing: string[] = [];
  let badSignatures = 0;
  let server: Server | undefined;
  let port = 0;
  const handle = (path: string, headers: Record<string, string | string[] | undefined>, text: string) => {
    if (path === "/fail") {
      failing.push(String(headers["idempotency-key"]));
      return 500;
    }
    if (path === "/slack") {
      slack.payloads.push(JSON.parse(text));
      slack.ids.push(String(headers["x-krane-delivery"]));
      return 200;
    }
    const ts = String(headers["x-krane-timestamp"] ?? "");
    const want = Buffer.from(`sha256=${createHmac("sha256", SECRET).update(`${ts}.${text}`).digest("hex")}`);
    const got = Buffer.from(String(headers["x-krane-signature"] ?? ""));
    if (got.length !== want.length || !timingSafeEqual(got, want)) {
      badSignatures++;
      return 401;
    }
    const key = String(headers["idempotency-key"]);
    if (!hook.keys.includes(key)) hook.bodies.push(JSON.parse(text) as NotificationBody);
    hook.keys.push(key);
    return 204;
  };
  return {
    hook,
    slack,
    failing,
    badSignatures: () => badSignatures,
    url: (path: string) => `http://127.0.0.1:${port}${path}`,
    async start(): Promise<void> {
      server = createHttpServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () =>
          res.writeHead(handle(req.url ?? "", req.headers, Buffer.concat(chunks).toString("utf8"))).end(),
        );
      });
      await new Promise<void>((resolve) => server?.listen(port, "127.0.0.1", resolve));
      port = (server.address() as AddressInfo).port;
    },
    async stop(): Promise<void> {
      await new Promise<void>((resolve) => {
        server?.close(() => resolve());
        server?.closeAllConnections();
      });
    },
  };
}

/** A real SMTP server on loopback: the Message-ID of every message it accepted, repeats included. */
async function mailbox(): Promise<{ port: number; ids: string[]; stop: () => Promise<void> }> {
  const ids: string[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    onData(stream, _session, done) {
      let raw = "";
      stream.on("data", (c: Buffer) => (raw += c.toString("utf8")));
      stream.on("end", () => {
        const id = /^Message-ID:\s*(\S+)/im.exec(raw)?.[1];
        if (id) ids.push(id);
        done();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.server.address() as AddressInfo).port;
  return { port, ids, stop: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** A loopback port nobody listens on. */
async function closedPort(): Promise<number> {
  const s = createNetServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

async function until(what: string, ok: () => boolean | Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

/** Where a suite's ctrl keeps its state: its `--database` and how the test gets the admin token. */
interface Database {
  /** Arguments naming the database and the admin token's source. */
  args(dir: string): Promise<string[]>;
  adminToken(dir: string): Promise<string>;
  stop(): Promise<void>;
}

const sqlite: Database = {
  args: (dir) => Promise.resolve(["--database", join(dir, "ctrl.db")]),
  adminToken: (dir) => generatedAdminToken(join(dir, "ctrl.db")),
  stop: () => Promise.resolve(),
};

function postgres(): Database {
  let pg: TestPostgres | undefined;
  const admin = generateToken("user");
  return {
    async args(dir) {
      pg = await startPostgres();
      const tokenFile = join(dir, "admin-token");
      writeFileSync(tokenFile, `${admin}\n`, { mode: 0o600 });
      // PostgreSQL has no database directory for ctrl to keep a generated master key in.
      const keyFile = join(dir, "master-key");
      writeFileSync(keyFile, `${randomBytes(32).toString("base64")}\n`, { mode: 0o600 });
      return ["--database", await pg.newDatabase(), "--admin-token-file", tokenFile, "--master-key-file", keyFile];
    },
    adminToken: () => Promise.resolve(admin),
    stop: async () => pg?.stop(),
  };
}

notifications("notifications (SQLite)", sqlite);
notifications("notifications (PostgreSQL)", postgres());

function notifications(name: string, database: Database): void {
  describe(name, () => {
    const dir = tempDir("krane-notify-");
    const rx = receiver();
    let smtp: Awaited<ReturnType<typeof mailbox>>;
    let ctrl: CtrlProcess;
    let env: NodeJS.ProcessEnv;
    let args: string[] = [];

    // The CLI runs beside this process (its receivers must keep answering while it waits).
    const krane = (a: string[]) => kraneAsync(a, env);
    const ok = async (a: string[]): Promise<string> => {
      const r = await krane(a);
      assert.equal(r.status, 0, `krane ${a.join(" ")}: ${r.stderr}`);
      return r.stdout;
    };
    const file = (name: string, text: string): string => {
      const p = join(dir.path, name);
      writeFileSync(p, text, { mode: 0o600 });
      return p;
    };
    const channels = async () =>
      (JSON.parse(await ok(["notify", "list", "-o", "json"])) as { channels?: Record<string, unknown>[] }).channels ??
      [];

    before(async () => {
      await rx.start();
      smtp = await mailbox();
      args = [...(await database.args(dir.path)), "--notify-allow-loopback"];
      ctrl = await spawnCtrl(args);
      env = { KRANE_CTRL_URL: ctrl.url, KRANE_TOKEN: await database.adminToken(dir.path), KRANE_WORKSPACE: "acme" };
    });
    after(async () => {
      await ctrl.stop();
      await rx.stop();
      await smtp.stop();
      await database.stop();
      dir.remove();
    });

    it("refuses bad channels and an SMTP server that does not answer, naming the field", async () => {
      await ok(["region", "create", "eu"]);
      await ok(["workspace", "create", "acme"]);
      await ok(["project", "create", "shop"]);
      await ok(["env", "create", "shop/prod", "--region", "eu=1", "--no-sentinel", "--progress-deadline-seconds", "5"]);

      const plain = await krane([
        "notify",
        "add",
        "plain",
        "--type",
        "webhook",
        "--url-file",
        file("plain-url", "http://hooks.example.com/in"),
        "--secret-file",
        file("plain-key", SECRET),
      ]);
      assert.notEqual(plain.status, 0);
      assert.match(plain.stderr, /invalid_argument.*webhook\.url.*https/);

      const mail = await krane(["notify", "add", "mail", "--type", "email", "--to", "ops@example.com"]);
      assert.notEqual(mail.status, 0, "no SMTP server is named yet");
      assert.match(mail.stderr, /failed_precondition.*SMTP/);

      const silent = await krane(
        [
          "notify",
          "smtp",
          "set",
          "--host",
          "127.0.0.1",
          "--port",
          String(await closedPort()),
          "--security",
          "none",
        ].concat(["--from", "krane@example.com"]),
      );
      assert.notEqual(silent.status, 0);
      assert.match(silent.stderr, /invalid_argument.*host.*does not answer/);
      assert.match(await ok(["notify", "smtp", "show"]), /no SMTP server is named/);
      assert.deepEqual(await channels(), []);
    });

    it("adds a channel of each kind and sends a test message", async () => {
      await ok(
        ["notify", "smtp", "set", "--host", "127.0.0.1", "--port", String(smtp.port), "--security", "none"].concat([
          "--from",
          "krane@example.com",
        ]),
      );
      await ok([
        "notify",
        "add",
        "hook",
        "--type",
        "webhook",
        "--url-file",
        file("u1", rx.url("/hook")),
        "--secret-file",
        file("k1", SECRET),
      ]);
      await ok([
        "notify",
        "add",
        "chat",
        "--type",
        "slack",
        "--url-file",
        file("u2", rx.url("/slack")),
        "--event",
        "deploy.failed",
      ]);
      await ok(["notify", "add", "mail", "--type", "email", "--to", "ops@example.com", "--env", "shop/prod"]);
      await ok([
        "notify",
        "add",
        "broken",
        "--type",
        "webhook",
        "--url-file",
        file("u3", rx.url("/fail")),
        "--secret-file",
        file("k3", SECRET),
        "--event",
        "deploy.started",
      ]);
      const listed = await channels();
      assert.deepEqual(
        listed.map((c) => [c.name, c.type, c.target]),
        [
          ["broken", "webhook", `http://127.0.0.1:${new URL(rx.url("/")).port}/…`],
          ["chat", "slack", `http://127.0.0.1:${new URL(rx.url("/")).port}/…`],
          ["hook", "webhook", `http://127.0.0.1:${new URL(rx.url("/")).port}/…`],
          ["mail", "email", "ops@example.com"],
        ],
      );
      assert.doesNotMatch(
        JSON.stringify(listed),
        /\/hook|\/slack|\/fail|notify-integration-key/,
        "no URL path or key is shown",
      );
      assert.match(await ok(["notify", "test", "hook"]), /took the test message/);
      assert.equal(rx.hook.bodies.at(-1)?.type, "test");
      const failed = await krane(["notify", "test", "broken"]);
      assert.equal(failed.status, 1);
      assert.match(failed.stderr, /answered 500/);
    });

    it("delivers a deploy that succeeded, one that failed and an OOM kill, each once, in order", async () => {
      const agent = createClient(
        ClusterService,
        transportFor(ctrl.url, (await ok(["cluster-token", "create", "eu"])).trim()),
      );
      const dep1 = (
        JSON.parse(await ok(["deploy", "shop/prod", "--image", "registry.example.com/shop:1", "-o", "json"])) as {
          id: string;
        }
      ).id;
      const report = (deploymentId: string, ready: boolean, events: { reason: string; at: number }[] = []) =>
        agent.reportDeploymentStatus(
          create(ReportDeploymentStatusRequestSchema, {
            region: "eu",
            change: {
              case: "update",
              value: {
                deploymentId,
                instances: [
                  {
                    k8sName: "web-1",
                    address: "10.0.0.1:8080",
                    status: ready ? InstanceStatus.RUNNING : InstanceStatus.FAILED,
                    readySinceUnixMs: ready ? BigInt(Date.now() - 60_000) : 0n,
                  },
                ],
                events: events.map((e) => ({
                  instance: "web-1",
                  kind: "terminated",
                  reason: e.reason,
                  atUnixMs: BigInt(e.at),
                  exitCode: 137,
                  restarts: 1,
                  image: "registry.example.com/shop:1",
                  message: "",
                })),
              },
            },
          }),
        );
      let lastError = "";
      const types = () => rx.hook.bodies.filter((b) => b.type !== "test").map((b) => b.type);
      await until(`revision 1 desired (${lastError})`, async () => {
        try {
          await report(dep1, true);
          return true;
        } catch (err) {
          lastError = String(err);
          return false;
        }
      });
      await until("deploy.succeeded", () => types().includes("deploy.succeeded"));
      await report(dep1, false, [{ reason: "OOMKilled", at: Date.now() }]);
      await until("instance.oom", () => types().includes("instance.oom"));
      await ok(["deploy", "shop/prod", "--image", "registry.example.com/shop:2"]);
      // Nothing becomes ready: past the 5 s progress deadline the deploy has failed.
      await until("deploy.failed", () => types().includes("deploy.failed"));
      assert.deepEqual(types(), [
        "deploy.started",
        "deploy.succeeded",
        "instance.oom",
        "deploy.started",
        "deploy.failed",
      ]);

      const events = rx.hook.bodies.filter((b) => b.type !== "test");
      // Once per idempotency key, which is the event's id, distinct per event.
      assert.equal(new Set(rx.hook.keys).size, rx.hook.keys.length, "each event arrived once");
      assert.deepEqual(
        events.map((b) => b.id),
        rx.hook.keys.filter((k) => events.some((b) => b.id === k)),
      );
      assert.equal(rx.badSignatures(), 0);
      const oom = events.find((b) => b.type === "instance.oom");
      assert.equal(oom?.details.instance, "web-1");
      assert.equal(oom?.revision, 1);

      // The Slack channel asked for deploy.failed only: one message, in Slack's format.
      await until("the Slack message", () => rx.slack.payloads.length >= 1);
      const failed = events.find((b) => b.type === "deploy.failed");
      assert.deepEqual(rx.slack.ids, [failed?.id]);
      const m = rx.slack.payloads[0] as { text: string; attachments: { fallback: string; fields: unknown[] }[] };
      assert.match(m.text, /deploy failed in eu: shop\/prod/);
      assert.ok(m.attachments[0]?.fallback);

      // Email: every event of shop/prod, each once (its Message-ID is the event's id).
      await until("the emails", () => smtp.ids.length >= events.length);
      assert.deepEqual(
        smtp.ids,
        events.map((b) => `<${b.id}@krane.notifications>`),
      );
    });

    it("retries a receiver answering 500 with the same key, then shows the channel failing", async () => {
      await until(
        "the channel failing",
        async () => (await channels()).find((c) => c.name === "broken")?.state === "failing",
      );
      const broken = (await channels()).find((c) => c.name === "broken");
      assert.match(String(broken?.lastError), /the receiver answered 500/);
      assert.ok(Number(broken?.pending) >= 1);
      // The head of its lane is retried; the event after it waits (order per environment).
      const deliveryKeys = rx.failing.slice(1); // the first was the test message
      assert.ok(deliveryKeys.length >= 3, `attempts: ${deliveryKeys.length}`);
      assert.equal(new Set(deliveryKeys).size, 1, `one event retried: ${deliveryKeys.join(", ")}`);
      assert.equal(deliveryKeys[0], rx.hook.bodies.find((b) => b.type === "deploy.started")?.id);
      // The other channels were not held up by it.
      const hook = (await channels()).find((c) => c.name === "hook");
      assert.equal(hook?.state, "ok");
    });

    it("delivers an event after ctrl is killed between the event and its delivery", async () => {
      await rx.stop();
      await ok(["rollout", "undo", "shop/prod"]);
      ctrl.child.kill("SIGKILL");
      await new Promise((resolve) => ctrl.child.once("exit", resolve));
      await rx.start();
      ctrl = await spawnCtrl(args);
      env.KRANE_CTRL_URL = ctrl.url;
      await until("the rollback after the restart", () => rx.hook.bodies.some((b) => b.type === "rollback"));
      const rollback = rx.hook.bodies.filter((b) => b.type === "rollback");
      assert.equal(rollback.length, 1);
      assert.equal(rx.hook.keys.filter((k) => k === rollback[0]?.id).length, 1, "delivered once");
      assert.equal(new Set(rx.hook.keys).size, rx.hook.keys.length);
    });

    it("tells a domain's certificate that was ready in a region and is not any more, once", async () => {
      const envId = (JSON.parse(await ok(["env", "get", "shop/prod", "-o", "json"])) as { id: string }).id;
      const agent = createClient(
        ClusterService,
        transportFor(ctrl.url, (await ok(["cluster-token", "create", "eu"])).trim()),
      );
      const report = (ready: string, reason: string) =>
        agent.reportGatewayStatus(
          create(ReportGatewayStatusRequestSchema, {
            region: "eu",
            change: {
              case: "update",
              value: {
                gatewayId: envId,
                routes: [
                  {
                    name: "web",
                    visibility: "public",
                    certificates: [
                      {
                        hostname: "shop.example.com",
                        secretName: "shop-tls",
                        ready: { status: ready, reason, message: "" },
                      },
                    ],
                  },
                ],
              },
            },
          }),
        );
      const failing = () => rx.hook.bodies.filter((b) => b.type === "certificate.failing");
      await report("False", "DoesNotExist"); // a first issuance: nothing to tell
      await report("True", "Ready");
      await report("False", "Expired");
      await report("False", "Expired"); // the same state again: told once
      await until("certificate.failing", () => failing().length > 0);
      await sleep(1_000);
      assert.equal(failing().length, 1);
      assert.equal(failing()[0]?.details.hostname, "shop.example.com");
      assert.equal(failing()[0]?.details.reason, "Expired");
      assert.equal(failing()[0]?.region, "eu");
    });
  });
}
