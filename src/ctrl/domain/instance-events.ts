// Instance events (table instance_events): the lifecycle facts agents report with a deployment's
// instance set (../kinds/deployment.ts validates them), kept as a bounded history per
// environment and read by the public API (../read/instance-events.ts).
//
// A report carries what the pods show now, not a history, so most of it was seen before: a fact
// already stored with the same details writes nothing; a new fact, or one whose details changed
// (a new message, more restarts), gets the environment's next seq — followers reading after a
// cursor see it once more. Bounds: the newest EVENTS_PER_INSTANCE per instance and
// EVENTS_PER_REVISION_REGION per revision and region (a crash-looping pod adds a row per restart,
// replacing its oldest), and nothing older than EVENTS_MAX_AGE_MS.
import { sql } from "kysely";
import type { WriteTx } from "../db/outbox.js";
import type { DeploymentRow, InstanceEventRow } from "../db/schema.js";
import { notify, type Notice } from "./notifications.js";

export const EVENTS_PER_INSTANCE = 20;
export const EVENTS_PER_REVISION_REGION = 500;
export const EVENTS_MAX_AGE_MS = 7 * 24 * 3600 * 1000;

/** One event of an instance, as its region's agent reports it. */
export interface ReportedEvent {
  instance: string;
  kind: string;
  reason: string;
  atMs: number;
  exitCode: number | null;
  restarts: number;
  image: string;
  message: string;
}

const identity = (e: { instance: string; kind: string; reason: string; at_ms: number }): string =>
  `${e.instance}\u0000${e.kind}\u0000${e.reason}\u0000${e.at_ms}`;

const sameDetails = (row: InstanceEventRow, e: ReportedEvent): boolean =>
  row.exit_code === e.exitCode &&
  Number(row.restarts) === e.restarts &&
  row.image === e.image &&
  row.message === e.message;

/** Records a report's events for revision `d` in `region` (inside the report's transaction). */
export async function recordInstanceEvents(
  tx: WriteTx,
  d: DeploymentRow,
  region: string,
  events: readonly ReportedEvent[],
): Promise<void> {
  if (events.length === 0) return;
  tx.environmentChanged(d.environment_id);
  const stored = await tx.trx
    .selectFrom("instance_events")
    .selectAll()
    .where("deployment_id", "=", d.id)
    .where("region", "=", region)
    .execute();
  const byIdentity = new Map(stored.map((r) => [identity({ ...r, at_ms: Number(r.at_ms) }), r]));
  const fresh = new Map<string, ReportedEvent>();
  for (const e of events) {
    const id = identity({ instance: e.instance, kind: e.kind, reason: e.reason, at_ms: e.atMs });
    const row = byIdentity.get(id);
    if (row && sameDetails(row, e)) continue;
    fresh.set(id, e); // the last word on a fact repeated in one report
  }
  if (fresh.size === 0) return;
  for (const n of instanceNotices([...fresh.values()], stored, d, region))
    await notify(tx, { ...n, environmentId: d.environment_id });
  // One writer of an environment's seq at a time (agents of several regions report at once).
  await tx.dialect.lockNamed(tx.trx, `krane instance events ${d.environment_id}`);
  const last = await tx.trx
    .selectFrom("instance_events")
    .select(sql<number | null>`max(seq)`.as("seq"))
    .where("environment_id", "=", d.environment_id)
    .executeTakeFirst();
  let seq = Number(last?.seq ?? 0);
  const replaced = [...fresh.keys()].map((k) => byIdentity.get(k)).filter((r) => r !== undefined);
  for (let k = 0; k < replaced.length; k += 200) {
    await tx.trx
      .deleteFrom("instance_events")
      .where("environment_id", "=", d.environment_id)
      .where(
        "seq",
        "in",
        replaced.slice(k, k + 200).map((r) => r.seq),
      )
      .execute();
  }
  const rows = [...fresh.values()].map((e) => ({
    environment_id: d.environment_id,
    seq: ++seq,
    deployment_id: d.id,
    region,
    instance: e.instance,
    kind: e.kind,
    reason: e.reason,
    at_ms: e.atMs,
    exit_code: e.exitCode,
    restarts: e.restarts,
    image: e.image,
    message: e.message,
    recorded_at: tx.now,
  }));
  for (let k = 0; k < rows.length; k += 100) {
    await tx.trx
      .insertInto("instance_events")
      .values(rows.slice(k, k + 100))
      .execute();
  }
  await prune(tx, d, region, new Set(rows.map((r) => r.instance)), Number(last?.seq ?? 0));
}

