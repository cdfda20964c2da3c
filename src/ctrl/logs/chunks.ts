// An agent's push in the chunk form (PushLogsRequest.chunks: each instance's lines as pods/log
// gave them, and markers) as entries, one per line: ctrl splits the lines and reads their times,
// so the agent does no work per line. Lines without a time stamp are skipped; over-long lines are
// cut (contracts/logs.ts). What the agent says of region and revision is not taken here either:
// the reader fills them in.
import { create } from "@bufbuild/protobuf";
import { LogEntrySchema, type LogChunk, type LogEntry } from "../../gen/krane/ctrl/v1/logs_pb.js";
import { forEachStampedLine } from "../../contracts/logs.js";

export function entriesOfChunks(chunks: readonly LogChunk[]): LogEntry[] {
  const out: LogEntry[] = [];
  for (const c of chunks) {
    if (c.content.case === "lines")
      forEachStampedLine(c.content.value, 0n, (ns, text) =>
        out.push(
          create(LogEntrySchema, {
            timeUnixNano: ns,
            instance: c.instance,
            deploymentId: c.deploymentId,
            entry: { case: "line", value: text },
          }),
        ),
      );
    else if (c.content.case === "marker")
      out.push(
        create(LogEntrySchema, {
          timeUnixNano: c.markerTimeUnixNano,
          instance: c.instance,
          deploymentId: c.deploymentId,
          entry: { case: "marker", value: c.content.value },
        }),
      );
  }
  return out;
}
