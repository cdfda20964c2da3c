// Rollout analysis's measurements: the per-revision increments each region's
// agent reports from its sentinels (ClusterService.ReportMeasurements), stored one row per
// (environment, revision, region, window), and added up over regions for the progressive
// rollout engine (MeasurementSource, src/contracts/analysis.ts).
//
// Who may report what: an agent's token is bound to a region; it may report only for
// environments that have a sentinel in that region, and only revisions of those environments, so
// a compromised agent cannot poison another region's or workspace's analysis. A report ctrl
// already has (same region, revision and window: a retry after a lost answer) counts once.
// Each new row is also added to the metrics history's minute (../history/store.ts).
// Retention: rows whose window ended more than MEASUREMENT_RETENTION_MS ago are pruned (at most
// once a minute, by the report path), and an environment's rows go with its purge (deletion.ts).
import { LATENCY_BUCKETS_MS, type MeasurementSource, type RevisionSample } from "../../contracts/analysis.js";
import type { WriteTx } from "../db/outbox.js";
import type { MeasurementsTable } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { DomainError } from "../errors.js";
import type { MeasurementEntry, MeasurementReport } from "../validate/measurements.js";
import { addInstanceMinutes, addMinutes } from "../history/store.js";
import { reportScope } from "./report-scope.js";
import { MINUTE_MS, emptySums, startOf, type Point } from "../history/sums.js";

/** How long measurements are kept (analysis looks at minutes, not hours). */
export const MEASUREMENT_RETENTION_MS = 3_600_000;
const PRUNE_EVERY_MS = 60_000;
const CHUNK = 200;
const SLOTS = LATENCY_BUCKETS_MS.length + 1;

function permissionDenied(field: string, problem: string): DomainError {
  return new DomainError("permission_denied", `${field}: ${problem}`, field);
}

/** When pruning last ran, per store. */
const lastPrune = new WeakMap<Store, number>();

/**
 * Stores a validated report of `region`'s agent. Refuses (permission_denied, naming the entry)
 * environments without a sentinel in the region and revisions of other environments; stores
 * nothing then. Returns how many rows were new.
 */
export async function recordMeasurements(store: Store, region: string, report: MeasurementReport): Promise<number> {
  const entries = report.entries;
  if (entries.length === 0) return 0;
  const all = [...entries, ...report.instances];
  const envs = [...new Set(all.map((e) => e.environmentId))];
  const { inRegion: withSentinel, envOf } = await reportScope(
    store,
    region,
    "sentinels",
    envs,
    all.map((e) => e.deploymentId),
  );
  const check = (list: string, e: MeasurementEntry, i: number): void => {
    if (!withSentinel.has(e.environmentId))
      throw permissionDenied(
        `${list}[${i}].environment_id`,
        `environment ${e.environmentId} has no sentinel in region ${region}`,
      );
    if (envOf.get(e.deploymentId) !== e.environmentId)
      throw permissionDenied(
        `${list}[${i}].deployment_id`,
        `${e.deploymentId} is not a revision of environment ${e.environmentId}`,
      );
  };
  entries.forEach((e, i) => check("revisions", e, i));
  report.instances.forEach((e, i) => check("instances", e, i));
  const now = store.clock();
  let stored = 0;
  const newRevisions = new Set<string>();
  await store.db.transaction().execute(async (trx) => {
    for (let i = 0; i < entries.length; i += CHUNK) {
      const rows = entries.slice(i, i + CHUNK).map((e) => ({
        environment_id: e.environmentId,
        deployment_id: e.deploymentId,
        region,
        from_ms: report.fromMs,
        to_ms: report.toMs,
        r2xx: e.classes[0],
        r3xx: e.classes[1],
        r4xx: e.classes[2],
        r5xx: e.classes[3],
        latency: JSON.stringify(e.latency),
        received_at: now,
      }));
      const fresh = await trx
        .insertInto("measurements")
        .values(rows)
        .onConflict((oc) => oc.columns(["environment_id", "deployment_id", "region", "from_ms", "to_ms"]).doNothing())
        .returning(["environment_id", "deployment_id"])
        .execute();
      stored += fresh.length;
      // Only the rows new to ctrl go into the history: a report sent twice counts once there too.
      for (const f of fresh) newRevisions.add(`${f.environment_id}\n${f.deployment_id}`);
      await addMinutes(
        trx,
        entries
          .slice(i, i + CHUNK)
          .filter((e) => newRevisions.has(`${e.environmentId}\n${e.deploymentId}`))
          .map((e) => measurementPoint(region, report.toMs, e)),
      );
    }
    // An instance's figures count once too: only with its revision's new row.
    await addInstanceMinutes(
      trx,
      report.instances
        .filter((e) => newRevisions.has(`${e.environmentId}\n${e.deploymentId}`))
        .map((e) => measurementPoint(region, report.toMs, e, e.instance)),
    );
  });
  // Charts and analysis verdicts on the environments' pages.
  if (stored > 0) await store.publishChanges(envs.map((e) => `e:${e}`));
  if (now - (lastPrune.get(store) ?? 0) >= PRUNE_EVERY_MS) {
    lastPrune.set(store, now);
    await pruneMeasurements(store, now - MEASUREMENT_RETENTION_MS);
  }
  return stored;
}

