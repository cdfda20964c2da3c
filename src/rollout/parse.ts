// Validates untrusted JSON into a RolloutInput, filling defaults. Every error names the field:
//   deployment.strategy.rollingUpdate.maxSurge: percentage out of range
import { MAX_INT32, scaledValue } from "./fenceposts.js";
import { parseTime } from "./time.js";
import type {
  Condition,
  ConditionStatus,
  DeploymentInput,
  DeploymentStatus,
  IntOrPercent,
  RevisionInput,
  RevisionStatus,
  RolloutInput,
  Strategy,
} from "./types.js";

export class RolloutInputError extends Error {
  constructor(
    readonly field: string,
    readonly problem: string,
  ) {
    super(`${field}: ${problem}`);
    this.name = "RolloutInputError";
  }
}

type Obj = Record<string, unknown>;

function fail(field: string, problem: string): never {
  throw new RolloutInputError(field, problem);
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return typeof v === "string" ? `string ${JSON.stringify(v)}` : `${typeof v} ${JSON.stringify(v)}`;
}

function object(v: unknown, field: string): Obj {
  if (typeof v !== "object" || v === null || Array.isArray(v)) fail(field, `must be an object, got ${describe(v)}`);
  return v as Obj;
}

function count(v: unknown, field: string): number {
  if (typeof v !== "number" || !Number.isInteger(v)) fail(field, `must be an integer, got ${describe(v)}`);
  if (v < 0) fail(field, `must not be negative, got ${v}`);
  if (v > MAX_INT32) fail(field, `must be at most ${MAX_INT32}, got ${v}`);
  return v;
}

function optional<T>(o: Obj, key: string, field: string, dflt: T, read: (v: unknown, field: string) => T): T {
  const v = o[key];
  return v === undefined ? dflt : read(v, field);
}

function nullable<T>(read: (v: unknown, field: string) => T): (v: unknown, field: string) => T | null {
  return (v, field) => (v === null ? null : read(v, field));
}

function string(v: unknown, field: string): string {
  if (typeof v !== "string") fail(field, `must be a string, got ${describe(v)}`);
  return v;
}

function nonEmpty(v: unknown, field: string): string {
  const s = string(v, field);
  if (s.length === 0) fail(field, "must not be empty");
  return s;
}

function boolean(v: unknown, field: string): boolean {
  if (typeof v !== "boolean") fail(field, `must be true or false, got ${describe(v)}`);
  return v;
}

function time(v: unknown, field: string): string {
  const s = string(v, field);
  if (parseTime(s) === null) fail(field, `must be an RFC 3339 date-time, got ${JSON.stringify(s)}`);
  return s;
}

const PERCENT = /^(\d+)%$/;

function intOrPercent(v: unknown, field: string): IntOrPercent {
  if (typeof v === "number") return count(v, field);
  if (typeof v !== "string") fail(field, `must be an integer or a percentage like "25%", got ${describe(v)}`);
  const m = PERCENT.exec(v);
  if (m === null) {
    if (/^-\d+%$/.test(v)) fail(field, "percentage out of range (0% to 100%)");
    fail(field, `must be an integer or a percentage like "25%", got ${JSON.stringify(v)}`);
  }
  const pct = Number(m[1]);
  if (pct > 100) fail(field, "percentage out of range (0% to 100%)");
  return `${pct}%`;
}

function strategy(v: unknown, field: string): Strategy {
  const o = object(v, field);
  const type = o["type"];
  if (type !== "RollingUpdate" && type !== "Recreate") {
    fail(`${field}.type`, `unknown strategy ${describe(type)} (want "RollingUpdate" or "Recreate")`);
  }
  // Validated either way; only a rolling update uses it.
  const ruField = `${field}.rollingUpdate`;
  const ru = o["rollingUpdate"] === undefined || o["rollingUpdate"] === null ? {} : object(o["rollingUpdate"], ruField);
  const maxSurge = optional(ru, "maxSurge", `${ruField}.maxSurge`, null, nullable(intOrPercent)) ?? 0;
  const maxUnavailable = optional(ru, "maxUnavailable", `${ruField}.maxUnavailable`, null, nullable(intOrPercent)) ?? 0;
  if (type === "Recreate") return { type };
  return { type, rollingUpdate: { maxSurge, maxUnavailable } };
}

