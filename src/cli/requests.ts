// `krane requests -f <project/env>`: the live request view — requests through the environment's
// sentinels as they finish (ctrl's StreamRequests: sampled, at most 50 a second per region, no
// header or query value), one line each (request-lines.ts). It always follows, until interrupted;
// a stream that breaks (ctrl or an agent restarted) is opened again, for up to RESUME_WINDOW_MS.
import type { Command } from "commander";
import { EXIT_UNAVAILABLE, isResumable } from "./exit-codes.js";
import { environmentRef, workspaceCommand } from "./command.js";
import { formatRequest, requestJson } from "./request-lines.js";

const RESUME_WINDOW_MS = 60_000;

export function registerRequestsCommand(program: Command): void {
  workspaceCommand(
    program
      .command("requests <project/env>")
      .description("the live request view: requests through the environment's sentinels as they pass (sampled)")
      .option("-f, --follow", "keep printing (the view always follows; -f says so)")
      .option("--region <region>", "only this region"),
    async (x, target: string, f: { follow?: boolean; region?: string }) => {
      const [{ LogService, LogMarkerKind }, { Code, ConnectError }] = await Promise.all([
        import("../gen/krane/ctrl/v1/logs_pb.js"),
        import("@connectrpc/connect"),
      ]);
      const ref = await environmentRef(x, target);
      const client = x.ctrl.client(LogService);
      let brokeAt: number | undefined;
      let attempt = 0;
      for (;;) {
        try {
          const stream = client.streamRequests({ ...ref, region: f.region ?? "" }, { timeoutMs: 0 });
          for await (const res of stream) {
            brokeAt = undefined;
            attempt = 0;
            let out = "";
            for (const e of res.entries) {
              const timeMs = Number(e.timeUnixNano / 1_000_000n);
              if (e.entry.case === "request") {
                const r = e.entry.value;
                const p = {
                  timeMs,
                  region: e.region,
                  instance: e.instance,
                  revision: e.revision,
                  method: r.method,
                  path: r.path,
                  status: r.status,
                  latencyMs: r.latencyMs,
                  policy: r.policy,
                  client: r.client,
                  key: r.key,
                  openMs: r.openMs,
                };
                out += `${x.json ? JSON.stringify(requestJson(p)) : formatRequest(p)}\n`;
              } else if (e.entry.case === "marker") {
                const m = e.entry.value;
                const what = m.kind === LogMarkerKind.DROPPED ? `${m.dropped} ${m.message}` : m.message || "marker";
                if (x.json)
                  out += `${JSON.stringify({ time: new Date(timeMs).toISOString(), region: e.region, marker: what })}\n`;
                else out += `--- ${e.region}: ${what} ---\n`;
              }
            }
            if (out !== "" && !process.stdout.write(out))
              await new Promise<void>((r) => process.stdout.once("drain", () => r()));
          }
          throw new ConnectError("ctrl ended the stream", Code.Unavailable);
        } catch (err) {
          const ce = ConnectError.from(err);
          if (!isResumable(ce.code)) throw err;
          brokeAt ??= Date.now();
          if (Date.now() - brokeAt > RESUME_WINDOW_MS) {
            process.exitCode = EXIT_UNAVAILABLE;
            throw new Error(
              `the request view broke and could not be opened again for ${RESUME_WINDOW_MS / 1000} s (${ce.rawMessage}); run krane requests again`,
            );
          }
          if (attempt === 0)
            process.stderr.write(`krane requests: the stream broke (${ce.rawMessage}); opening it again…\n`);
          await new Promise((r) => setTimeout(r, Math.min(5_000, 250 * 2 ** attempt++)));
        }
      }
    },
  );
}
