// ctrl's Prometheus metrics, on a registry of its own (served on the ops port).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/** A metric's name, help and labels; registered on the registry it is made for. */
type Spec<L extends string> = readonly [name: string, help: string, labelNames?: readonly L[]];

export class CtrlMetrics {
  readonly registry = new Registry();
  readonly rpcTotal = this.#counter([
    "krane_ctrl_rpc_total",
    "RPCs handled, by service, method and result code.",
    ["service", "method", "code"],
  ]);
  readonly rpcSeconds = new Histogram({
    name: "krane_ctrl_rpc_duration_seconds",
    help: "Duration of unary RPCs.",
    labelNames: ["service", "method"] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });
  readonly streamsActive = this.#gauge(["krane_ctrl_streams_active", "Open watch streams, by kind.", ["kind"]]);
  readonly streamMessages = this.#counter([
    "krane_ctrl_stream_messages_total",
    "Messages sent on watch streams, by kind.",
    ["kind"],
  ]);
  readonly dependencyUp = this.#gauge([
    "krane_ctrl_dependency_up",
    "1 while a dependency ctrl needs (the database) answers, 0 during an outage.",
    ["dependency"],
  ]);
  readonly outboxCompacted = this.#counter([
    "krane_ctrl_outbox_compacted_rows_total",
    "Outbox rows removed by retention.",
  ]);
  readonly rolloutAborts = this.#counter([
    "krane_rollout_aborts_total",
    "Progressive rollouts aborted (by command, failed analysis or a step past its deadline).",
  ]);
  readonly auditDeliveries = this.#counter([
    "krane_ctrl_audit_deliveries_total",
    "Audit events delivered to the webhook sink (result ok), and failed delivery attempts (result failed).",
    ["result"],
  ]);
  readonly notificationAttempts = this.#counter([
    "krane_ctrl_notification_attempts_total",
    "Notification delivery attempts (test messages included), by channel type and result (ok, failed).",
    ["type", "result"],
  ]);
  readonly notificationsDropped = this.#counter([
    "krane_ctrl_notifications_dropped_total",
    "Notification deliveries given up after the delivery age limit.",
  ]);
  readonly auditPruned = this.#counter(["krane_ctrl_audit_pruned_events_total", "Audit events removed by retention."]);
  readonly logArchiveStored = this.#counter([
    "krane_log_archive_stored_lines_total",
    "Log lines the log archive stored in the log history (a line relayed twice counts once).",
  ]);
  readonly logArchiveDropped = this.#counter([
    "krane_log_archive_dropped_lines_total",
    "Log lines the log archive did not keep, by reason: flood (an agent's buffer was full; never stored), bound (the oldest of an environment past its line bound), retention (past the workspace's retention).",
    ["reason"],
  ]);

  constructor(defaultMetrics = true) {
    // Every reason shows from the start (at 0), so a rate over it needs no first drop.
    for (const reason of ["flood", "bound", "retention"]) this.logArchiveDropped.inc({ reason }, 0);
    if (defaultMetrics) collectDefaultMetrics({ register: this.registry, prefix: "krane_ctrl_" });
  }

  #counter<L extends string = never>([name, help, labelNames = []]: Spec<L>): Counter<L> {
    return new Counter({ name, help, labelNames, registers: [this.registry] });
  }

  #gauge<L extends string = never>([name, help, labelNames = []]: Spec<L>): Gauge<L> {
    return new Gauge({ name, help, labelNames, registers: [this.registry] });
  }
}
