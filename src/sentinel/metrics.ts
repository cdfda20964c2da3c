// The sentinel's Prometheus metrics. The names the agent reads back for rollout analysis come
// from SENTINEL_METRICS (src/contracts/routing.ts); the rest are for operators. Label values are
// bounded: revisions (deployment ids of this environment, or "none" when the sentinel answered
// itself) and status classes, never paths or pod names.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { SENTINEL_METRICS } from "../contracts/routing.js";

export const NO_REVISION = "none";

export interface SentinelMetrics {
  readonly registry: Registry;
  readonly requests: Counter<"revision" | "code">;
  readonly duration: Histogram<"revision">;
  readonly upstreamConnectErrors: Counter<"revision">;
  readonly upstreamResets: Counter<"revision">;
  readonly ejections: Counter<"revision">;
  readonly retries: Counter<"revision">;
  readonly routingVersion: Gauge;
  readonly endpoints: Gauge<"revision" | "state">;
  readonly tableUpdates: Counter;
  readonly policyErrors: Counter;
  readonly inFlight: Gauge;
  readonly webSockets: Gauge;
  readonly kubeConnected: Gauge;
  readonly clientErrors: Counter<"reason">;
}

export function statusClass(status: number): string {
  if (status < 200) return "1xx";
  if (status < 300) return "2xx";
  if (status < 400) return "3xx";
  if (status < 500) return "4xx";
  return "5xx";
}

/** Endpoint counts read at scrape time (so ejections that end show up without an event). */
export type EndpointCounts = () => readonly { revision: string; routable: number; ejected: number }[];

export function createSentinelMetrics(endpointCounts: EndpointCounts, registry = new Registry(), defaults = true): SentinelMetrics {
  if (defaults) collectDefaultMetrics({ register: registry });
  const r = [registry];
  return {
    registry,
    requests: new Counter({ name: SENTINEL_METRICS.requests, help: "Requests answered, by revision and status class.", labelNames: ["revision", "code"], registers: r }),
    duration: new Histogram({
      name: SENTINEL_METRICS.duration,
      help: "Time from request to the end of the response, by revision.",
      labelNames: ["revision"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: r,
    }),
    upstreamConnectErrors: new Counter({
      name: SENTINEL_METRICS.upstreamConnectErrors,
      help: "Attempts that could not connect to an instance (refused, unreachable, connect timeout).",
      labelNames: ["revision"],
      registers: r,
    }),
    upstreamResets: new Counter({
      name: "krane_sentinel_upstream_resets_total",
      help: "Attempts whose connection broke before a response began.",
      labelNames: ["revision"],
      registers: r,
    }),
    ejections: new Counter({ name: SENTINEL_METRICS.ejections, help: "Instances ejected by passive health checks.", labelNames: ["revision"], registers: r }),
    retries: new Counter({ name: "krane_sentinel_retries_total", help: "Requests retried on another instance after a failed connect.", labelNames: ["revision"], registers: r }),
    routingVersion: new Gauge({ name: SENTINEL_METRICS.routingVersion, help: "The routing policy version served.", registers: r }),
    endpoints: new Gauge({
      name: "krane_sentinel_endpoints",
      help: "Instances in the routing table, by revision and state (routable, ejected).",
      labelNames: ["revision", "state"],
      registers: r,
      collect() {
        this.reset();
        for (const c of endpointCounts()) {
          this.set({ revision: c.revision, state: "routable" }, c.routable);
          this.set({ revision: c.revision, state: "ejected" }, c.ejected);
        }
      },
    }),
    tableUpdates: new Counter({ name: "krane_sentinel_table_updates_total", help: "Routing table rebuilds.", registers: r }),
    policyErrors: new Counter({ name: "krane_sentinel_policy_errors_total", help: "Policy ConfigMaps refused (the last good policy stays).", registers: r }),
    inFlight: new Gauge({ name: "krane_sentinel_in_flight_requests", help: "Requests being proxied now.", registers: r }),
    webSockets: new Gauge({ name: "krane_sentinel_websockets", help: "Upgraded (WebSocket) connections open now.", registers: r }),
    kubeConnected: new Gauge({ name: "krane_sentinel_kube_connected", help: "1 while the routing-table watches are healthy.", registers: r }),
    clientErrors: new Counter({
      name: "krane_sentinel_client_errors_total",
      help: "Malformed client requests and connections answered 4xx or closed, by reason.",
      labelNames: ["reason"],
      registers: r,
    }),
  };
}
