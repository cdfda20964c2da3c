// The alert rules form's pure part: the metrics a rule can watch (AlertService's names, with the
// words the form shows) and the request a filled form makes. ctrl validates it and names the
// field it refuses.

/** AlertService's metrics, with a label and the unit of the bound. */
export const ALERT_METRIC_CHOICES: readonly { name: string; label: string }[] = [
  { name: "error_rate", label: "Error rate (% 5xx)" },
  { name: "p50_ms", label: "p50 latency (ms)" },
  { name: "p95_ms", label: "p95 latency (ms)" },
  { name: "p99_ms", label: "p99 latency (ms)" },
  { name: "request_rate", label: "Requests per second" },
  { name: "restarts", label: "Instance restarts (count)" },
];

/** What the form holds, as typed. */
export interface AlertForm {
  name: string;
  metric: string;
  /** "above" or "below". */
  side: string;
  threshold: string;
  /** Whole minutes, as typed. */
  windowMinutes: string;
  forMinutes: string;
}

export const EMPTY_ALERT_FORM: AlertForm = {
  name: "",
  metric: "error_rate",
  side: "above",
  threshold: "",
  windowMinutes: "1",
  forMinutes: "5",
};

/**
 * AddAlertRule's fields from the form. A bound that is not a number goes as NaN and a duration as
 * 0 (a window of 0 is one minute), so ctrl refuses them naming the field, as it would the CLI's.
 */
export function alertRequest(f: AlertForm): {
  name: string;
  metric: string;
  op: string;
  threshold: number;
  windowSeconds: number;
  forSeconds: number;
} {
  const seconds = (minutes: string) => {
    const n = minutes.trim() === "" ? Number.NaN : Number(minutes);
    return Number.isFinite(n) ? Math.round(n * 60) : 0;
  };
  return {
    name: f.name.trim(),
    metric: f.metric,
    op: f.side === "below" ? "<" : ">",
    threshold: f.threshold.trim() === "" ? Number.NaN : Number(f.threshold),
    windowSeconds: seconds(f.windowMinutes),
    forSeconds: seconds(f.forMinutes),
  };
}
