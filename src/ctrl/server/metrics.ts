// ctrl's Prometheus metrics, on a registry of its own (served on the ops port).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export class CtrlMetrics {
  readonly registry = new Registry();
  readonly rpcTotal = new Counter({
    name: "krane_ctrl_rpc_total",
    help: "RPCs handled, by service, method and result code.",
    labelNames: ["service", "method", "code"] as const,
    registers: [this.registry],
  });
  readonly rpcSeconds = new Histogram({
    name: "krane_ctrl_rpc_duration_seconds",
    help: "Duration of unary RPCs.",
    labelNames: ["service", "method"] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });
  readonly streamsActive = new Gauge({
    name: "krane_ctrl_streams_active",
    help: "Open watch streams, by kind.",
    labelNames: ["kind"] as const,
    registers: [this.registry],
  });
  readonly streamMessages = new Counter({
    name: "krane_ctrl_stream_messages_total",
    help: "Messages sent on watch streams, by kind.",
    labelNames: ["kind"] as const,
    registers: [this.registry],
  });
  readonly dependencyUp = new Gauge({
    name: "krane_ctrl_dependency_up",
    help: "1 while a dependency ctrl needs (the database) answers, 0 during an outage.",
    labelNames: ["dependency"] as const,
    registers: [this.registry],
  });
  readonly outboxCompacted = new Counter({
    name: "krane_ctrl_outbox_compacted_rows_total",
    help: "Outbox rows removed by retention.",
    registers: [this.registry],
  });
  readonly rolloutAborts = new Counter({
    name: "krane_rollout_aborts_total",
    help: "Progressive rollouts aborted (by command, failed analysis or a step past its deadline).",
    registers: [this.registry],
  });
  readonly auditDeliveries = new Counter({
    name: "krane_ctrl_audit_deliveries_total",
    help: "Audit events delivered to the webhook sink (result ok), and failed delivery attempts (result failed).",
    labelNames: ["result"] as const,
    registers: [this.registry],
  });
  readonly notificationAttempts = new Counter({
    name: "krane_ctrl_notification_attempts_total",
    help: "Notification delivery attempts (test messages included), by channel type and result (ok, failed).",
    labelNames: ["type", "result"] as const,
    registers: [this.registry],
  });
  readonly notificationsDropped = new Counter({
    name: "krane_ctrl_notifications_dropped_total",
    help: "Notification deliveries given up after the delivery age limit.",
    registers: [this.registry],
  });
  readonly auditPruned = new Counter({
    name: "krane_ctrl_audit_pruned_events_total",
    help: "Audit events removed by retention.",
    registers: [this.registry],
  });

  readonly logArchiveStored = new Counter({
    name: "krane_log_archive_stored_lines_total",
    help: "Log lines the log archive stored in the log history (a line relayed twice counts once).",
    registers: [this.registry],
  });
  readonly logArchiveDropped = new Counter({
    name: "krane_log_archive_dropped_lines_total",
    help: "Log lines the log archive did not keep, by reason: flood (an agent's buffer was full; never stored), bound (the oldest of an environment past its line bound), retention (past the workspace's retention).",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });

  constructor(defaultMetrics = true) {
    // Every reason shows from the start (at 0), so a rate over it needs no first drop.
    for (const reason of ["flood", "bound", "retention"]) this.logArchiveDropped.inc({ reason }, 0);
    if (defaultMetrics) collectDefaultMetrics({ register: this.registry, prefix: "krane_ctrl_" });
  }
}
