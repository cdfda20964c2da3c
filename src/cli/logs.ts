// `krane logs <project/env>`: the lines of every instance of an environment, in every region,
// merged by time (ctrl's StreamLogs), each with its region/instance and revision, coloured per
// instance on a terminal. With -f it follows: instances join and leave with a marker line; a
// stream that breaks (ctrl or an agent restarted) is resumed from the last line printed, with a
// marker, and lines already printed are not printed again (log-lines.ts). --since and --grep read
// the log history first (ctrl keeps every line for the workspace's retention), then go on live. It gives up after
// RESUME_WINDOW without a stream, with a message and exit code 69. With --events the instances'
// events (InstanceEventService: OOM kills, exit codes, crash loops, pull errors) are interleaved
// with the lines by time, each as a marker line of its instance; following, new events are asked
// for every EVENTS_POLL and printed as they are recorded. A read that printed no line says so on
// stderr, and exits 1 when what it printed instead were errors (an instance that is a stand-in
// of the local cluster, with no container and so no log; a log that could not be read).
import type { Command } from "commander";
import { EXIT_UNAVAILABLE, isResumable } from "./exit-codes.js";
import { environmentRef, intArg, workspaceCommand } from "./command.js";
import { parseTime } from "./audit.js";
import type { PrintedEntry } from "./log-lines.js";
import type { Client } from "@connectrpc/connect";
import type { InstanceEventSchema, InstanceEventService } from "../gen/krane/ctrl/v1/events_pb.js";

type PrintedEvent = PrintedEntry & { readonly marker: NonNullable<PrintedEntry["marker"]> };
/** The events API of --events: its client, and its message schema (to describe an event). */
type EventsApi = { client: Client<typeof InstanceEventService>; schema: typeof InstanceEventSchema };

interface LogFlags {
  follow?: boolean;
  since?: string;
  tail?: number;
  revision?: number;
  region?: string;
  instance?: string;
  previous?: boolean;
  timestamps?: boolean;
  events?: boolean;
  grep?: string;
  stream?: string;
}

/** How long a followed stream is retried after it broke before the command gives up. */
const RESUME_WINDOW_MS = 60_000;
/** How often a followed `--events` asks ctrl for new events. */
const EVENTS_POLL_MS = 2_000;

