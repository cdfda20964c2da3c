// A sentinel's request-view record as the agent pushes it (src/agent/logs/requests.ts): every field
// carried, an upgraded connection's close with how long it was open, foreign shapes left empty.
import { test } from "node:test";
import assert from "node:assert/strict";
import { requestEntry } from "../../../../src/agent/logs/requests.js";
import type { SentinelRequestRecord } from "../../../../src/contracts/request-view.js";

const record: SentinelRequestRecord = {
  seq: 7,
  timeMs: 1_700_000_000_123,
  method: "GET",
  path: "/chat?room=…",
  status: 101,
  latencyMs: 2.5,
  deploymentId: "dep_a",
  instance: "chat-1",
  policy: "",
  client: "192.0.2.7",
  key: "ci",
};

test("a record becomes a request entry; a close carries how long the connection was open", () => {
  const e = requestEntry({ ...record, openMs: 61_000 });
  assert.equal(e.timeUnixNano, 1_700_000_000_123_000_000n);
  assert.deepEqual([e.instance, e.deploymentId], ["chat-1", "dep_a"]);
  assert.equal(e.entry.case, "request");
  const r = e.entry.case === "request" ? e.entry.value : undefined;
  assert.deepEqual(r && [r.method, r.path, r.status, r.latencyMs, r.client, r.key, r.openMs], [
    "GET",
    "/chat?room=…",
    101,
    2.5,
    "192.0.2.7",
    "ci",
    61_000,
  ]);
  const plain = requestEntry(record);
  assert.equal(plain.entry.case === "request" ? plain.entry.value.openMs : -1, 0, "0 on every other record");
  const odd = requestEntry({ ...record, openMs: -5 });
  assert.equal(odd.entry.case === "request" ? odd.entry.value.openMs : -1, 0, "a foreign value is left empty");
});
