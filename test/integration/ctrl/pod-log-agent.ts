// Test helper: an agent of one cluster that speaks the log channel protocol itself (a cluster
// token of its own, a Connect client as the real agent uses) and serves "pods" whose logs the
// test writes. It answers each request as the real agent does: every line of the environment's
// pods written at or after the request's since, then, following, each new line as it is written,
// with an empty push every heartbeat while quiet; a request ctrl cancels ends. `serve` decides
// which lines a request may see (a test can keep lines from the archive, say), and `requests`
// records every request heard, in order.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { LogChannelService, LogMarkerKind, type AgentLogRequest } from "../../../src/gen/krane/ctrl/v1/logs_pb.js";
import { msToNs } from "../../../src/contracts/logs.js";
import type { Kysely } from "kysely";
import type { Database } from "../../../src/ctrl/db/schema.js";
import { bearer } from "./support.js";

/** What an agent's report would have recorded: a running instance `pod` of the deployment in `region`. */
export async function insertRunningInstance(
  db: Kysely<Database>,
  o: { deploymentId: string; region: string; pod: string; address: string },
): Promise<void> {
  await db
    .insertInto("instances")
    .values({
      deployment_id: o.deploymentId,
      region: o.region,
      k8s_name: o.pod,
      address: o.address,
      status: "running",
      cpu_millicores: 0,
      memory_mib: 0,
      node_name: "node-1",
      zone: "",
      ready_since: Date.now(),
      reported_at: Date.now(),
    })
    .execute();
}

export interface PodLine {
  readonly ns: bigint;
  readonly instance: string;
  readonly deploymentId: string;
  readonly text: string;
  /** A DROPPED marker of this many lines instead of a line (the agent's buffer was full). */
  readonly dropped?: number;
}

export interface PodLogAgentOptions {
  readonly url: string;
  readonly token: string;
  readonly region: string;
  /** Whether a request is handed this line (default: every line). */
  readonly serve?: (req: AgentLogRequest, line: PodLine) => boolean;
  readonly heartbeatMs?: number;
}

export class PodLogAgent {
  readonly lines: PodLine[] = [];
  readonly requests: AgentLogRequest[] = [];
  /** Requests ctrl answered `cancelled` (by id). */
  readonly cancelled = new Set<string>();
  readonly #abort = new AbortController();
  readonly #o: PodLogAgentOptions;
  #lastNs = 0n;

  constructor(o: PodLogAgentOptions) {
    this.#o = o;
    void this.#run().catch(() => undefined);
  }

  /** A pod writes a line (its time now, later than every line before). */
  write(instance: string, deploymentId: string, text: string): PodLine {
    let ns = msToNs(Date.now());
    if (ns <= this.#lastNs) ns = this.#lastNs + 1n;
    this.#lastNs = ns;
    const line = { ns, instance, deploymentId, text };
    this.lines.push(line);
    return line;
  }

  /** The agent drops `count` lines of a pod for want of room: a DROPPED marker, as the real agent sends. */
  drop(instance: string, deploymentId: string, count: number): void {
    const line = this.write(instance, deploymentId, "");
    this.lines[this.lines.length - 1] = { ...line, dropped: count };
  }

  /** The requests heard whose id starts with `prefix` ("arc_": the archive's, "log_": readers'). */
  heard(prefix: string): AgentLogRequest[] {
    return this.requests.filter((r) => r.requestId.startsWith(prefix));
  }

  stop(): void {
    this.#abort.abort();
  }

  async #run(): Promise<void> {
    const transport = createConnectTransport({
      baseUrl: this.#o.url,
      httpVersion: "2",
      interceptors: [bearer(this.#o.token)],
    });
    const client = createClient(LogChannelService, transport);
    const signal = this.#abort.signal;
    for await (const m of client.openLogChannel({ region: this.#o.region }, { signal, timeoutMs: 0 })) {
      if (m.message.case !== "request") continue;
      const req = m.message.value;
      this.requests.push(req);
      void this.#answer(client, req).catch(() => undefined);
    }
  }

  async #answer(
    client: ReturnType<typeof createClient<typeof LogChannelService>>,
    req: AgentLogRequest,
  ): Promise<void> {
    const since = msToNs(Number(req.sinceUnixMs));
    const serve = this.#o.serve ?? (() => true);
    let sent = 0;
    let quietSince = Date.now();
    for (;;) {
      if (this.#abort.signal.aborted) return;
      const fresh = this.lines
        .slice(sent)
        .filter(
          (l) =>
            l.ns >= since &&
            (req.deploymentIds.length === 0 || req.deploymentIds.includes(l.deploymentId)) &&
            serve(req, l),
        );
      sent = this.lines.length;
      const done = !req.follow;
      if (fresh.length > 0 || done || Date.now() - quietSince >= (this.#o.heartbeatMs ?? 1_000)) {
        quietSince = Date.now();
        const res = await client.pushLogs({
          region: this.#o.region,
          requestId: req.requestId,
          done,
          entries: fresh.map((l) => ({
            timeUnixNano: l.ns,
            instance: l.instance,
            deploymentId: l.deploymentId,
            entry:
              l.dropped === undefined
                ? { case: "line" as const, value: l.text }
                : { case: "marker" as const, value: { kind: LogMarkerKind.DROPPED, dropped: BigInt(l.dropped) } },
          })),
        });
        if (res.cancelled) {
          this.cancelled.add(req.requestId);
          return;
        }
      }
      if (done) return;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
