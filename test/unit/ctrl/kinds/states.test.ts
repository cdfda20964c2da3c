// Unit tests of the watch-stream messages (src/ctrl/kinds/wire.ts): the binary form
// relays the outbox bytes as an unknown field, and must be byte-for-byte the typed message.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { create, fromBinary, toBinary, toJsonString } from "@bufbuild/protobuf";
import {
  ApplyDeploymentSchema,
  ApplySentinelSchema,
  DeleteDeploymentSchema,
  DeleteSentinelSchema,
  DeploymentStateSchema,
  SentinelStateSchema,
} from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import type { OutboxChange } from "../../../../src/ctrl/db/outbox.js";
import { deploymentKind } from "../../../../src/ctrl/kinds/deployment.js";
import { sentinelKind } from "../../../../src/ctrl/kinds/sentinel.js";
import { encodingOf, streamFrame, streamState, type WireEncoding } from "../../../../src/ctrl/kinds/wire.js";
import type { WatchEvent } from "../../../../src/ctrl/stream/watch.js";

const deploymentState = (ev: WatchEvent, encoding: WireEncoding) => streamState(deploymentKind.wire, ev, encoding);
const sentinelState = (ev: WatchEvent, encoding: WireEncoding) => streamState(sentinelKind.wire, ev, encoding);

const text = fc.string({ maxLength: 40 });
const applyDeployment = fc.record({
  deploymentId: text,
  k8sNamespace: text,
  k8sName: text,
  image: text,
  command: fc.array(text, { maxLength: 3 }),
  env: fc.array(fc.record({ name: text, value: text }), { maxLength: 3 }),
  replicas: fc.integer({ min: 0, max: 1000 }),
  cpuMillicores: fc.bigInt({ min: 0n, max: 64_000n }),
  revision: fc.bigInt({ min: 1n, max: 1n << 40n }),
});
const version = fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER });

function change(v: number, op: "apply" | "delete", payload: Uint8Array): OutboxChange {
  return { region: "eu", kind: "deployment", version: v, objectId: "dep_x", op, payload };
}

describe("watch stream states", () => {
  it("binary deployment states are byte-identical to the typed messages and decode to them", () => {
    fc.assert(
      fc.property(applyDeployment, version, fc.boolean(), (init, v, del) => {
        const typed = del
          ? create(DeploymentStateSchema, {
              version: BigInt(v),
              state: {
                case: "delete",
                value: create(DeleteDeploymentSchema, {
                  k8sName: init.k8sName,
                  k8sNamespace: init.k8sNamespace,
                  deploymentId: init.deploymentId,
                }),
              },
            })
          : create(DeploymentStateSchema, {
              version: BigInt(v),
              state: { case: "apply", value: create(ApplyDeploymentSchema, init) },
            });
        const payload = toBinary(del ? DeleteDeploymentSchema : ApplyDeploymentSchema, typed.state.value as never);
        const ev = { type: "change" as const, change: change(v, del ? "delete" : "apply", payload) };
        const relayed = toBinary(DeploymentStateSchema, deploymentState(ev, "binary"));
        assert.deepEqual(relayed, toBinary(DeploymentStateSchema, typed));
        assert.deepEqual(fromBinary(DeploymentStateSchema, relayed), typed);
        // JSON watchers get the typed message, which JSON can express.
        assert.equal(
          toJsonString(DeploymentStateSchema, deploymentState(ev, "json")),
          toJsonString(DeploymentStateSchema, typed),
        );
      }),
      { numRuns: 200 },
    );
  });

  it("sentinel states and snapshot objects relay the same way; markers are typed", () => {
    const apply = create(ApplySentinelSchema, {
      sentinelId: "snt_1",
      k8sName: "s-1",
      image: "proxy:1",
      replicas: 2,
      region: "eu",
    });
    const payload = toBinary(ApplySentinelSchema, apply);
    const fromSnapshot = sentinelState({ type: "snapshot_object", objectId: "snt_1", payload }, "binary");
    assert.deepEqual(
      fromBinary(SentinelStateSchema, toBinary(SentinelStateSchema, fromSnapshot)),
      create(SentinelStateSchema, { version: 0n, state: { case: "apply", value: apply } }),
    );
    const del = create(DeleteSentinelSchema, { k8sName: "s-1", sentinelId: "snt_1" });
    const deleted = sentinelState(
      { type: "change", change: { ...change(7, "delete", toBinary(DeleteSentinelSchema, del)), kind: "sentinel" } },
      "binary",
    );
    assert.deepEqual(
      fromBinary(SentinelStateSchema, toBinary(SentinelStateSchema, deleted)),
      create(SentinelStateSchema, { version: 7n, state: { case: "delete", value: del } }),
    );
    const end = deploymentState({ type: "snapshot_end", head: 42 }, "binary");
    assert.equal(end.state.case, "snapshotEnd");
    assert.equal(end.state.case === "snapshotEnd" ? end.state.value.headVersion : -1n, 42n);
  });

  it("a bookmark carries the stream's position and the keepalive interval, in every form a watcher gets", () => {
    const ev: WatchEvent = { type: "bookmark", version: 12, keepaliveMs: 1500 };
    const expected = create(DeploymentStateSchema, {
      version: 12n,
      state: { case: "bookmark", value: { keepaliveIntervalMs: 1500 } },
    });
    for (const encoding of ["binary", "json"] as const)
      assert.deepEqual(
        fromBinary(DeploymentStateSchema, toBinary(DeploymentStateSchema, deploymentState(ev, encoding))),
        expected,
      );
    // The frame a binary watcher gets (../cluster-service/frame-sink.ts): an uncompressed
    // envelope around the same bytes.
    const frame = streamFrame(deploymentKind.wire, ev);
    assert.equal(frame[0], 0);
    assert.equal(Buffer.from(frame).readUInt32BE(1), frame.length - 5);
    assert.deepEqual(fromBinary(DeploymentStateSchema, frame.subarray(5)), expected);
  });

  it("builds a change once per encoding and shares it between watchers", () => {
    const c = change(3, "apply", toBinary(ApplyDeploymentSchema, create(ApplyDeploymentSchema, { k8sName: "a" })));
    const a = deploymentState({ type: "change", change: c }, "binary");
    assert.equal(deploymentState({ type: "change", change: c }, "binary"), a);
    const j = deploymentState({ type: "change", change: c }, "json");
    assert.notEqual(j, a);
    assert.equal(j.state.case, "apply");
  });

  it("picks JSON only for JSON content types", () => {
    for (const ct of [
      "application/grpc",
      "application/grpc+proto",
      "application/connect+proto",
      "application/grpc-web-text",
      null,
    ])
      assert.equal(encodingOf(ct), "binary", String(ct));
    for (const ct of [
      "application/connect+json",
      "application/grpc+json",
      "application/grpc-web+json",
      "application/json",
    ])
      assert.equal(encodingOf(ct), "json", ct);
  });
});
