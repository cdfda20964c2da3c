// Streams on ctrl's side: a chunk's stream reaches each of its lines (markers have none), and
// StreamLogs' `stream` is checked: stdout or stderr, not with tail_lines (a tail is read merged).
import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { LogChunkSchema, LogMarkerKind, LogStream } from "../../../../src/gen/krane/ctrl/v1/logs_pb.js";
import { entriesOfChunks, logStream, streamName } from "../../../../src/ctrl/logs/chunks.js";
import { validateLogQuery } from "../../../../src/ctrl/validate/logs.js";
import { DomainError } from "../../../../src/ctrl/errors.js";

test("a chunk's stream goes with each of its lines", () => {
  const entries = entriesOfChunks([
    create(LogChunkSchema, {
      instance: "web-1",
      content: { case: "lines", value: Buffer.from("2025-01-02T03:04:05.1Z a\n2025-01-02T03:04:05.2Z b\n") },
      stream: LogStream.STDERR,
    }),
    create(LogChunkSchema, {
      instance: "web-1",
      content: { case: "marker", value: { kind: LogMarkerKind.LEFT } },
    }),
  ]);
  assert.deepEqual(
    entries.map((e) => [e.entry.case, e.stream]),
    [
      ["line", LogStream.STDERR],
      ["line", LogStream.STDERR],
      ["marker", LogStream.UNSPECIFIED],
    ],
  );
  assert.equal(streamName(logStream("stderr")), "stderr");
  assert.equal(logStream(""), LogStream.UNSPECIFIED);
});

test("stream: stdout or stderr, and not with tail_lines", () => {
  const req = {
    workspace: "acme",
    project: "shop",
    environment: "production",
    follow: false,
    sinceUnixMs: 0n,
    revision: 0n,
    region: "",
    instance: "",
    previous: false,
  };
  assert.equal(validateLogQuery({ ...req, stream: LogStream.STDERR }, 0).stream, "stderr");
  assert.equal(validateLogQuery({ ...req, stream: LogStream.UNSPECIFIED }, 0).stream, undefined);
  const refused = (r: Parameters<typeof validateLogQuery>[0]): string => {
    try {
      validateLogQuery(r, 0);
    } catch (err) {
      assert.ok(err instanceof DomainError && err.code === "invalid_argument" && err.field === "stream", String(err));
      return err.message;
    }
    return "accepted";
  };
  assert.match(refused({ ...req, stream: 7 }), /stream/);
  assert.match(refused({ ...req, stream: LogStream.STDOUT, tailLines: 10 }), /stream.*tail_lines/);
});
