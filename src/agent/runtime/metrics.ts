// The agent's Prometheus metrics, registered once on the registry passed in and shared by all
// controllers (the `controller` label tells them apart).
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { BreakerPhase } from "./breaker.js";

export interface AgentMetrics {
  readonly reconciles: Counter<"controller" | "op" | "result">;
  readonly reconcileSeconds: Histogram<"controller" | "op">;
  readonly reconcileSkipped: Counter<"controller">;
  readonly rejected: Counter<"controller">;
  readonly streamReconnects: Counter<"controller" | "reason">;
  readonly streamConnected: Gauge<"controller">;
  /**
   * Per controller: whether its stream loop runs and since when the stream has been down (unix
   * ms; undefined while connected), read by krane_agent_stream_down_seconds at each scrape.
   */
  readonly streamDownSince: Map<string, () => { readonly running: boolean; readonly downSince: number | undefined }>;
  readonly streamMessages: Counter<"controller">;
  readonly cursor: Gauge<"controller">;
  readonly breakerState: Gauge<"controller">;
  readonly reportsSent: Counter<"controller" | "result">;
  readonly reportsDeduplicated: Counter<"controller">;
  readonly reportsComputed: Counter<"controller">;
  readonly ctrlRequests: Counter<"controller" | "method" | "result">;
  readonly kubeRequests: Counter<"verb" | "resource" | "code">;
  readonly watchEvents: Counter<"resource" | "event">;
  readonly resyncs: Counter<"controller" | "result">;
  readonly resyncRepairs: Counter<"controller" | "reason">;
  readonly queueKeys: Gauge<"controller">;
}

const cache = new WeakMap<Registry, AgentMetrics>();

export function breakerPhaseValue(p: BreakerPhase): number {
  return p === "closed" ? 0 : p === "open" ? 1 : 2;
}

export function agentMetrics(registry: Registry): AgentMetrics {
  const existing = cache.get(registry);
  if (existing) return existing;
  const registers = [registry];
  const streamDownSince: AgentMetrics["streamDownSince"] = new Map();
  new Gauge({
    name: "krane_agent_stream_down_seconds",
    help: "Seconds the desired-state stream has been down (0 while connected; absent while the controller does not run).",
    labelNames: ["controller"],
    registers,
    collect() {
      this.reset();
      const now = Date.now();
      for (const [controller, since] of streamDownSince) {
        const s = since();
        if (s.running) this.set({ controller }, s.downSince === undefined ? 0 : (now - s.downSince) / 1000);
      }
    },
  });
  const m: AgentMetrics = {
    streamDownSince,
    reconciles: new Counter({
      name: "krane_agent_reconciles_total",
      help: "Reconciles (apply/delete of one key) by result.",
      labelNames: ["controller", "op", "result"],
      registers,
    }),
    reconcileSeconds: new Histogram({
      name: "krane_agent_reconcile_duration_seconds",
      help: "Time to reconcile one key.",
      labelNames: ["controller", "op"],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    reconcileSkipped: new Counter({
      name: "krane_agent_reconciles_skipped_total",
      help: "Applies skipped because the live objects already matched (no Kubernetes write).",
      labelNames: ["controller"],
      registers,
    }),
    rejected: new Counter({
      name: "krane_agent_rejected_total",
      help: "Desired states refused by validation (reported to ctrl, not applied).",
      labelNames: ["controller"],
      registers,
    }),
    streamReconnects: new Counter({
      name: "krane_agent_stream_reconnects_total",
      help: "Desired-state stream reconnects by reason.",
      labelNames: ["controller", "reason"],
      registers,
    }),
    streamConnected: new Gauge({
      name: "krane_agent_stream_connected",
      help: "1 while the desired-state stream is connected.",
      labelNames: ["controller"],
      registers,
    }),
    streamMessages: new Counter({
      name: "krane_agent_stream_messages_total",
      help: "Desired-state stream messages received.",
      labelNames: ["controller"],
      registers,
    }),
    cursor: new Gauge({
      name: "krane_agent_cursor_version",
      help: "The version cursor of the desired-state stream.",
      labelNames: ["controller"],
      registers,
    }),
    breakerState: new Gauge({
      name: "krane_agent_breaker_state",
      help: "Circuit breaker around ctrl calls: 0 closed, 1 open, 2 half-open.",
      labelNames: ["controller"],
      registers,
    }),
    reportsSent: new Counter({
      name: "krane_agent_reports_total",
      help: "Status reports sent to ctrl by result.",
      labelNames: ["controller", "result"],
      registers,
    }),
    reportsDeduplicated: new Counter({
      name: "krane_agent_reports_deduplicated_total",
      help: "Status reports not sent because ctrl already has the same status.",
      labelNames: ["controller"],
      registers,
    }),
    reportsComputed: new Counter({
      name: "krane_agent_reports_computed_total",
      help: "Status reports computed from the caches (sent, deduplicated or replaced by a newer one before sending).",
      labelNames: ["controller"],
      registers,
    }),
    ctrlRequests: new Counter({
      name: "krane_agent_ctrl_requests_total",
      help: "Unary calls to ctrl by method and result.",
      labelNames: ["controller", "method", "result"],
      registers,
    }),
    kubeRequests: new Counter({
      name: "krane_agent_kube_requests_total",
      help: "Kubernetes API requests by verb, resource and HTTP status (0 = transport error).",
      labelNames: ["verb", "resource", "code"],
      registers,
    }),
    watchEvents: new Counter({
      name: "krane_agent_watch_events_total",
      help: "Reflector events (lists, watch starts/ends, 410 re-lists, watchdog trips, errors).",
      labelNames: ["resource", "event"],
      registers,
    }),
    resyncs: new Counter({
      name: "krane_agent_resyncs_total",
      help: "Resync passes by result.",
      labelNames: ["controller", "result"],
      registers,
    }),
    resyncRepairs: new Counter({
      name: "krane_agent_resync_repairs_total",
      help: "Keys queued by the resync: drift, orphan, or deleted desired state.",
      labelNames: ["controller", "reason"],
      registers,
    }),
    queueKeys: new Gauge({
      name: "krane_agent_queue_keys",
      help: "Keys with queued, running or retrying work.",
      labelNames: ["controller"],
      registers,
    }),
  };
  cache.set(registry, m);
  return m;
}
