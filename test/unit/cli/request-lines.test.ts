// How `krane requests` prints a request (src/cli/request-lines.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import { formatRequest, requestJson, type PrintedRequest } from "../../../src/cli/request-lines.js";

const base: PrintedRequest = {
  timeMs: Date.UTC(2026, 10, 30, 1, 2, 3, 456),
  region: "eu",
  instance: "shop-abc",
  revision: 3n,
  method: "GET",
  path: "/books?page=…",
  status: 200,
  latencyMs: 12.4,
  policy: "",
  client: "192.0.2.7",
  key: "",
};

test("a served request names its revision and instance; a refused one its policy; a key when there is one", () => {
  assert.equal(
    formatRequest(base),
    "01:02:03.456 eu GET    200    12ms /books?page=…  (r3 shop-abc; client 192.0.2.7)",
  );
  assert.equal(
    formatRequest({
      ...base,
      method: "DELETE",
      status: 405,
      latencyMs: 0.31,
      policy: "read-only",
      instance: "",
      revision: 0n,
      key: "ci",
    }),
    "01:02:03.456 eu DELETE 405   0.3ms /books?page=…  (refused by read-only; client 192.0.2.7 key ci)",
  );
  assert.match(formatRequest({ ...base, status: 0 }), / --- /, "cut short: no status");
});

test("an upgraded connection's close says how long it was open, in the line and in -o json", () => {
  const closed = { ...base, path: "/chat", status: 101, latencyMs: 3.2, openMs: 12_345 };
  assert.equal(
    formatRequest(closed),
    "01:02:03.456 eu GET    101   3.2ms /chat  (r3 shop-abc, closed after 12 s; client 192.0.2.7)",
  );
  assert.match(formatRequest({ ...closed, openMs: 1_250 }), /closed after 1\.3 s;/);
  assert.equal(requestJson(closed).openMs, 12_345);
  assert.ok(!("openMs" in requestJson(base)), "absent on every other record");
});

test("-o json: one object per request, the revision as a number", () => {
  assert.deepEqual(requestJson(base), {
    time: "2026-11-30T01:02:03.456Z",
    region: "eu",
    method: "GET",
    path: "/books?page=…",
    status: 200,
    latencyMs: 12.4,
    revision: 3,
    instance: "shop-abc",
    policy: "",
    client: "192.0.2.7",
    key: "",
  });
});

test("a followed stream is opened again after exactly the transient codes", async () => {
  const { Code } = await import("@connectrpc/connect");
  const { isResumable } = await import("../../../src/cli/exit-codes.js");
  const resumable = Object.entries(Code)
    .filter(([, v]) => typeof v === "number" && isResumable(v))
    .map(([name]) => name);
  assert.deepEqual(resumable.sort(), [
    "Aborted",
    "DeadlineExceeded",
    "Internal",
    "ResourceExhausted",
    "Unavailable",
    "Unknown",
  ]);
});
