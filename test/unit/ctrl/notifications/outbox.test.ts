// The notification outbox on a real SQLite database: notify() writes an event only for the
// channels subscribed to it (events, environments), claims hand out only the head of each
// (channel, environment) lane and never one a replica holds, failures count against the channel
// until it shows failing and a delivery resets it, a dropped delivery unblocks its lane; and the
// deliverer, against a real HTTP receiver on loopback, delivers in order with a signature and the
// event's id as the idempotency key, retrying a receiver's 500.
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import type { NotificationBody } from "../../../../src/contracts/notifications.js";
import { Store } from "../../../../src/ctrl/db/store.js";
import { createRegion } from "../../../../src/ctrl/domain/clusters.js";
import { createEnvironment } from "../../../../src/ctrl/domain/environments.js";
import {
  addChannel,
  channelDueNow,
  claimDueDeliveries,
  dropExpiredDeliveries,
  FAILING_AFTER,
  notify,
  parseDeliveryKey,
  recordDelivered,
  recordFailure,
  type Notice,
} from "../../../../src/ctrl/domain/notifications.js";
import { createProject, createWorkspace } from "../../../../src/ctrl/domain/tenancy.js";
import { NotificationDeliverer } from "../../../../src/ctrl/notifications/deliverer.js";
import { listChannels } from "../../../../src/ctrl/read/notifications.js";
import { Keyring } from "../../../../src/ctrl/secrets/keyring.js";
import type { ChannelInput } from "../../../../src/ctrl/validate/notifications.js";

const keyring = new Keyring(Buffer.alloc(32, 7));
const SECRET = "outbox-test-key-0123456789";

async function seed(store: Store): Promise<{ wsId: string; prod: string; stage: string }> {
  await createRegion(store, "eu");
  const ws = await createWorkspace(store, { slug: "acme", name: "Acme" });
  await createProject(store, { workspace: "acme", slug: "shop", name: "Shop" });
  const env = async (slug: string) =>
    (
      await createEnvironment(store, {
        workspace: "acme",
        project: "shop",
        slug,
        regions: [{ region: "eu", replicas: 1 }],
        sentinel: null,
        rollout: {
          strategy: "RollingUpdate",
          maxSurge: "25%",
          maxUnavailable: "25%",
          minReadySeconds: 0,
          progressDeadlineSeconds: 600,
          warmWindowSeconds: 0,
          revisionHistoryLimit: 10,
          paused: false,
          progressive: null,
        },
      })
    ).environment.id;
  return { wsId: ws.id, prod: await env("prod"), stage: await env("stage") };
}

function webhook(name: string, url: string, over: Partial<ChannelInput> = {}): ChannelInput {
  return {
    workspace: "acme",
    name,
    target: { type: "webhook", url, secret: SECRET },
    events: [],
    environments: [],
    ...over,
  };
}

const notice = (environmentId: string, n: number, type: Notice["type"] = "deploy.started"): Notice => ({
  type,
  severity: "info",
  environmentId,
  summary: `event ${n}`,
  text: `event number ${n}`,
  details: { n },
});

async function emit(store: Store, n: Notice): Promise<string | undefined> {
  return store.write((tx) => notify(tx, n));
}

