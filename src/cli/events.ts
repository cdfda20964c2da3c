// `krane events <project/env>`: what happened to the environment's instances (OOM kills, exit
// codes, crash loops, image pull errors, failing readiness probes, evictions), oldest first,
// through InstanceEventService. `-f` keeps asking after the last cursor (every --interval) and
// prints new events as they are recorded; an event whose details changed (more restarts, a new
// message) is printed again.
import type { Command } from "commander";
import type { InstanceEvent } from "../gen/krane/ctrl/v1/events_pb.js";
import { parseTime } from "./audit.js";
import { environmentRef, workspaceCommand, type ConnectionFlags } from "./command.js";

interface EventsFlags extends ConnectionFlags {
  since?: string;
  region?: string;
  instance?: string;
  revision?: string;
  follow?: boolean;
  interval: string;
}

function positiveInt(flag: string, v: string): number {
  if (!/^\d{1,9}$/.test(v) || Number(v) === 0) throw new Error(`${flag}: expected a positive whole number, got "${v}"`);
  return Number(v);
}

function sinceOf(v: string): bigint {
  const t = parseTime("--since", v);
  if (t > BigInt(Date.now() + 60_000)) throw new Error(`--since: "${v}" is in the future`);
  return t;
}

export function registerEventsCommand(program: Command): void {
  workspaceCommand(
    program
      .command("events <project/env>")
      .description("instance events of an environment: OOM kills, exit codes, crash loops, image pull errors, …")
      .option("--since <time>", "events that happened from this time (ISO 8601) or age (10m, 24h)")
      .option("--region <region>", "only this region")
      .option("--instance <pod>", "only this instance")
      .option("--revision <n>", "only this revision")
      .option("-f, --follow", "keep printing new events")
      .option("--interval <ms>", "how often -f asks ctrl", "2000"),
    async (x, target: string, f: EventsFlags) => {
      const { InstanceEventService, InstanceEventSchema, ListInstanceEventsResponseSchema } =
        await import("../gen/krane/ctrl/v1/events_pb.js");
      const client = x.ctrl.client(InstanceEventService);
      const interval = positiveInt("--interval", f.interval);
      const req = {
        ...(await environmentRef(x, target)),
        sinceUnixMs: f.since === undefined ? 0n : sinceOf(f.since),
        region: f.region ?? "",
        instance: f.instance ?? "",
        revision: f.revision === undefined ? 0n : BigInt(positiveInt("--revision", f.revision)),
      };
      const line = (e: InstanceEvent) =>
        [
          new Date(Number(e.atUnixMs)).toISOString().replace(/\.\d+Z$/, "Z"),
          `r${e.revision}`,
          e.region,
          e.instance,
          x.view.describeInstanceEvent(x.toJson(InstanceEventSchema, e)),
        ].join("  ");
      let cursor = "";
      if (!f.follow) {
        const all = [];
        for (;;) {
          const res = await client.listInstanceEvents({ ...req, cursor });
          all.push(...res.events);
          cursor = res.cursor;
          if (!res.more) break;
        }
        if (x.json) {
          const { create } = await import("@bufbuild/protobuf");
          x.printJson(
            ListInstanceEventsResponseSchema,
            create(ListInstanceEventsResponseSchema, { events: all, cursor }),
          );
          return;
        }
        process.stdout.write(all.length ? `${all.map(line).join("\n")}\n` : "no events\n");
        return;
      }
      // Following: one line (or one JSON object) per event as it is recorded, until interrupted.
      for (;;) {
        const res = await client.listInstanceEvents({ ...req, cursor });
        for (const e of res.events) {
          process.stdout.write(
            x.json
              ? `${JSON.stringify(x.toJson(InstanceEventSchema, e, { alwaysEmitImplicit: true }))}\n`
              : `${line(e)}\n`,
          );
        }
        cursor = res.cursor;
        if (!res.more) await new Promise((r) => setTimeout(r, interval));
      }
    },
  );
}
