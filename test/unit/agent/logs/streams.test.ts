// Whether the agent reads a container's streams apart: a refusal of pods/log's `stream` (the API
// server's 422 without the feature gate, a kubelet's 400 through it) is recognised, remembered
// per node or for the whole API server, and asked again once REFUSAL_MS passed.
import assert from "node:assert/strict";
import { test } from "node:test";
import { KubeApiError } from "../../../../src/kube/client.js";
import { REFUSAL_MS, refusedByApiServer, refusesStreams, StreamSupport } from "../../../../src/agent/logs/streams.js";

test("a refusal of the stream parameter is told from other failures", () => {
  const api = new KubeApiError(
    422,
    "Invalid",
    'PodLogOptions "web-1" is invalid: stream: Forbidden: may not be specified',
  );
  const kubelet = new KubeApiError(
    400,
    "BadRequest",
    'unable to return the given log stream: "Stdout". Please enable PodLogsQuerySplitStreams feature gate in kubelet',
  );
  assert.equal(refusesStreams(api), true);
  assert.equal(refusedByApiServer(api), true);
  assert.equal(refusesStreams(kubelet), true);
  assert.equal(refusedByApiServer(kubelet), false);
  assert.equal(refusesStreams(new KubeApiError(404, "NotFound", 'pods "web-1" not found')), false);
  assert.equal(refusesStreams(new KubeApiError(400, "BadRequest", 'container "app" in pod "web-1" is waiting')), false);
  assert.equal(refusesStreams(new Error("stream reset")), false);
});

test("a refusal is remembered per node, or everywhere when the API server refused, and asked again later", () => {
  let now = 1_000;
  const s = new StreamSupport(() => now);
  assert.equal(s.split("node-1"), true);
  s.refused("node-1", false);
  assert.equal(s.split("node-1"), false);
  assert.equal(s.split("node-2"), true, "another kubelet may have the gate");
  s.refused("node-2", true);
  assert.equal(s.split("node-3"), false, "the API server refuses for every node");
  now += REFUSAL_MS + 1;
  assert.equal(s.split("node-1"), true);
  assert.equal(s.split("node-3"), true);
});
