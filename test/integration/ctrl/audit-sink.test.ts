// The audit log's webhook sink against a real receiver over HTTP: every event is delivered, in
// order per chain, signed (the receiver checks X-Krane-Signature with the shared key), and at least
// once — through 30 seconds of the receiver being down (connections refused) while changes keep
// being made, and through a receiver answering 500 for a while. Duplicates are allowed (at least
// once); a missing event is not.
import assert from "node:assert/strict";
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ProjectService, WorkspaceService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const KEY = "audit-sink-key-0123456789abcdef";

interface Receiver {
  port: number;
  /** Event ids in arrival order, per chain. */
  seen: Map<string, number[]>;
  ids: Set<string>;
  deliveries: number;
  badSignatures: number;
  /** Answer 500 to this many deliveries. */
  failNext: number;
  stop(): Promise<void>;
  start(): Promise<void>;
}

async function receiver(port = 0): Promise<Receiver> {
  const r: Receiver = {
    port,
    seen: new Map(),
    ids: new Set(),
    deliveries: 0,
    badSignatures: 0,
    failNext: 0,
    stop: async () => undefined,
    start: async () => undefined,
  };
  let server: Server | undefined;
  r.start = async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8");
        const ts = String(req.headers["x-krane-timestamp"] ?? "");
        const want = Buffer.from(`sha256=${createHmac("sha256", KEY).update(`${ts}.${body}`).digest("hex")}`);
        const got = Buffer.from(String(req.headers["x-krane-signature"] ?? ""));
        if (got.length !== want.length || !timingSafeEqual(got, want)) {
          r.badSignatures++;
          res.writeHead(401).end();
          return;
        }
        if (r.failNext > 0) {
          r.failNext--;
          res.writeHead(500).end();
          return;
        }
        r.deliveries++;
        for (const line of body.split("\n").filter((l) => l !== "")) {
          const e = JSON.parse(line) as { id: string; workspace_id: string; seq: number };
          r.ids.add(e.id);
          const list = r.seen.get(e.workspace_id) ?? [];
          list.push(e.seq);
          r.seen.set(e.workspace_id, list);
        }
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((ok) => server?.listen(r.port, "127.0.0.1", ok));
    r.port = (server.address() as AddressInfo).port;
  };
  r.stop = () =>
    new Promise<void>((ok) => {
      server?.closeAllConnections();
      server?.close(() => ok());
    });
  await r.start();
  return r;
}

describe("audit webhook sink", () => {
  const dir = tempDir("krane-audit-sink-");
  let ctrl: TestCtrl;
  let rx: Receiver;

  before(async () => {
    rx = await receiver();
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      audit: {
        webhook: {
          url: `http://127.0.0.1:${rx.port}/audit`,
          secret: KEY,
          batch: 50,
          sweepIntervalMs: 200,
          timeoutMs: 2000,
        },
      },
    });
  });
  after(async () => {
    await ctrl?.close();
    await rx?.stop();
    dir.remove();
  });

  async function everyEventDelivered(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const all = await ctrl.store.db.selectFrom("audit_events").select("id").execute();
      if (all.every((e) => rx.ids.has(e.id))) return;
      if (Date.now() > deadline)
        assert.fail(`${all.filter((e) => !rx.ids.has(e.id)).length} of ${all.length} events not delivered`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  function inOrder(): void {
    for (const [chain, seqs] of rx.seen) {
      // At least once: a batch may come again, but a chain never goes back past what came before it.
      let high = 0;
      for (const s of seqs) {
        assert.ok(s <= high + 1, `chain "${chain}": #${s} arrived before #${high + 1}`);
        high = Math.max(high, s);
      }
    }
  }

  it(
    "delivers every event, signed and in order, through 30 s of the receiver being down",
    { timeout: 180_000 },
    async () => {
      const t = ctrl.adminToken;
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "acme" });
      for (let i = 0; i < 20; i++)
        await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug: `p${i}` });
      await everyEventDelivered(20_000);
      const before = rx.deliveries;

      await rx.stop();
      const downUntil = Date.now() + 30_000;
      let i = 0;
      while (Date.now() < downUntil) {
        await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug: `down${i++}` });
        await new Promise((r) => setTimeout(r, 250));
      }
      assert.ok(i > 50, `changes kept being made while the receiver was down (${i})`);
      const failed = Number(
        (await ctrl.metrics.auditDeliveries.get()).values.find((v) => v.labels.result === "failed")?.value ?? 0,
      );
      assert.ok(failed > 0, "deliveries were attempted and failed while it was down");
      await rx.start();
      // Backoff is capped at 10 s: everything arrives soon after the receiver is back.
      await everyEventDelivered(30_000);
      assert.ok(rx.deliveries > before);

      // A receiver that fails some deliveries (500) gets them again.
      rx.failNext = 3;
      for (let j = 0; j < 10; j++)
        await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug: `late${j}` });
      await everyEventDelivered(30_000);
      assert.equal(rx.failNext, 0);
      assert.equal(rx.badSignatures, 0, "every delivery carried a valid signature");
      inOrder();
    },
  );
});
