// The embedded log history: lines kept in ctrl's own database (table log_lines), written by the
// archiver (archiver.ts), read by StreamLogs' history (service.ts), pruned by the archiver's
// upkeep. A line is keyed by its environment, region, instance and the kubelet's time stamp, and
// written with "on conflict do nothing", so a line relayed twice is stored once, whichever ctrl
// replica stores it. Times are 19-digit text (nsText): unix ns do not fit a double.
//
// The embedded store suits a small installation (about a hundred lines a second in all); one that
// outgrows it ships logs to an engine built for them (VictoriaLogs, Loki) instead: see
// docs/operations.md "Log history".
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.js";
import type { Grep } from "./grep.js";
import { InstanceCursors, sourceKey, type StreamName } from "./seam.js";

type Db = Kysely<Database>;

export const DAY_MS = 86_400_000;
/** How long lines are kept when a workspace set nothing. */
export const DEFAULT_LOG_RETENTION_MS = 7 * DAY_MS;
/** Lines kept per environment at most (the oldest go first past it). */
export const DEFAULT_MAX_LINES_PER_ENVIRONMENT = 2_000_000;

export interface StoredLine {
  environmentId: string;
  workspaceId: string;
  region: string;
  instance: string;
  ns: bigint;
  deploymentId: string;
  revision: number;
  /** "stdout", "stderr", or "" (not known: stdout and stderr merged, as pods/log gives them without split streams). */
  stream: StreamName;
  line: string;
}

/** Unix ns as the 19 digits it is stored as. */
export function nsText(ns: bigint): string {
  return (ns < 0n ? 0n : ns).toString().padStart(19, "0");
}

const INSERT_ROWS = 500;

/** Stores lines; one already stored (same instance and time) is left as it is. Answers how many were new. */
export async function storeLines(db: Db, lines: readonly StoredLine[]): Promise<number> {
  let stored = 0;
  for (let i = 0; i < lines.length; i += INSERT_ROWS) {
    const rows = lines.slice(i, i + INSERT_ROWS).map((l) => ({
      environment_id: l.environmentId,
      region: l.region,
      instance: l.instance,
      time_ns: nsText(l.ns),
      workspace_id: l.workspaceId,
      deployment_id: l.deploymentId,
      revision: l.revision,
      stream: l.stream,
      line: l.line,
    }));
    const [r] = await db
      .insertInto("log_lines")
      .values(rows)
      .onConflict((oc) => oc.columns(["environment_id", "region", "instance", "time_ns"]).doNothing())
      .execute();
    stored += Number(r?.numInsertedOrUpdatedRows ?? 0);
  }
  return stored;
}

/** The time of each instance's last stored line of each stream (region/instance → ns) in an environment (optionally one region). */
export async function storedCursors(db: Db, environmentId: string, region?: string): Promise<InstanceCursors> {
  let q = db
    .selectFrom("log_lines")
    .select(["region", "instance", "stream", (eb) => eb.fn.max("time_ns").as("last")])
    .where("environment_id", "=", environmentId)
    .groupBy(["region", "instance", "stream"]);
  if (region !== undefined) q = q.where("region", "=", region);
  const rows = await q.execute();
  return new InstanceCursors(
    rows.map((r) => [sourceKey(r.region, r.instance), BigInt(r.last), keptStream(r.stream)] as const),
  );
}

function keptStream(s: string): StreamName {
  return s === "stdout" || s === "stderr" ? s : "";
}

/** Masks lines before they are matched and sent (secrets.ts's EnvironmentSecrets). */
export interface LineMask {
  learn(deploymentIds: Iterable<string>): Promise<void>;
  mask(line: string): string;
}

export interface HistoryQuery {
  environmentId: string;
  sinceNs: bigint;
  /** Only these revisions' deployments (empty: all). */
  deploymentIds: readonly string[];
  regions: readonly string[];
  instance?: string;
  /** Only lines of this stream (undefined: all). */
  stream?: StreamName;
  matcher?: Grep;
  /** Applied to every line before the matcher (lines kept before a secret was known are masked too). */
  mask?: LineMask;
  /** Only lines up to each instance's cursor (the seam); an instance without one gives none. */
  upTo: InstanceCursors;
}

export interface HistoryLine {
  ns: bigint;
  region: string;
  instance: string;
  deploymentId: string;
  revision: number;
  stream: StreamName;
  line: string;
}

const PAGE = 5_000;