/**
 * A report's entry as a point of the metrics history, in the minute its window ended in: the
 * revision's (instance "") or one instance's.
 */
export function measurementPoint(region: string, toMs: number, e: MeasurementEntry, instance = ""): Point {
  const sums = emptySums();
  sums.requests = e.classes.reduce((a, b) => a + b, 0);
  sums.errors = e.classes[3];
  e.latency.forEach((v, i) => (sums.latency[i] = v));
  return {
    environmentId: e.environmentId,
    deploymentId: e.deploymentId,
    region,
    instance,
    atMs: startOf(toMs - 1, MINUTE_MS),
    sums,
  };
}

/** Deletes the rows whose window ended before `beforeMs`; returns how many. */
export async function pruneMeasurements(store: Store, beforeMs: number): Promise<number> {
  const res = await store.db.deleteFrom("measurements").where("to_ms", "<", beforeMs).executeTakeFirst();
  return Number(res.numDeletedRows);
}

/** What the analysis reads of a stored report. */
type WindowRow = Pick<
  MeasurementsTable,
  "region" | "from_ms" | "to_ms" | "r2xx" | "r3xx" | "r4xx" | "r5xx" | "latency"
>;

interface Acc {
  classes: [number, number, number, number];
  latency: number[];
  regions: Set<string>;
  from: number;
  to: number;
}

/** Rows of one revision added up (exported for the unit tests). */
export function addUp(deploymentId: string, rows: readonly WindowRow[]): RevisionSample | undefined {
  if (rows.length === 0) return undefined;
  const a: Acc = {
    classes: [0, 0, 0, 0],
    latency: new Array<number>(SLOTS).fill(0),
    regions: new Set(),
    from: Infinity,
    to: -Infinity,
  };
  for (const r of rows) {
    a.classes[0] += Number(r.r2xx);
    a.classes[1] += Number(r.r3xx);
    a.classes[2] += Number(r.r4xx);
    a.classes[3] += Number(r.r5xx);
    const lat: unknown = JSON.parse(r.latency);
    if (Array.isArray(lat))
      for (let i = 0; i < SLOTS; i++)
        a.latency[i] = (a.latency[i] ?? 0) + (typeof lat[i] === "number" ? (lat[i] as number) : 0);
    a.regions.add(r.region);
    a.from = Math.min(a.from, Number(r.from_ms));
    a.to = Math.max(a.to, Number(r.to_ms));
  }
  const [c2, c3, c4, c5] = a.classes;
  return {
    deploymentId,
    requests: c2 + c3 + c4 + c5,
    byClass: { "2xx": c2, "3xx": c3, "4xx": c4, "5xx": c5 },
    latencyBuckets: a.latency,
    regions: [...a.regions].sort(),
    fromMs: a.from,
    toMs: a.to,
  };
}

/** ctrl's MeasurementSource: the stored reports, added up over regions. */
export class StoredMeasurements implements MeasurementSource {
  constructor(private readonly store: Store) {}

  /**
   * The windows of the given revisions that ended at or after `sinceMs` (a window that began
   * before it counts whole: reports are not split), added up over `regions` (all when absent).
   */
  async samples(
    environmentId: string,
    deploymentIds: readonly string[],
    sinceMs: number,
    regions?: readonly string[],
  ): Promise<Map<string, RevisionSample>> {
    const out = new Map<string, RevisionSample>();
    if (deploymentIds.length === 0 || (regions !== undefined && regions.length === 0)) return out;
    const ids = [...new Set(deploymentIds)];
    const byDep = new Map<string, WindowRow[]>();
    for (let i = 0; i < ids.length; i += 500) {
      let q = this.store.db
        .selectFrom("measurements")
        .select(["deployment_id", "region", "from_ms", "to_ms", "r2xx", "r3xx", "r4xx", "r5xx", "latency"])
        .where("environment_id", "=", environmentId)
        .where("deployment_id", "in", ids.slice(i, i + 500))
        .where("to_ms", ">=", sinceMs);
      if (regions !== undefined) q = q.where("region", "in", [...regions]);
      for (const r of await q.execute()) {
        const list = byDep.get(r.deployment_id);
        if (list) list.push(r);
        else byDep.set(r.deployment_id, [r]);
      }
    }
    for (const [dep, rows] of byDep) {
      const s = addUp(dep, rows);
      if (s) out.set(dep, s);
    }
    return out;
  }
}

/** Deletes an environment's measurements (the end of its deletion). */
export async function purgeMeasurements(tx: WriteTx, environmentId: string): Promise<void> {
  await tx.trx.deleteFrom("measurements").where("environment_id", "=", environmentId).execute();
}
