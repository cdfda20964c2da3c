// An agent's push in the chunk form (PushLogsRequest.chunks: each instance's lines as pods/log
// gave them, and markers) as entries, one per line: ctrl splits the lines and reads their times,
// so the agent does no work per line. Lines without a time stamp are skipped; over-long lines are
// cut (contracts/logs.ts). What the agent says of region and revision is not taken here either:
// the reader fills them in. An entry is written as the plain object protobuf-es's create() would
// make (every field of a proto3 message, at its default where unset): create() walks the schema
// for each, and ctrl makes one per line (about 6 times the cost, measured).
import { LogStream, type LogChunk, type LogEntry } from "../../gen/krane/ctrl/v1/logs_pb.js";
import type { StreamName } from "./seam.js";
import { forEachStampedLine } from "../../contracts/logs.js";

/** A line's stream as kept ("" unknown). */
export function streamName(s: LogStream): StreamName {
  return s === LogStream.STDOUT ? "stdout" : s === LogStream.STDERR ? "stderr" : "";
}

/** A kept stream name on the wire (anything else: unknown). */
export function logStream(name: string): LogStream {
  return name === "stdout" ? LogStream.STDOUT : name === "stderr" ? LogStream.STDERR : LogStream.UNSPECIFIED;
}

function lineEntry(ns: bigint, instance: string, deploymentId: string, text: string, stream: LogStream): LogEntry {
  return {
    $typeName: "krane.ctrl.v1.LogEntry",
    timeUnixNano: ns,
    region: "",
    instance,
    revision: 0n,
    deploymentId,
    entry: { case: "line", value: text },
    stream,
  };
}

export function entriesOfChunks(chunks: readonly LogChunk[]): LogEntry[] {
  const out: LogEntry[] = [];
  for (const c of chunks) {
    if (c.content.case === "lines")
      forEachStampedLine(c.content.value, 0n, (ns, text) =>
        out.push(lineEntry(ns, c.instance, c.deploymentId, text, c.stream)),
      );
    else if (c.content.case === "marker")
      out.push({
        ...lineEntry(c.markerTimeUnixNano, c.instance, c.deploymentId, "", LogStream.UNSPECIFIED),
        entry: { case: "marker", value: c.content.value },
      });
  }
  return out;
}