function deploymentStatus(v: unknown, field: string): DeploymentStatus {
  const o = object(v, field);
  const c = (key: string): number => optional(o, key, `${field}.${key}`, 0, count);
  return {
    replicas: c("replicas"),
    updatedReplicas: c("updatedReplicas"),
    readyReplicas: c("readyReplicas"),
    availableReplicas: c("availableReplicas"),
    unavailableReplicas: c("unavailableReplicas"),
  };
}

const CONDITION_STATUSES: readonly string[] = ["True", "False", "Unknown"];

function condition(v: unknown, field: string): Condition {
  const o = object(v, field);
  const status = o["status"];
  if (typeof status !== "string" || !CONDITION_STATUSES.includes(status)) {
    fail(`${field}.status`, `must be "True", "False" or "Unknown", got ${describe(status)}`);
  }
  return {
    type: nonEmpty(o["type"], `${field}.type`),
    status: status as ConditionStatus,
    reason: optional(o, "reason", `${field}.reason`, "", string),
    message: optional(o, "message", `${field}.message`, "", string),
    lastUpdateTime: time(o["lastUpdateTime"], `${field}.lastUpdateTime`),
    lastTransitionTime: time(o["lastTransitionTime"], `${field}.lastTransitionTime`),
  };
}

function conditions(v: unknown, field: string): Condition[] {
  if (!Array.isArray(v)) fail(field, `must be an array, got ${describe(v)}`);
  const out = v.map((c, i) => condition(c, `${field}[${i}]`));
  out.forEach((c, i) => {
    const first = out.findIndex((x) => x.type === c.type);
    if (first !== i) fail(`${field}[${i}].type`, `duplicate condition type ${JSON.stringify(c.type)}`);
  });
  return out;
}

function revisionStatus(v: unknown, field: string): RevisionStatus {
  const o = object(v, field);
  const c = (key: string): number => optional(o, key, `${field}.${key}`, 0, count);
  return {
    replicas: c("replicas"),
    readyReplicas: c("readyReplicas"),
    availableReplicas: c("availableReplicas"),
    terminatingReplicas: c("terminatingReplicas"),
  };
}

function revisionNumber(v: unknown, field: string): number {
  const n = count(v, field);
  if (n === 0) fail(field, "must be at least 1 (null when the revision has no replica set yet)");
  return n;
}

function revision(v: unknown, field: string): RevisionInput {
  const o = object(v, field);
  if (!("revision" in o)) fail(`${field}.revision`, "is required (null when the revision has no replica set yet)");
  const rev: RevisionInput = {
    name: nonEmpty(o["name"], `${field}.name`),
    revision: nullable(revisionNumber)(o["revision"], `${field}.revision`),
    createdAt: time(o["createdAt"], `${field}.createdAt`),
    replicas: count(o["replicas"], `${field}.replicas`),
    desiredReplicas: optional(o, "desiredReplicas", `${field}.desiredReplicas`, null, nullable(count)),
    maxReplicas: optional(o, "maxReplicas", `${field}.maxReplicas`, null, nullable(count)),
    status: optional(
      o,
      "status",
      `${field}.status`,
      { replicas: 0, readyReplicas: 0, availableReplicas: 0, terminatingReplicas: 0 },
      revisionStatus,
    ),
  };
  if (rev.revision === null && rev.replicas !== 0) {
    fail(`${field}.replicas`, "must be 0 while the revision has no replica set (revision null)");
  }
  if (rev.revision === null && rev.status.replicas !== 0) {
    fail(`${field}.status.replicas`, "must be 0 while the revision has no replica set (revision null)");
  }
  if (rev.revision === null && rev.status.terminatingReplicas !== 0) {
    fail(`${field}.status.terminatingReplicas`, "must be 0 while the revision has no replica set (revision null)");
  }
  return rev;
}