export function registerLogsCommand(program: Command): void {
  workspaceCommand(
    program
      .command("logs <project/env>")
      .description("lines of every instance in every region, merged by time (-f: follow, as instances come and go)")
      .option("-f, --follow", "keep printing new lines; new instances join, removed ones leave")
      .option(
        "--since <time>",
        "lines from this time (2025-05-01T10:00:00Z) or age (10m, 3d), kept ones included (instances that are gone too)",
      )
      .option(
        "--grep <text|/regex/>",
        "only lines containing the text, or matching /regex/ (flags imsu); kept ones included",
      )
      .option("--tail <n>", "the last n lines of each instance", intArg("--tail"))
      .option("--revision <n>", "only this revision", intArg("--revision"))
      .option("--region <region>", "only this region")
      .option("--instance <name>", "only this instance (as krane status shows it)")
      .option("--previous", "the previous container of each instance (the one that crashed)")
      .option("--timestamps", "print each line's time (the kubelet's)")
      .option(
        "--stream <stdout|stderr>",
        "only lines written to this stream (lines whose stream is not known are left out; not with --tail)",
      )
      .option("--events", "interleave the instances' events (OOM kills, exit codes, crash loops, pull errors)"),
    async (x, target: string, f: LogFlags) => {
      const now = Date.now();
      let since = 0n;
      if (f.since !== undefined) {
        since = parseTime("--since", f.since, now);
        if (since > BigInt(now + 5_000)) throw new Error(`--since: ${f.since} is in the future`);
      }
      if (f.tail !== undefined && f.tail < 0) throw new Error(`--tail: must be 0 or more, got ${f.tail}`);
      if (f.revision !== undefined && f.revision < 1)
        throw new Error(`--revision: must be 1 or more, got ${f.revision}`);
      if (f.previous && f.follow) throw new Error("--previous cannot be combined with --follow");
      if (f.stream !== undefined && f.stream !== "stdout" && f.stream !== "stderr")
        throw new Error(`--stream: must be stdout or stderr, got ${f.stream}`);
      if (f.stream !== undefined && f.tail !== undefined)
        throw new Error("--stream cannot be combined with --tail (a tail is read with both streams merged)");
      // --since and --grep read the log history too (then the live lines), unless the read is one
      // of the kubelet's own (--tail, --previous).
      const history = (f.since !== undefined || f.grep !== undefined) && f.tail === undefined && !f.previous;
      const [
        { LogService, LogMarkerKind, LogStream },
        { ResumeCursor, entryJson, formatEntry },
        { Code, ConnectError },
      ] = await Promise.all([
        import("../gen/krane/ctrl/v1/logs_pb.js"),
        import("./log-lines.js"),
        import("@connectrpc/connect"),
      ]);
      const kinds = {
        [LogMarkerKind.JOINED]: "joined",
        [LogMarkerKind.LEFT]: "left",
        [LogMarkerKind.DROPPED]: "dropped",
        [LogMarkerKind.ERROR]: "error",
        [LogMarkerKind.UNSPECIFIED]: "error",
      } as const;
      const ref = await environmentRef(x, target);
      const color = !x.json && process.stdout.isTTY === true && process.env.NO_COLOR === undefined;
      const opts = { timestamps: f.timestamps === true, color };
      const cursor = new ResumeCursor();
      /** Lines and error markers printed (a read that printed nothing says why). */
      let lines = 0;
      let errors = 0;
      const client = x.ctrl.client(LogService);
      let out = "";
      const flush = async (): Promise<void> => {
        if (out === "") return;
        const chunk = out;
        out = "";
        if (!process.stdout.write(chunk)) await new Promise<void>((r) => process.stdout.once("drain", () => r()));
      };
      const print = (e: Parameters<typeof formatEntry>[0]): void => {
        out += `${x.json ? JSON.stringify(entryJson(e)) : formatEntry(e, opts)}\n`;
      };
      // --events: the events asked for so far, printed before the first line that is later than them.
      const events: PrintedEvent[] = [];
      let eventCursor = "";
      let eventsApi: EventsApi | undefined;
      const fetchEvents = async (): Promise<void> => {
        if (!eventsApi) return;
        const { client, schema } = eventsApi;
        for (;;) {
          const res = await client.listInstanceEvents({
            ...ref,
            sinceUnixMs: since,
            revision: BigInt(f.revision ?? 0),
            region: f.region ?? "",
            instance: f.instance ?? "",
            cursor: eventCursor,
          });
          for (const e of res.events)
            events.push({
              ns: e.atUnixMs * 1_000_000n,
              region: e.region,
              instance: e.instance,
              revision: e.revision,
              marker: { kind: "event", dropped: 0n, message: x.view.describeInstanceEvent(x.toJson(schema, e)) },
            });
          eventCursor = res.cursor;
          if (!res.more) break;
        }
        events.sort((a, b) => (a.ns < b.ns ? -1 : a.ns > b.ns ? 1 : 0));
      };
      const printEventsUpTo = (ns: bigint | undefined): void => {
        let n = 0;
        while (n < events.length && (ns === undefined || (events[n] as PrintedEvent).ns <= ns)) n++;
        for (const e of events.splice(0, n)) print(e);
      };
      let polling: ReturnType<typeof setInterval> | undefined;
      let asking = false;
      if (f.events) {
        const { InstanceEventService, InstanceEventSchema } = await import("../gen/krane/ctrl/v1/events_pb.js");
        eventsApi = { client: x.ctrl.client(InstanceEventService), schema: InstanceEventSchema };
        await fetchEvents();
        if (f.follow)
          // Following, an event is printed once it is recorded: lines are near "now", so are new events.
          polling = setInterval(() => {
            if (asking) return;
            asking = true;
            // A failed ask is asked again at the next tick, from the same cursor.
            void fetchEvents()
              .then(async () => {
                printEventsUpTo(undefined);
                await flush();
              })
              .catch(() => undefined)
              .finally(() => (asking = false));
          }, EVENTS_POLL_MS);
      }
      try {
        await streamLines();
      } finally {
        if (polling) clearInterval(polling);
      }
      printEventsUpTo(undefined);
      await flush();
      // Nothing printed is said, not left to silence: why, or that there was nothing to print.
      if (lines === 0 && errors > 0)
        throw new Error(
          `no line could be read from ${target}: ${errors === 1 ? "the error above says" : `the ${errors} errors above say`} why`,
        );
      if (lines === 0)
        process.stderr.write(
          `krane logs: no lines: no instance of ${target}${f.revision === undefined ? "" : ` (revision ${f.revision})`}${
            f.region === undefined ? "" : ` in ${f.region}`
          } has written a line${f.since === undefined ? "" : ` since ${f.since}`}, or none has started yet\n`,
        );
      return;

      async function streamLines(): Promise<void> {
        let brokeAt: number | undefined;
        let attempt = 0;
        for (;;) {
          const resumeFrom = brokeAt === undefined ? undefined : cursor.sinceMs();
          cursor.restart();
          try {
            const stream = client.streamLogs(
              {
                ...ref,
                follow: f.follow === true,
                sinceUnixMs: resumeFrom === undefined ? since : BigInt(resumeFrom),
                tailLines: resumeFrom === undefined ? f.tail : undefined,
                revision: BigInt(f.revision ?? 0),
                region: f.region ?? "",
                instance: f.instance ?? "",
                previous: f.previous === true,
                history,
                grep: f.grep ?? "",
                stream:
                  f.stream === "stdout"
                    ? LogStream.STDOUT
                    : f.stream === "stderr"
                      ? LogStream.STDERR
                      : LogStream.UNSPECIFIED,
              },
              { timeoutMs: 0 },
            );
            for await (const res of stream) {
              if (brokeAt !== undefined) {
                print({
                  ns: BigInt(Date.now()) * 1_000_000n,
                  region: "krane",
                  instance: "",
                  revision: 0n,
                  marker: {
                    kind: "resumed",
                    dropped: 0n,
                    message: `resumed after ${Math.round((Date.now() - brokeAt) / 1000)} s${
                      resumeFrom === undefined ? "" : ` from ${new Date(resumeFrom).toISOString()}`
                    }; lines already printed are not repeated`,
                  },
                });
                brokeAt = undefined;
                attempt = 0;
              }
              for (const e of res.entries) {
                const p = {
                  ns: e.timeUnixNano,
                  region: e.region,
                  instance: e.instance,
                  revision: e.revision,
                  ...(e.entry.case === "line"
                    ? {
                        line: e.entry.value,
                        stream:
                          e.stream === LogStream.STDOUT
                            ? ("stdout" as const)
                            : e.stream === LogStream.STDERR
                              ? ("stderr" as const)
                              : undefined,
                      }
                    : e.entry.case === "marker"
                      ? {
                          marker: {
                            kind: kinds[e.entry.value.kind],
                            dropped: e.entry.value.dropped,
                            message: e.entry.value.message,
                          },
                        }
                      : {}),
                };
                if (cursor.admit(p)) {
                  printEventsUpTo(p.ns);
                  print(p);
                  if ("line" in p) lines++;
                  else if ("marker" in p && p.marker.kind === "error") errors++;
                }
              }
              await flush();
            }
            if (!f.follow) return;
            // A followed stream ctrl ended cleanly (it is draining): resume like a broken one.
            throw new ConnectError("ctrl ended the stream", Code.Unavailable);
          } catch (err) {
            await flush();
            const ce = ConnectError.from(err);
            if (!f.follow || !isResumable(ce.code)) throw err;
            brokeAt ??= Date.now();
            if (Date.now() - brokeAt > RESUME_WINDOW_MS) {
              process.exitCode = EXIT_UNAVAILABLE;
              throw new Error(
                `the log stream broke and could not be resumed for ${RESUME_WINDOW_MS / 1000} s (${ce.rawMessage}); run krane logs again`,
              );
            }
            if (attempt === 0) process.stderr.write(`krane logs: the stream broke (${ce.rawMessage}); resuming…\n`);
            await new Promise((r) => setTimeout(r, Math.min(5_000, 250 * 2 ** attempt++)));
          }
        }
      }
    },
  );
}
