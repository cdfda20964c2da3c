// The probe kind's ctrl side, for the test: ProbeService over real HTTP/2 (h2c), holding the
// desired probes with a version per change, streaming them as ctrl streams a kind (a bookmark,
// a snapshot at cursor 0, then the changes after the cursor, bookmarks while quiet), answering
// point reads and recording the agent's reports.
import { setMaxListeners } from "node:events";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import { createClient, type Client } from "@connectrpc/connect";
import { connectNodeAdapter, createConnectTransport } from "@connectrpc/connect-node";
import {
  ApplyProbeSchema,
  DeleteProbeSchema,
  ProbeService,
  ProbeStateSchema,
  type ApplyProbe,
  type ProbeState,
  type ReportProbeStatusRequest,
} from "../../../gen/krane/probe/v1/probe_pb.js";

const KEEPALIVE_MS = 1_000;

export class ProbeCtrl {
  /** probe id → the latest desired state and its version. */
  readonly #desired = new Map<string, { version: bigint; apply: ApplyProbe | undefined; namespace: string }>();
  #head = 0n;
  #wake: Array<() => void> = [];
  readonly reports: ReportProbeStatusRequest[] = [];
  #server: http2.Http2Server | undefined;
  readonly #sessions = new Set<http2.ServerHttp2Session>();
  readonly #shutdown = new AbortController();

  apply(probeId: string, k8sNamespace: string, value: string): void {
    this.#desired.set(probeId, {
      version: ++this.#head,
      apply: create(ApplyProbeSchema, { probeId, k8sNamespace, value }),
      namespace: k8sNamespace,
    });
    this.#notify();
  }

  delete(probeId: string): void {
    const d = this.#desired.get(probeId);
    if (!d) return;
    this.#desired.set(probeId, { version: ++this.#head, apply: undefined, namespace: d.namespace });
    this.#notify();
  }

  /** The last status the agent reported of a probe (its observed value), a rejection, or its deletion. */
  lastReport(probeId: string): ReportProbeStatusRequest["change"] | undefined {
    for (let i = this.reports.length - 1; i >= 0; i--) {
      const c = this.reports[i]?.change;
      if (c?.value?.probeId === probeId) return c;
    }
    return undefined;
  }

  #state(id: string, version: bigint): ProbeState {
    const d = this.#desired.get(id);
    if (d?.apply) return create(ProbeStateSchema, { version, state: { case: "apply", value: d.apply } });
    return create(ProbeStateSchema, {
      version,
      state: { case: "delete", value: create(DeleteProbeSchema, { probeId: id, k8sNamespace: d?.namespace ?? "" }) },
    });
  }

  #notify(): void {
    const w = this.#wake;
    this.#wake = [];
    for (const f of w) f();
  }

  /** Until a change or the keepalive interval (then true: time for a bookmark). */
  #wait(signal: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(true), KEEPALIVE_MS);
      const woken = (): void => {
        clearTimeout(timer);
        resolve(false);
      };
      this.#wake.push(woken);
      signal.addEventListener("abort", woken, { once: true });
    });
  }

  async start(): Promise<void> {
    setMaxListeners(0, this.#shutdown.signal);
    const bookmark = (version: bigint): ProbeState =>
      create(ProbeStateSchema, { version, state: { case: "bookmark", value: { keepaliveIntervalMs: KEEPALIVE_MS } } });
    const handler = connectNodeAdapter({
      shutdownSignal: this.#shutdown.signal,
      routes: (router) =>
        router.service(ProbeService, {
          watchProbes: async function* (this: void, req, ctx) {
            let cursor = req.versionLastSeen;
            yield bookmark(cursor);
            if (cursor === 0n) {
              cursor = self.#head;
              yield create(ProbeStateSchema, { version: 0n, state: { case: "snapshotStart", value: {} } });
              for (const [id, d] of self.#desired) if (d.apply) yield self.#state(id, 0n);
              yield create(ProbeStateSchema, {
                version: 0n,
                state: { case: "snapshotEnd", value: { headVersion: cursor } },
              });
            }
            while (!ctx.signal.aborted) {
              const changed = [...self.#desired].filter(([, d]) => d.version > cursor);
              changed.sort((a, b) => (a[1].version < b[1].version ? -1 : 1));
              for (const [id, d] of changed) {
                cursor = d.version;
                yield self.#state(id, d.version);
              }
              if (await self.#wait(ctx.signal)) yield bookmark(cursor);
            }
          },
          getDesiredProbeStates: (req) => ({
            states: req.probeIds.filter((id) => self.#desired.has(id)).map((id) => self.#state(id, 0n)),
            notFound: req.probeIds.filter((id) => !self.#desired.has(id)),
          }),
          reportProbeStatus: (req) => {
            self.reports.push(req);
            return {};
          },
        }),
    });
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the generator handlers above are not arrow functions
    const self = this;
    const server = http2.createServer(handler);
    server.on("session", (s) => {
      this.#sessions.add(s);
      s.on("close", () => this.#sessions.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
    this.#server = server;
  }

  /** A client of this service, as the agent has of ctrl. */
  client(): Client<typeof ProbeService> {
    const port = (this.#server?.address() as AddressInfo).port;
    return createClient(
      ProbeService,
      createConnectTransport({ baseUrl: `http://127.0.0.1:${port}`, httpVersion: "2" }),
    );
  }

  async stop(): Promise<void> {
    this.#shutdown.abort();
    this.#notify();
    for (const s of this.#sessions) s.destroy();
    await new Promise<void>((r) => (this.#server ? this.#server.close(() => r()) : r()));
  }
}
