// Reads of instance events (table instance_events, written by ../domain/instance-events.ts): an
// environment's events in the order ctrl recorded them, after a cursor, with their revision.
import type { Expression, ExpressionBuilder, Kysely, SqlBool } from "kysely";
import type { Database, InstanceEventsTable } from "../db/schema.js";
import type { ReportedEvent } from "../domain/instance-events.js";

export interface InstanceEventQuery {
  environmentId: string;
  /** Only this revision's deployment (undefined: every revision). */
  deploymentId?: string;
  region?: string;
  instance?: string;
  /** Only events that happened at or after this time (unix ms). */
  sinceMs?: number;
  /** Only events recorded after this position. */
  afterSeq: number;
  limit: number;
}

/** An event as its agent reported it, with where ctrl recorded it. */
export interface InstanceEventView extends ReportedEvent {
  seq: number;
  deploymentId: string;
  revision: number;
  region: string;
  recordedAt: number;
}

/** What both reads select: the event and its deployment's revision. */
const EVENT_COLUMNS = [
  "e.seq",
  "e.deployment_id",
  "d.revision",
  "e.region",
  "e.instance",
  "e.kind",
  "e.reason",
  "e.at_ms",
  "e.exit_code",
  "e.restarts",
  "e.image",
  "e.message",
  "e.recorded_at",
] as const;

type EventsQuery = ExpressionBuilder<Database & { e: InstanceEventsTable }, "e">;

/** The query's filters on the events `e` of one environment. */
function filters(eb: EventsQuery, q: Omit<InstanceEventQuery, "afterSeq" | "limit">): Expression<SqlBool>[] {
  const out: Expression<SqlBool>[] = [eb("e.environment_id", "=", q.environmentId)];
  if (q.deploymentId !== undefined) out.push(eb("e.deployment_id", "=", q.deploymentId));
  if (q.region !== undefined) out.push(eb("e.region", "=", q.region));
  if (q.instance !== undefined) out.push(eb("e.instance", "=", q.instance));
  if (q.sinceMs !== undefined) out.push(eb("e.at_ms", ">=", q.sinceMs));
  return out;
}

export async function listInstanceEvents(db: Kysely<Database>, q: InstanceEventQuery): Promise<InstanceEventView[]> {
  const s = db
    .selectFrom("instance_events as e")
    .innerJoin("deployments as d", "d.id", "e.deployment_id")
    .select(EVENT_COLUMNS)
    .where((eb) => eb.and(filters(eb, q)))
    .where("e.seq", ">", q.afterSeq);
  const rows = await s.orderBy("e.seq").limit(q.limit).execute();
  return rows.map(view);
}

/** An event row with its revision (EVENT_COLUMNS). */
type EventRow = Omit<InstanceEventsTable, "environment_id"> & { revision: number };

function view(r: EventRow): InstanceEventView {
  return {
    seq: Number(r.seq),
    deploymentId: r.deployment_id,
    revision: Number(r.revision),
    region: r.region,
    instance: r.instance,
    kind: r.kind,
    reason: r.reason,
    atMs: Number(r.at_ms),
    exitCode: r.exit_code === null ? null : Number(r.exit_code),
    restarts: Number(r.restarts),
    image: r.image,
    message: r.message,
    recordedAt: Number(r.recorded_at),
  };
}

/**
 * The newest event (by when it happened) of each instance ctrl holds now (table instances),
 * bounded by the instances and the events kept per instance.
 */
export async function latestInstanceEvents(
  db: Kysely<Database>,
  q: Omit<InstanceEventQuery, "afterSeq" | "limit">,
): Promise<InstanceEventView[]> {
  const s = db
    .selectFrom("instance_events as e")
    .innerJoin("deployments as d", "d.id", "e.deployment_id")
    .innerJoin("instances as i", (j) =>
      j
        .onRef("i.deployment_id", "=", "e.deployment_id")
        .onRef("i.region", "=", "e.region")
        .onRef("i.k8s_name", "=", "e.instance"),
    )
    .select(EVENT_COLUMNS)
    .where((eb) => eb.and(filters(eb, q)));
  const newest = new Map<string, InstanceEventView>();
  for (const r of await s.execute()) {
    const v = view(r);
    const key = `${v.deploymentId}\u0000${v.region}\u0000${v.instance}`;
    const had = newest.get(key);
    if (!had || v.atMs > had.atMs || (v.atMs === had.atMs && v.seq > had.seq)) newest.set(key, v);
  }
  return [...newest.values()].sort((a, b) => a.seq - b.seq);
}

/** The deployment of an environment's revision, or undefined. */
export async function deploymentOfRevision(
  db: Kysely<Database>,
  environmentId: string,
  revision: number,
): Promise<string | undefined> {
  const d = await db
    .selectFrom("deployments")
    .select("id")
    .where("environment_id", "=", environmentId)
    .where("revision", "=", revision)
    .executeTakeFirst();
  return d?.id;
}

/** Whether a region is the environment's now, or has events of it (a region it left). */
export async function eventRegionKnown(db: Kysely<Database>, environmentId: string, region: string): Promise<boolean> {
  const now = await db
    .selectFrom("environment_regions")
    .select("region")
    .where("environment_id", "=", environmentId)
    .where("region", "=", region)
    .executeTakeFirst();
  if (now) return true;
  const seen = await db
    .selectFrom("instance_events")
    .select("region")
    .where("environment_id", "=", environmentId)
    .where("region", "=", region)
    .executeTakeFirst();
  return seen !== undefined;
}