/** The stored lines a query asks for, in time order, a page at a time. */
export async function* searchHistory(db: Db, q: HistoryQuery): AsyncGenerator<HistoryLine[]> {
  if (q.regions.length === 0 || q.upTo.size === 0) return;
  // Keyset pagination on the primary key's order within the environment.
  let after: { t: string; region: string; instance: string } | undefined;
  for (;;) {
    let s = db
      .selectFrom("log_lines")
      .select(["time_ns", "region", "instance", "deployment_id", "revision", "stream", "line"])
      .where("environment_id", "=", q.environmentId)
      .where("time_ns", ">=", nsText(q.sinceNs))
      .where("region", "in", [...q.regions]);
    if (q.deploymentIds.length > 0) s = s.where("deployment_id", "in", [...q.deploymentIds]);
    if (q.instance !== undefined) s = s.where("instance", "=", q.instance);
    if (q.stream !== undefined) s = s.where("stream", "=", q.stream);
    if (after) {
      const a = after;
      // The plain bound first: the index on (environment_id, time_ns) starts each page at the
      // cursor with it, where the `or` alone left every page to scan from the range's start
      // (`npm run bench -- observe`: a grep over 864,000 lines, 33 s → 8.6 s).
      s = s
        .where("time_ns", ">=", a.t)
        .where((eb) =>
          eb.or([
            eb("time_ns", ">", a.t),
            eb.and([eb("time_ns", "=", a.t), eb("region", ">", a.region)]),
            eb.and([eb("time_ns", "=", a.t), eb("region", "=", a.region), eb("instance", ">", a.instance)]),
          ]),
        );
    }
    const rows = await s.orderBy("time_ns").orderBy("region").orderBy("instance").limit(PAGE).execute();
    let out: HistoryLine[] = [];
    for (const r of rows) {
      const ns = BigInt(r.time_ns);
      const stream = keptStream(r.stream);
      const last = q.upTo.get(sourceKey(r.region, r.instance), stream);
      if (last === undefined || ns > last) continue;
      out.push({
        ns,
        region: r.region,
        instance: r.instance,
        deploymentId: r.deployment_id,
        revision: Number(r.revision),
        stream,
        line: r.line,
      });
    }
    if (q.mask && out.length > 0) {
      await q.mask.learn(out.map((l) => l.deploymentId));
      for (const l of out) l.line = q.mask.mask(l.line);
    }
    if (q.matcher && out.length > 0) {
      const keep = await q.matcher.keep(out.map((l) => l.line));
      out = out.filter((_, i) => keep[i]);
    }
    if (out.length > 0) yield out;
    const last = rows[rows.length - 1];
    if (rows.length < PAGE || !last) return;
    after = { t: last.time_ns, region: last.region, instance: last.instance };
  }
}

/** A workspace's retention (ms): its own, or the default. */
export async function logRetention(db: Db, workspaceId: string): Promise<{ ms: number; own: boolean }> {
  const row = await db
    .selectFrom("log_retention")
    .select("retention_ms")
    .where("workspace_id", "=", workspaceId)
    .executeTakeFirst();
  return row ? { ms: Number(row.retention_ms), own: true } : { ms: DEFAULT_LOG_RETENTION_MS, own: false };
}

/** Sets a workspace's retention (ms), or back to the default (undefined). */
export async function setLogRetention(db: Db, workspaceId: string, ms: number | undefined, now: number): Promise<void> {
  if (ms === undefined) {
    await db.deleteFrom("log_retention").where("workspace_id", "=", workspaceId).execute();
    return;
  }
  await db
    .insertInto("log_retention")
    .values({ workspace_id: workspaceId, retention_ms: ms, updated_at: now })
    .onConflict((oc) => oc.column("workspace_id").doUpdateSet({ retention_ms: ms, updated_at: now }))
    .execute();
}

/** The oldest time kept (unix ns) of a workspace whose retention is `retentionMs`. */
export function retentionCutoffNs(now: number, retentionMs: number): bigint {
  return BigInt(Math.max(0, now - retentionMs)) * 1_000_000n;
}

export interface PruneResult {
  /** Lines past their workspace's retention. */
  expired: number;
  /** Lines past their environment's bound (the oldest). */
  overflow: number;
}

/** Deletes lines past their workspace's retention, then the oldest of environments past `maxLines`. */
export async function pruneLogs(
  db: Db,
  now: number,
  maxLines = DEFAULT_MAX_LINES_PER_ENVIRONMENT,
): Promise<PruneResult> {
  const result: PruneResult = { expired: 0, overflow: 0 };
  const workspaces = await db.selectFrom("log_lines").select("workspace_id").distinct().execute();
  const own = new Map(
    (await db.selectFrom("log_retention").select(["workspace_id", "retention_ms"]).execute()).map((r) => [
      r.workspace_id,
      Number(r.retention_ms),
    ]),
  );
  for (const { workspace_id } of workspaces) {
    const cutoff = retentionCutoffNs(now, own.get(workspace_id) ?? DEFAULT_LOG_RETENTION_MS);
    const r = await db
      .deleteFrom("log_lines")
      .where("workspace_id", "=", workspace_id)
      .where("time_ns", "<", nsText(cutoff))
      .executeTakeFirst();
    result.expired += Number(r.numDeletedRows);
  }
  const big = await db
    .selectFrom("log_lines")
    .select(["environment_id", (eb) => eb.fn.countAll<number>().as("n")])
    .groupBy("environment_id")
    .having((eb) => eb.fn.countAll(), ">", maxLines)
    .execute();
  for (const { environment_id } of big) {
    // The time of the newest line past the bound: it and everything before it go.
    const edge = await db
      .selectFrom("log_lines")
      .select("time_ns")
      .where("environment_id", "=", environment_id)
      .orderBy("time_ns", "desc")
      .offset(maxLines)
      .limit(1)
      .executeTakeFirst();
    if (!edge) continue;
    const r = await db
      .deleteFrom("log_lines")
      .where("environment_id", "=", environment_id)
      .where("time_ns", "<=", edge.time_ns)
      .executeTakeFirst();
    result.overflow += Number(r.numDeletedRows);
  }
  return result;
}
