// Validation of a scheduled job's spec (JobService.PutJob): a DNS-label name, a standard cron
// schedule (5 fields, or @yearly/@annually/@monthly/@weekly/@daily/@midnight/@hourly, or
// @every <duration>, as Kubernetes' CronJob accepts; parsed with croner so a field out of range
// is refused here, not by the cluster), an IANA time zone, and the run's limits.
import { Cron } from "croner";
import type { JobSpec } from "../../gen/krane/ctrl/v1/job_pb.js";
import { invalidArgument } from "../errors.js";
import type { StoredJobSpec } from "./types.js";
import * as r from "./rules.js";

const DESCRIPTORS = new Set(["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"]);
const GO_DURATION = /^@every ((\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+)$/;

export function cronSchedule(field: string, value: string): string {
  const v = value.trim().replace(/\s+/g, " ");
  if (v === "") throw invalidArgument(field, 'is required (e.g. "*/15 * * * *" or @hourly)');
  if (v.length > 200) throw invalidArgument(field, "must be at most 200 characters");
  if (/^(CRON_)?TZ=/.test(v)) throw invalidArgument(field, "must not carry a time zone: use time_zone");
  if (v.startsWith("@")) {
    if (DESCRIPTORS.has(v) || GO_DURATION.test(v)) return v;
    throw invalidArgument(
      field,
      `"${v}" is not a known descriptor (@hourly, @daily, @weekly, @monthly, @yearly, @every 5m)`,
    );
  }
  if (v.split(" ").length !== 5)
    throw invalidArgument(field, "must have 5 fields: minute hour day-of-month month day-of-week");
  try {
    new Cron(v, { paused: true, legacyMode: true });
  } catch (err) {
    throw invalidArgument(
      field,
      `does not parse: ${err instanceof Error ? err.message.replace(/^CronPattern: /, "") : String(err)}`,
    );
  }
  return v;
}

export function timeZone(field: string, value: string): string {
  if (value === "") return "";
  if (value.length > 64) throw invalidArgument(field, "must be at most 64 characters");
  try {
    new Intl.DateTimeFormat("en", { timeZone: value });
  } catch {
    throw invalidArgument(field, `"${value}" is not an IANA time zone (e.g. Europe/Paris)`);
  }
  return value;
}

export function validateJobSpec(s: JobSpec | undefined): StoredJobSpec {
  if (!s) throw invalidArgument("spec", "is required");
  const policy = s.concurrencyPolicy === "" ? "Forbid" : s.concurrencyPolicy;
  if (policy !== "Allow" && policy !== "Forbid" && policy !== "Replace")
    throw invalidArgument("spec.concurrency_policy", "must be Allow, Forbid or Replace");
  r.list("spec.command", s.command, r.LIMITS.listMax);
  r.list("spec.args", s.args, r.LIMITS.listMax);
  return {
    name: r.slug("spec.name", s.name),
    schedule: cronSchedule("spec.schedule", s.schedule),
    timeZone: timeZone("spec.time_zone", s.timeZone),
    image: s.image === "" ? "" : r.image("spec.image", s.image),
    command: s.command.map((a, i) => r.arg(`spec.command[${i}]`, a)),
    args: s.args.map((a, i) => r.arg(`spec.args[${i}]`, a)),
    concurrencyPolicy: policy,
    deadlineSeconds:
      s.deadlineSeconds === 0n ? 3600 : r.intRange("spec.deadline_seconds", s.deadlineSeconds, 1, 7 * 86_400),
    successfulJobsHistoryLimit:
      s.successfulJobsHistoryLimit === undefined
        ? 3
        : r.intRange("spec.successful_jobs_history_limit", s.successfulJobsHistoryLimit, 0, 100),
    failedJobsHistoryLimit:
      s.failedJobsHistoryLimit === undefined
        ? 1
        : r.intRange("spec.failed_jobs_history_limit", s.failedJobsHistoryLimit, 0, 100),
    suspend: s.suspend,
    cpuMillicores:
      s.cpuMillicores === 0n
        ? 250
        : r.intRange("spec.cpu_millicores", s.cpuMillicores, r.LIMITS.cpuMin, r.LIMITS.cpuMax),
    memoryMib:
      s.memoryMib === 0n ? 256 : r.intRange("spec.memory_mib", s.memoryMib, r.LIMITS.memoryMin, r.LIMITS.memoryMax),
  };
}
