import { test } from "node:test";
import assert from "node:assert/strict";
import { create, toJson, type MessageInitShape } from "@bufbuild/protobuf";
import { httpsListener, renderRolloutStatus } from "../../../src/cli/status-view.js";
import { RolloutStatusSchema } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { AddressRegionStatusSchema } from "../../../src/gen/krane/ctrl/v1/exposure_pb.js";

test("an address's HTTPS column says whether its listeners are programmed, and why not", () => {
  const region = (listeners: ({ status: string; reason?: string } | undefined)[]) =>
    toJson(
      AddressRegionStatusSchema,
      create(AddressRegionStatusSchema, {
        region: "eu",
        route: {
          certificates: listeners.map((l, i) => ({ hostname: `h${i}.example`, listener: l })),
        },
      }),
    );
  assert.equal(
    httpsListener(toJson(AddressRegionStatusSchema, create(AddressRegionStatusSchema, { region: "eu" }))),
    "-",
    "no report yet",
  );
  assert.equal(httpsListener(region([undefined])), "-", "the region's agent serves no HTTPS");
  assert.equal(httpsListener(region([{ status: "True" }, { status: "True" }])), "programmed");
  assert.equal(httpsListener(region([{ status: "True" }, { status: "" }])), "pending");
  assert.equal(httpsListener(region([{ status: "False", reason: "InvalidCertificateRef" }])), "InvalidCertificateRef");
  assert.equal(httpsListener(region([{ status: "Unknown" }])), "unknown");
});

test("rollout status says when `krane rollback` pinned the environment and which revision each region keeps warm", () => {
  const status = (over: MessageInitShape<typeof RolloutStatusSchema>) =>
    toJson(RolloutStatusSchema, create(RolloutStatusSchema, over));
  const plain = renderRolloutStatus(status({ regions: [{ region: "eu" }] }));
  assert.doesNotMatch(plain, /pinned|warm/);
  const out = renderRolloutStatus(
    status({
      pinnedDeploymentId: "dep_1",
      pinnedRevision: 1n,
      regions: [
        {
          region: "eu",
          revisions: [{ deploymentId: "dep_1", revision: 2n, warm: true }],
          warm: { deploymentId: "dep_1", deploymentRevision: 1n, replicas: 3, untilUnixMs: 1_767_270_600_000n },
        },
        { region: "us", warm: { deploymentId: "dep_1", deploymentRevision: 1n, replicas: 2 } },
      ],
    }),
  );
  assert.match(out, /^pinned to revision 1 \(dep_1\) by `krane rollback`: .*`krane rollback --unpin`$/m);
  assert.match(out, /^ {2}warm: revision 1 \(dep_1\) keeps 3 pods .*, until 2026-01-01T12:30:00Z$/m);
  assert.match(out, /^ {2}warm: revision 1 \(dep_1\) keeps 2 pods .*, until this rollout ends/m);
  assert.match(out, /│ warm │ 2 +│ dep_1 /, "the revisions table marks the warm one");
});