/** An instance's OOM kill or crash loop notifies again only after this long without one. */
export const NOTICE_QUIET_MS = 3_600_000;

/**
 * The notices of a report's new facts (pure): an OOM kill and a crash loop, once per instance and
 * reason within NOTICE_QUIET_MS (a crash-looping pod reports a new fact at every restart; the
 * stored history says whether it was already told).
 */
export function instanceNotices(
  fresh: readonly ReportedEvent[],
  stored: readonly Pick<InstanceEventRow, "instance" | "reason" | "at_ms">[],
  d: Pick<DeploymentRow, "id" | "revision" | "image">,
  region: string,
): Omit<Notice, "environmentId">[] {
  const told = new Set<string>();
  const out: Omit<Notice, "environmentId">[] = [];
  for (const e of fresh) {
    const oom = e.kind === "terminated" && e.reason === "OOMKilled";
    const loop = e.kind === "waiting" && e.reason === "CrashLoopBackOff";
    if (!oom && !loop) continue;
    const key = `${e.instance}\u0000${e.reason}`;
    if (told.has(key)) continue;
    told.add(key);
    const recent = stored.some(
      (r) => r.instance === e.instance && r.reason === e.reason && Number(r.at_ms) > e.atMs - NOTICE_QUIET_MS,
    );
    if (recent) continue;
    const revision = Number(d.revision);
    const exit = e.exitCode === null ? "" : ` (exit ${e.exitCode})`;
    out.push({
      type: oom ? "instance.oom" : "instance.crashloop",
      severity: "critical",
      summary: oom ? `instance out of memory in ${region}` : `instance crash-looping in ${region}`,
      text: oom
        ? `Instance ${e.instance} of revision ${revision} was killed for running out of memory${exit}; raise its memory or find the leak.`
        : `Instance ${e.instance} of revision ${revision} keeps exiting${exit} and is restarted with back-off (${e.restarts} restarts).${e.message === "" ? "" : ` ${e.message}`}`,
      region,
      deployment: { id: d.id, revision },
      details: {
        instance: e.instance,
        exit_code: e.exitCode,
        restarts: e.restarts,
        image: e.image === "" ? d.image : e.image,
      },
    });
  }
  return out;
}

/**
 * Keeps the bounds: per instance touched, per revision and region, and by age. The rows just
 * written (seq > before) stay even past a bound until the next report: removing the newest seq
 * would hand it out again, under a cursor a follower already passed.
 */
async function prune(
  tx: WriteTx,
  d: DeploymentRow,
  region: string,
  instances: ReadonlySet<string>,
  before: number,
): Promise<void> {
  const over: number[] = [];
  const all = await tx.trx
    .selectFrom("instance_events")
    .select(["seq", "instance"])
    .where("deployment_id", "=", d.id)
    .where("region", "=", region)
    .orderBy("at_ms", "desc")
    .orderBy("seq", "desc")
    .execute();
  const perInstance = new Map<string, number>();
  all.forEach((r, n) => {
    const count = (perInstance.get(r.instance) ?? 0) + 1;
    perInstance.set(r.instance, count);
    if (
      Number(r.seq) <= before &&
      (n >= EVENTS_PER_REVISION_REGION || (instances.has(r.instance) && count > EVENTS_PER_INSTANCE))
    )
      over.push(Number(r.seq));
  });
  for (let k = 0; k < over.length; k += 200) {
    await tx.trx
      .deleteFrom("instance_events")
      .where("environment_id", "=", d.environment_id)
      .where("seq", "in", over.slice(k, k + 200))
      .execute();
  }
  await tx.trx
    .deleteFrom("instance_events")
    .where("recorded_at", "<", tx.now - EVENTS_MAX_AGE_MS)
    // An environment's newest event stays however old: its seq is where the next one counts on
    // from, so numbers are never handed out twice (a follower's cursor would skip the new ones).
    .where(
      sql<boolean>`seq < (select max(newest.seq) from instance_events newest where newest.environment_id = instance_events.environment_id)`,
    )
    .execute();
}

/** Forgets an environment's events (the environment's deployments are gone). */
export async function purgeInstanceEvents(tx: WriteTx, environmentId: string): Promise<void> {
  await tx.trx.deleteFrom("instance_events").where("environment_id", "=", environmentId).execute();
}
