// A kind's protocol with ctrl is derived from its messages (clusterProtocol): the methods are
// found by the messages they carry and the requests and reports are filled by field. Checked on
// two kinds whose reports differ (a deployment's rejection names its ReplicaSet, a release's
// does not), with a client that records what it was asked.
import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import {
  ApplyDeploymentSchema,
  DeleteDeploymentSchema,
  DeploymentStateSchema,
  ReleaseStateSchema,
  ReportDeploymentStatusRequestSchema,
  ReportReleaseStatusRequestSchema,
  type ReportDeploymentStatusRequest,
  type ReportReleaseStatusRequest,
} from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { clusterProtocol } from "../../../../src/agent/runtime/kstate.js";

function recordingClient(): { client: object; calls: Array<[string, unknown]> } {
  const calls: Array<[string, unknown]> = [];
  const client = {
    watchDeployments: (req: unknown) => {
      calls.push(["watchDeployments", req]);
      return (async function* () {})();
    },
    getDesiredDeploymentStates: async (req: unknown) => {
      calls.push(["getDesiredDeploymentStates", req]);
      return {
        states: [
          create(DeploymentStateSchema, {
            version: 3n,
            state: { case: "apply", value: create(ApplyDeploymentSchema, { deploymentId: "d1", k8sName: "rs-1" }) },
          }),
          create(DeploymentStateSchema, {
            version: 4n,
            state: { case: "delete", value: create(DeleteDeploymentSchema, { deploymentId: "d2", k8sName: "rs-2" }) },
          }),
        ],
        notFound: ["d3"],
      };
    },
    reportDeploymentStatus: async (req: unknown) => void calls.push(["reportDeploymentStatus", req]),
  };
  return { client, calls };
}

test("a deployment's protocol: watch and point-read requests, keys, reports naming the ReplicaSet", async () => {
  const { client, calls } = recordingClient();
  const p = clusterProtocol(
    { ctrl: client, region: "eu" },
    { state: DeploymentStateSchema, report: ReportDeploymentStatusRequestSchema, key: "deploymentId" },
  );
  for await (const _ of p.watch(7n, { signal: new AbortController().signal, timeoutMs: 0 }))
    assert.fail("no message was sent");
  assert.deepEqual(calls[0], ["watchDeployments", { region: "eu", versionLastSeen: 7n }]);

  const signal = new AbortController().signal;
  const batch = await p.getDesired(["d1", "d2", "d3"], { signal, timeoutMs: 1000 });
  assert.deepEqual(calls[1], ["getDesiredDeploymentStates", { region: "eu", deploymentIds: ["d1", "d2", "d3"] }]);
  assert.deepEqual(
    batch.states.map((s) => [s.key, s.type]),
    [
      ["d1", "apply"],
      ["d2", "delete"],
    ],
  );
  assert.deepEqual(batch.notFound, ["d3"]);

  const desired = create(ApplyDeploymentSchema, { deploymentId: "d1", k8sName: "rs-1" });
  const rejected: ReportDeploymentStatusRequest = p.rejectedReport("d1", { desired }, "bad image");
  assert.equal(rejected.region, "eu");
  assert.equal(rejected.change.case, "rejected");
  assert.deepEqual(
    rejected.change.case === "rejected" && [
      rejected.change.value.deploymentId,
      rejected.change.value.k8sName,
      rejected.change.value.reason,
    ],
    ["d1", "rs-1", "bad image"],
  );
  const ref = create(DeleteDeploymentSchema, { deploymentId: "d2", k8sName: "rs-2" });
  const refused = p.rejectedReport("d2", { ref }, "forbidden");
  assert.equal(refused.change.case === "rejected" && refused.change.value.k8sName, "rs-2");
  const deleted = p.deletedReport("d2", ref);
  assert.deepEqual(
    deleted.change.case === "delete" && [deleted.change.value.deploymentId, deleted.change.value.k8sName],
    ["d2", "rs-2"],
  );
  await p.sendReport(deleted, { signal, timeoutMs: 1000 });
  assert.equal(calls[2]?.[1], deleted);

  assert.equal(p.equal(desired, create(ApplyDeploymentSchema, { deploymentId: "d1", k8sName: "rs-1" })), true);
  assert.equal(p.equal(desired, create(ApplyDeploymentSchema, { deploymentId: "d1", k8sName: "rs-9" })), false);
});

const noop = async (): Promise<void> => undefined;

test("a release's reports carry only what its messages have: the key and the reason", () => {
  const p = clusterProtocol(
    {
      ctrl: { watchReleases: noop, getDesiredReleaseStates: noop, reportReleaseStatus: noop },
      region: "eu",
    },
    { state: ReleaseStateSchema, report: ReportReleaseStatusRequestSchema, key: "releaseId" },
  );
  const r: ReportReleaseStatusRequest = p.rejectedReport(
    "r1",
    { ref: { $typeName: "krane.ctrl.v1.DeleteRelease", releaseId: "r1", k8sNamespace: "ns", kindsEver: [] } },
    "no",
  );
  assert.deepEqual(r.change.case === "rejected" && [r.change.value.releaseId, r.change.value.reason], ["r1", "no"]);
});

test("a client without the kind's methods is refused when the kind is declared, not at its first call", () => {
  assert.throws(
    () =>
      clusterProtocol(
        { ctrl: { watchReleases: noop }, region: "eu" },
        { state: ReleaseStateSchema, report: ReportReleaseStatusRequestSchema, key: "releaseId" },
      ),
    /has no method getDesiredReleaseStates/,
  );
});