describe("the outbox", () => {
  let store: Store;
  let env: { wsId: string; prod: string; stage: string };
  before(async () => {
    store = await Store.open({ url: ":memory:" });
    env = await seed(store);
  });
  after(() => store.close());

  it("writes nothing when no channel wants the event", async () => {
    assert.equal(await emit(store, notice(env.prod, 0)), undefined);
    const rows = await store.db.selectFrom("notification_events").selectAll().execute();
    assert.equal(rows.length, 0);
  });

  it("writes a delivery only to the channels subscribed to the event and the environment", async () => {
    await addChannel(store, keyring, webhook("all", "https://a.example.com/"));
    await addChannel(store, keyring, webhook("failures", "https://b.example.com/", { events: ["deploy.failed"] }));
    await addChannel(store, keyring, webhook("stage", "https://c.example.com/", { environments: ["shop/stage"] }));
    const started = await emit(store, notice(env.prod, 1));
    const failed = await emit(store, notice(env.prod, 2, "deploy.failed"));
    const staged = await emit(store, notice(env.stage, 3));
    const names = async (eventId: string | undefined) =>
      (
        await store.db
          .selectFrom("notification_deliveries")
          .innerJoin("notification_channels", "notification_channels.id", "notification_deliveries.channel_id")
          .select("notification_channels.name")
          .where("event_id", "=", eventId ?? "")
          .orderBy("name")
          .execute()
      ).map((r) => r.name);
    assert.deepEqual(await names(started), ["all"]);
    assert.deepEqual(await names(failed), ["all", "failures"]);
    assert.deepEqual(await names(staged), ["all", "stage"]);
  });

  it("hands out only the head of each (channel, lane), once, in the lanes' order", async () => {
    const byChannel = async () =>
      new Map(
        (await store.db.selectFrom("notification_channels").select(["id", "name"]).execute()).map((c) => [
          c.id,
          c.name,
        ]),
      );
    const names = await byChannel();
    const first = await claimDueDeliveries(store, 100, 60_000);
    const claimed = first.map((k) => {
      const { channelId, eventId } = parseDeliveryKey(k);
      return `${names.get(channelId)}`.concat(` ${eventId}`);
    });
    // "all" has two lanes (prod, stage): their heads; "failures" and "stage" one each.
    assert.equal(claimed.length, 4, claimed.join("\n"));
    // A second replica finds nothing while the leases hold.
    assert.deepEqual(await claimDueDeliveries(store, 100, 60_000), []);
    // The head of "all"/prod delivered: the next of its lane is claimed at once, in order.
    const allProd = first.find((k) => {
      const { channelId } = parseDeliveryKey(k);
      return names.get(channelId) === "all";
    });
    assert.ok(allProd);
    const headEvent = await store.db
      .selectFrom("notification_events")
      .select(["seq", "lane"])
      .where("id", "=", parseDeliveryKey(allProd).eventId)
      .executeTakeFirstOrThrow();
    const next = await recordDelivered(store, allProd, 60_000);
    if (headEvent.lane === env.prod) {
      assert.ok(next, "the next event of the lane");
      const e = await store.db
        .selectFrom("notification_events")
        .select(["seq", "lane"])
        .where("id", "=", parseDeliveryKey(next).eventId)
        .executeTakeFirstOrThrow();
      assert.equal(e.lane, env.prod);
      assert.equal(Number(e.seq), Number(headEvent.seq) + 1);
    }
  });

  it("shows a channel failing after repeated failures, and ok again after a delivery", async () => {
    const [ch] = await store.db
      .selectFrom("notification_channels")
      .select("id")
      .where("name", "=", "failures")
      .execute();
    assert.ok(ch);
    const key = await store.db
      .selectFrom("notification_deliveries")
      .select(["channel_id", "event_id"])
      .where("channel_id", "=", ch.id)
      .executeTakeFirstOrThrow();
    const k = `${key.channel_id} ${key.event_id}`;
    const state = async () => (await listChannels(store.db, env.wsId)).find((v) => v.channel.id === ch.id);
    for (let i = 1; i <= FAILING_AFTER; i++) {
      await recordFailure(store, k, "the receiver answered 500", store.clock() - 1);
      const s = await state();
      assert.equal(s?.state, i < FAILING_AFTER ? "new" : "failing", `after ${i} failures`);
      assert.equal(s?.channel.last_error, "the receiver answered 500");
    }
    assert.equal((await state())?.pending, 1);
    // Backing off for an hour: not due, until a test message gets through and makes it due now.
    await recordFailure(store, k, "the receiver answered 500", store.clock() + 3_600_000);
    assert.ok(!(await claimDueDeliveries(store, 100, 60_000)).includes(k));
    assert.equal(await channelDueNow(store, ch.id), 1);
    assert.deepEqual(await claimDueDeliveries(store, 100, 60_000), [k]);
    await recordDelivered(store, k, 60_000);
    const s = await state();
    assert.equal(s?.state, "ok");
    assert.equal(s?.pending, 0);
  });

  it("drops deliveries past the age limit, which unblocks their lanes", async () => {
    const dropped = await dropExpiredDeliveries(store, store.clock() + 1);
    assert.ok(dropped > 0);
    const pending = await store.db
      .selectFrom("notification_deliveries")
      .select("state")
      .where("state", "=", "pending")
      .execute();
    assert.equal(pending.length, 0);
    const total = (await listChannels(store.db, env.wsId)).reduce((n, v) => n + Number(v.channel.dropped), 0);
    assert.equal(total, dropped);
  });
});

describe("the deliverer against a real receiver", () => {
  let store: Store;
  let env: { wsId: string; prod: string; stage: string };
  const got: { id: string; n: number; key: string | undefined; signed: boolean }[] = [];
  let failNext = 0;
  let answered500 = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (failNext > 0) {
        failNext--;
        answered500++;
        res.writeHead(500).end("down for a moment");
        return;
      }
      const text = Buffer.concat(chunks).toString("utf8");
      const ts = String(req.headers["x-krane-timestamp"]);
      const want = `sha256=${createHmac("sha256", SECRET).update(`${ts}.${text}`).digest("hex")}`;
      const b = JSON.parse(text) as NotificationBody;
      got.push({
        id: b.id,
        n: Number(b.details.n),
        key: req.headers["idempotency-key"] as string | undefined,
        signed: req.headers["x-krane-signature"] === want,
      });
      res.writeHead(204).end();
    });
  });
  let deliverer: NotificationDeliverer;

  before(async () => {
    store = await Store.open({ url: ":memory:" });
    env = await seed(store);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    await addChannel(store, keyring, webhook("hook", url));
    deliverer = new NotificationDeliverer({
      store,
      keyring,
      allowLoopback: true,
      sweepIntervalMs: 20,
      retry: { baseMs: 10, capMs: 40, minMs: 5 },
    });
  });
  after(async () => {
    await deliverer.stop();
    server.close();
    await store.close();
  });

  async function until(what: string, ok: () => boolean): Promise<void> {
    for (let i = 0; i < 500 && !ok(); i++) await new Promise((r) => setTimeout(r, 20));
    assert.ok(ok(), what);
  }

  it("delivers in order, signed, keyed by the event's id, through a receiver's 500s", async () => {
    failNext = 2;
    const ids: (string | undefined)[] = [];
    for (let n = 1; n <= 5; n++) ids.push(await emit(store, notice(env.prod, n)));
    deliverer.start();
    await until("all five delivered", () => got.length >= 5);
    await deliverer.idle();
    assert.equal(answered500, 2);
    assert.deepEqual(
      got.map((g) => g.n),
      [1, 2, 3, 4, 5],
    );
    assert.deepEqual(
      got.map((g) => g.id),
      ids,
    );
    for (const g of got) {
      assert.equal(g.key, g.id);
      assert.ok(g.signed);
    }
    const [v] = await listChannels(store.db, env.wsId);
    assert.equal(v?.state, "ok");
    assert.equal(v?.pending, 0);
  });
});
