// A watch stream is the same on every wire: ctrl writes binary watchers' frames itself once the
// stream's first message is out (src/ctrl/cluster-service/frame-sink.ts), so the same snapshot and
// changes are read here through four clients — Connect binary, gRPC, gRPC-Web (all three get
// the direct frames) and Connect JSON (typed messages through Connect) — and compared message by
// message with what the store holds. Bookmarks too: the first message of every stream, and one
// per keepalive interval on a quiet stream, which binary watchers get as direct frames.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { join } from "node:path";
import { create, toBinary, toJson } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import {
  ApplyDeploymentSchema,
  ClusterService,
  DeleteDeploymentSchema,
  DeploymentStateSchema,
  type DeploymentState,
} from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { createRegion } from "../../../src/ctrl/domain/clusters.js";
import { bearer, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const REGION = "eu";
const KEEPALIVE_MS = 300;
const SNAPSHOT = 1_234; // more than one snapshot batch (500)
const CHANGES = 300;

/** The deployment id of snapshot object i. */
const idOf = (i: number): string => `dep_w${String(i).padStart(6, "0")}`;

function applyPayload(i: number, replicas: number): Uint8Array {
  return toBinary(
    ApplyDeploymentSchema,
    create(ApplyDeploymentSchema, {
      deploymentId: idOf(i),
      k8sNamespace: "ws",
      k8sName: `app-${i}`,
      image: `app:${i}`,
      replicas,
      region: REGION,
      env: [{ name: "I", value: String(i) }],
    }),
  );
}

function deletePayload(i: number): Uint8Array {
  return toBinary(
    DeleteDeploymentSchema,
    create(DeleteDeploymentSchema, { deploymentId: idOf(i), k8sNamespace: "ws", k8sName: `app-${i}` }),
  );
}

/** Reads a stream until the message with version `last`, telling `onSnapshotEnd` when its snapshot ended. */
async function readUntil(
  stream: AsyncIterable<DeploymentState>,
  last: bigint,
  onSnapshotEnd: () => void,
): Promise<DeploymentState[]> {
  const all: DeploymentState[] = [];
  for await (const m of stream) {
    all.push(m);
    if (m.state.case === "snapshotEnd") onSnapshotEnd();
    if (m.version === last) break;
  }
  return all;
}

describe("watch streams on every wire", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { streamKeepaliveMs: KEEPALIVE_MS });
    await createRegion(ctrl.store, REGION);
  });
  after(async () => {
    await ctrl.close();
    dir.remove();
  });

  /** One client of each wire, with the region's agent token. */
  async function transports(): Promise<Record<string, Transport>> {
    const token = await ctrl.agentToken(REGION);
    const opts = { baseUrl: ctrl.url, interceptors: [bearer(token)] };
    return {
      "connect binary": createConnectTransport({ ...opts, httpVersion: "2" }),
      grpc: createGrpcTransport(opts),
      "grpc-web": createGrpcWebTransport({ ...opts, httpVersion: "2" }),
      "connect json": createConnectTransport({ ...opts, httpVersion: "2", useBinaryFormat: false }),
    };
  }

  it("Connect binary, gRPC, gRPC-Web and Connect JSON watchers get the same snapshot and changes", async () => {
    // The snapshot: SNAPSHOT objects, in one transaction.
    await ctrl.store.write(async (tx) => {
      for (let i = 0; i < SNAPSHOT; i++) await tx.putDesired(REGION, "deployment", idOf(i), applyPayload(i, 1));
    });
    const wires = await transports();
    // Each change touches another object (37 and SNAPSHOT are coprime), so each is one version:
    // the snapshot's puts are versions 1 … SNAPSHOT, the changes the CHANGES after them.
    const last = BigInt(SNAPSHOT + CHANGES);
    let snapshotsEnded = 0;
    let allEnded: () => void = () => undefined;
    const ended = new Promise<void>((resolve) => (allEnded = resolve));
    const reads = Object.entries(wires).map(async ([name, t]) => {
      const client = createClient(ClusterService, t);
      const stream = client.watchDeployments({ region: REGION, versionLastSeen: 0n });
      return [
        name,
        await readUntil(stream, last, () => ++snapshotsEnded === Object.keys(wires).length && allEnded()),
      ] as const;
    });
    await ended;

    // The changes, each its own transaction: applies with new replicas and deletes of every
    // seventh object.
    const expected: { op: "apply" | "delete"; i: number; replicas: number }[] = [];
    for (let c = 0; c < CHANGES; c++) {
      const i = (c * 37) % SNAPSHOT;
      const id = idOf(i);
      if (c % 7 === 3) {
        assert.ok(await ctrl.store.write((tx) => tx.removeDesired(REGION, "deployment", id, deletePayload(i))));
        expected.push({ op: "delete", i, replicas: 0 });
      } else {
        await ctrl.store.write((tx) => tx.putDesired(REGION, "deployment", id, applyPayload(i, c + 2)));
        expected.push({ op: "apply", i, replicas: c + 2 });
      }
    }
    const results = await Promise.race([
      Promise.all(reads),
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error("the watchers did not get every change within 30 s")), 30_000).unref(),
      ),
    ]);

    const withoutBookmarks = results.map(([name, all]) => {
      // First a bookmark without a position (a snapshot follows) that states the keepalive.
      assert.deepEqual(
        toJson(DeploymentStateSchema, all[0] ?? create(DeploymentStateSchema)),
        { bookmark: { keepaliveIntervalMs: KEEPALIVE_MS } },
        `${name}: first message`,
      );
      // Later ones, when the stream happened to be quiet, are compared in the next test.
      return [name, all.slice(1).filter((m) => m.state.case !== "bookmark")] as const;
    });
    for (const [name, messages] of withoutBookmarks) {
      // Snapshot: start, the objects in id order with their payloads, end with the head it stands for.
      assert.equal(messages[0]?.state.case, "snapshotStart", `${name}: after the bookmark`);
      const objects = messages.slice(1, 1 + SNAPSHOT);
      assert.equal(objects.length, SNAPSHOT, name);
      for (const [i, m] of objects.entries()) {
        assert.equal(m.version, 0n, `${name}: snapshot object ${i} version`);
        assert.equal(m.state.case, "apply", `${name}: snapshot object ${i}`);
        if (m.state.case === "apply") assert.equal(m.state.value.k8sName, `app-${i}`, `${name}: snapshot object ${i}`);
      }
      const end = messages[1 + SNAPSHOT];
      assert.equal(end?.state.case, "snapshotEnd", `${name}: after the objects`);
      assert.equal(
        end?.state.case === "snapshotEnd" ? end.state.value.headVersion : -1n,
        BigInt(SNAPSHOT),
        `${name}: snapshot head`,
      );
      // Changes: every version after the snapshot's head once, in order, as written.
      const changes = messages.slice(2 + SNAPSHOT);
      assert.equal(changes.length, CHANGES, `${name}: changes after the snapshot`);
      for (const [k, m] of changes.entries()) {
        const want = expected[k];
        assert.equal(m.version, BigInt(SNAPSHOT + k + 1), `${name}: change ${k} version`);
        assert.equal(m.state.case, want?.op, `${name}: change ${k} op`);
        if (m.state.case === "apply") {
          assert.equal(m.state.value.k8sName, `app-${want?.i}`, `${name}: change ${k}`);
          assert.equal(m.state.value.replicas, want?.replicas, `${name}: change ${k} replicas`);
        }
        if (m.state.case === "delete") assert.equal(m.state.value.k8sName, `app-${want?.i}`, `${name}: change ${k}`);
      }
    }
    // And the four read the very same messages.
    const [first, ...others] = withoutBookmarks;
    for (const [name, messages] of others) {
      assert.deepEqual(
        messages.map((m) => toJson(DeploymentStateSchema, m)),
        first?.[1].map((m) => toJson(DeploymentStateSchema, m)),
        `${name} and ${first?.[0]}`,
      );
    }
  });

  it("a resumed stream starts with a bookmark at its cursor, and a quiet one gets one per keepalive interval, on every wire", async () => {
    const head = BigInt(SNAPSHOT + CHANGES);
    const seen = new Map<string, DeploymentState[]>();
    const ac = new AbortController();
    const reads = Object.entries(await transports()).map(async ([name, t]) => {
      const all: DeploymentState[] = [];
      seen.set(name, all);
      try {
        for await (const m of createClient(ClusterService, t).watchDeployments(
          { region: REGION, versionLastSeen: head },
          { signal: ac.signal },
        ))
          all.push(m);
      } catch (err) {
        if (!ac.signal.aborted) throw err;
      }
    });
    const bookmarksOf = (name: string): DeploymentState[] =>
      (seen.get(name) ?? []).filter((m) => m.state.case === "bookmark");
    const untilEvery = async (what: string, ok: (name: string) => boolean): Promise<void> => {
      const deadline = Date.now() + 15_000;
      while (![...seen.keys()].every(ok)) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    // Nothing to send but the bookmark: the first one is there at once, then one per interval.
    await untilEvery("three bookmarks", (name) => bookmarksOf(name).length >= 3);
    const change = BigInt(SNAPSHOT + CHANGES + 1);
    await ctrl.store.write((tx) => tx.putDesired(REGION, "deployment", idOf(5), applyPayload(5, 99)));
    await untilEvery("a bookmark after the change", (name) =>
      (seen.get(name) ?? []).some((m, i, all) => m.version === change && all[i - 1]?.version === change),
    );
    ac.abort();
    await Promise.all(reads);
    for (const [name, all] of seen) {
      const states = all.map((m) => [m.state.case, m.version]);
      const shown = states.map(([c, v]) => `${c}@${v}`).join(" ");
      assert.deepEqual(states[0], ["bookmark", head], `${name}: first message`);
      const at = all.findIndex((m) => m.state.case === "apply");
      assert.ok(at >= 3, `${name}: bookmarks before the change`);
      assert.ok(
        all.slice(0, at).every((m) => m.state.case === "bookmark" && m.version === head),
        `${name}: only bookmarks at the cursor before the change`,
      );
      assert.deepEqual(states[at], ["apply", change], `${name}: the change`);
      assert.ok(
        all.slice(at + 1).every((m) => m.state.case === "bookmark" && m.version === change),
        `${name}: after the change, bookmarks at its version: ${shown}`,
      );
      for (const m of all.filter((x) => x.state.case === "bookmark"))
        assert.equal(m.state.case === "bookmark" ? m.state.value.keepaliveIntervalMs : 0, KEEPALIVE_MS);
    }
  });
});
