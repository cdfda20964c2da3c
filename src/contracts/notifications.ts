// Notifications: the events a channel can subscribe to and the JSON body a generic webhook
// receives (the facts every other format — Slack's, email — is rendered from). What ctrl writes and
// what receivers, the CLI's help and the docs read, so all of them name events the same way.

/** Every event a channel can subscribe to, with what it means. */
export const NOTIFICATION_EVENTS = {
  "deploy.started": "a new revision of an environment starts rolling out (a deploy, a configuration change, a restart)",
  "deploy.succeeded": "a rolling update finished in a region: the revision is available there",
  "deploy.failed": "a rolling update missed its progress deadline in a region",
  rollback: "a rollback was asked for (krane rollout undo, krane rollout abort after a blue-green switch)",
  "canary.promoted": "a progressive rollout completed: the new revision serves all traffic (with the analysis verdict)",
  "canary.aborted": "a progressive rollout was aborted (by its analysis, with the verdict, or by hand)",
  "instance.oom": "an instance's container was killed for running out of memory",
  "instance.crashloop": "an instance is crash-looping",
  "certificate.failing":
    "a domain's certificate that was ready in a region is not any more (expired, renewal failed, secret gone)",
  "alert.firing": "an alert rule's condition held for its `for` duration (with the rule, the value and the window)",
  "alert.resolved": "a firing alert rule's condition no longer holds (with the rule, the value and the episode)",
  "build.failed": "a build from source failed (with the build's id, the failing step and its last log lines)",
} as const;

export type NotificationEventType = keyof typeof NOTIFICATION_EVENTS;

/** A channel's test message is of this type (it cannot be subscribed to: it goes to the channel asked). */
export const TEST_EVENT = "test";

export type Severity = "info" | "success" | "warning" | "critical";

export function isNotificationEvent(name: string): name is NotificationEventType {
  return Object.hasOwn(NOTIFICATION_EVENTS, name);
}

/**
 * The JSON body of a generic webhook delivery. `id` is the event's idempotency key: the same on
 * every attempt and every channel (also in the X-Krane-Delivery and Idempotency-Key headers).
 */
export interface NotificationBody {
  id: string;
  type: NotificationEventType | typeof TEST_EVENT;
  /** When it happened, RFC 3339. */
  at: string;
  severity: Severity;
  /** One line: what happened and where ("deploy failed: shop/production"). */
  title: string;
  /** A sentence or two more. */
  text: string;
  workspace: string;
  project: string | null;
  environment: string | null;
  region: string | null;
  revision: number | null;
  deployment_id: string | null;
  /** Facts of the event's type (the instance, the hostname, the verdict, the metric's value …). */
  details: Record<string, string | number | boolean | null>;
}
