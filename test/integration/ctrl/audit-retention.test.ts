// Retention of the audit log on ctrl's upkeep: events older than the retention go on their own,
// oldest first, and the chain still verifies from the anchor the last pruned event left; while a
// webhook sink has not delivered an event (its receiver down), that event and every later one are
// kept, however old.
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { join } from "node:path";
import { describe, it } from "node:test";
import { headOf, recordOf } from "../../../src/cli/audit-records.js";
import { ChainVerifier } from "../../../src/contracts/audit.js";
import { ProjectService, WorkspaceService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { AuditService } from "../../../src/gen/krane/ctrl/v1/audit_pb.js";
import { kraneAsync } from "./process.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const RETENTION_MS = 5_000;

async function seqs(ctrl: TestCtrl, workspace: string): Promise<number[]> {
  const w = await ctrl.store.db
    .selectFrom("workspaces")
    .select("id")
    .where("slug", "=", workspace)
    .executeTakeFirstOrThrow();
  const rows = await ctrl.store.db
    .selectFrom("audit_events")
    .select("seq")
    .where("workspace_id", "=", w.id)
    .orderBy("seq")
    .execute();
  return rows.map((r) => Number(r.seq));
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A port nothing listens on (taken, then given back). */
function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const a = s.address();
      s.close(() => resolve(typeof a === "object" && a ? a.port : 0));
    });
  });
}

describe("audit retention", () => {
  it("prunes old events on the upkeep; the rest of the chain still verifies", async () => {
    const dir = tempDir("krane-audit-retention-");
    const ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      audit: { retentionMs: RETENTION_MS, pruneIntervalMs: 200 },
    });
    try {
      const t = ctrl.adminToken;
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "acme" });
      for (const slug of ["a", "b", "c"])
        await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug });
      assert.deepEqual(await seqs(ctrl, "acme"), [1, 2, 3, 4]);
      await new Promise((r) => setTimeout(r, RETENTION_MS + 200));
      for (const slug of ["d", "e"]) await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug });
      let left: number[] = [];
      // A prune run may fall between #1's and #4's ageing (they were written a moment apart), so
      // wait until none of them is left rather than for the first to go.
      await waitFor("events #1–#4 pruned", async () => (left = await seqs(ctrl, "acme")).every((s) => s > 4), 15_000);
      assert.deepEqual(left, [5, 6], "the old ones went, and only those");
      assert.ok((await ctrl.metrics.auditPruned.get()).values.some((v) => v.value >= 4));

      // The chain verifies from the anchor; new events append after it.
      for (const slug of ["f", "g"]) await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug });
      // Checked right away through the API (a CLI process's start could outlast the retention).
      let v: ChainVerifier | undefined;
      for await (const batch of ctrl.client(AuditService, t).exportAuditEvents({ filter: { workspace: "acme" } })) {
        if (batch.head) v = new ChainVerifier(headOf(batch.head));
        for (const e of batch.events) v?.add(recordOf(e));
      }
      assert.ok(v);
      assert.deepEqual(v.finish(), []);
      assert.equal(v.head.seq, 8);
      assert.equal(v.head.prunedThroughSeq, 4, "the anchor is the last pruned event");
      assert.ok(v.checked >= 2, `the events after the anchor were checked (${v.checked})`);

      // And `krane audit verify` agrees (whatever has been pruned meanwhile).
      const r = await kraneAsync(["audit", "verify", "--workspace", "acme", "--retry-for", "0"], {
        KRANE_CTRL_URL: ctrl.url,
        KRANE_TOKEN: t,
      });
      assert.equal(r.status, 0, r.stdout + r.stderr);
      assert.match(r.stdout, /^ok: \d+ events, every hash and link holds, head #8$/m);
    } finally {
      await ctrl.close();
      dir.remove();
    }
  });

  it("keeps what the webhook sink has yet to deliver, however old", async () => {
    const dir = tempDir("krane-audit-retention-");
    const ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      audit: {
        retentionMs: 500,
        pruneIntervalMs: 200,
        webhook: { url: `http://127.0.0.1:${await closedPort()}/audit`, secret: "k".repeat(32), sweepIntervalMs: 200 },
      },
    });
    try {
      const t = ctrl.adminToken;
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "acme" });
      await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug: "a" });
      // Several prune runs pass with every event past its retention.
      await new Promise((r) => setTimeout(r, 2_500));
      assert.deepEqual(await seqs(ctrl, "acme"), [1, 2], "nothing undelivered was pruned");
      const failed = (await ctrl.metrics.auditDeliveries.get()).values.find((v) => v.labels.result === "failed");
      assert.ok((failed?.value ?? 0) > 0, "the sink tried and failed meanwhile");
    } finally {
      await ctrl.close();
      dir.remove();
    }
  });
});