function revisions(v: unknown, field: string): RevisionInput[] {
  if (!Array.isArray(v)) fail(field, `must be an array, got ${describe(v)}`);
  const out = v.map((r, i) => revision(r, `${field}[${i}]`));
  const names = new Map<string, number>();
  const numbers = new Map<number, number>();
  out.forEach((r, i) => {
    const sameName = names.get(r.name);
    if (sameName !== undefined)
      fail(`${field}[${i}].name`, `duplicate name ${JSON.stringify(r.name)} (also ${field}[${sameName}])`);
    names.set(r.name, i);
    if (r.revision === null) return;
    const sameNumber = numbers.get(r.revision);
    if (sameNumber !== undefined)
      fail(`${field}[${i}].revision`, `duplicate revision ${r.revision} (also ${field}[${sameNumber}])`);
    numbers.set(r.revision, i);
  });
  return out;
}

function deployment(v: unknown, field: string, revs: readonly RevisionInput[]): DeploymentInput {
  const o = object(v, field);
  const name = optional(o, "name", `${field}.name`, "environment", nonEmpty);
  const replicas = count(o["replicas"], `${field}.replicas`);
  if (o["strategy"] === undefined) fail(`${field}.strategy`, "is required");
  const strat = strategy(o["strategy"], `${field}.strategy`);
  if (strat.type === "RollingUpdate") {
    // Kubernetes keeps replicas + maxSurge in an int32 (the max-replicas annotation, the most pods
    // a rolling update may run); beyond it its arithmetic wraps to negative sizes.
    const max = replicas + scaledValue(strat.rollingUpdate.maxSurge, replicas, true);
    if (max > MAX_INT32) {
      fail(
        `${field}.strategy.rollingUpdate.maxSurge`,
        `replicas (${replicas}) + maxSurge must be at most ${MAX_INT32}, got ${max}`,
      );
    }
  }
  const minReadySeconds = optional(o, "minReadySeconds", `${field}.minReadySeconds`, 0, count);
  const progressDeadlineSeconds = optional(
    o,
    "progressDeadlineSeconds",
    `${field}.progressDeadlineSeconds`,
    600,
    nullable(count),
  );
  if (progressDeadlineSeconds !== null && progressDeadlineSeconds <= minReadySeconds) {
    fail(`${field}.progressDeadlineSeconds`, `must be greater than minReadySeconds (${minReadySeconds})`);
  }
  const revisionHistoryLimit = optional(
    o,
    "revisionHistoryLimit",
    `${field}.revisionHistoryLimit`,
    10,
    nullable(count),
  );
  const paused = optional(o, "paused", `${field}.paused`, false, boolean);
  const target = nonEmpty(o["target"], `${field}.target`);
  if (!revs.some((r) => r.name === target)) fail(`${field}.target`, `${JSON.stringify(target)} is not a revision`);
  const rollbackTo = optional(o, "rollbackTo", `${field}.rollbackTo`, null, nullable(count));
  const status = optional(o, "status", `${field}.status`, deploymentStatus({}, `${field}.status`), deploymentStatus);
  const conds = optional(o, "conditions", `${field}.conditions`, [], nullable(conditions)) ?? [];
  return {
    name,
    replicas,
    strategy: strat,
    minReadySeconds,
    progressDeadlineSeconds,
    revisionHistoryLimit,
    paused,
    target,
    rollbackTo,
    status,
    conditions: conds,
  };
}

/** Validates `json` (already parsed) into a RolloutInput; throws RolloutInputError naming the field. */
export function parseRolloutInput(json: unknown): RolloutInput {
  const root = object(json, "input");
  const now = time(root["now"], "now");
  const revs = revisions(root["revisions"], "revisions");
  return { now, deployment: deployment(root["deployment"], "deployment", revs), revisions: revs };
}

/** Parses JSON text and validates it; malformed JSON is reported as a RolloutInputError too. */
export function parseRolloutInputText(text: string): RolloutInput {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new RolloutInputError("input", `malformed JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  return parseRolloutInput(json);
}
