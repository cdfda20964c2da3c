// A StreamLogs call's history part: the kept lines it asks for, as entries in time order, and the
// seam with the live part that follows. The seam is each instance's last kept line when the call
// began: kept lines up to it are sent from the store, live lines after it from the agents, and
// the live read starts early enough for every running instance (liveSince), so at the seam no
// line is missing and none comes twice.
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.js";
import type { LogEntry } from "../../gen/krane/ctrl/v1/logs_pb.js";
import { msToNs } from "../../contracts/logs.js";
import type { LogQuery } from "../validate/logs.js";
import { searchHistory, storedCursors, type LineMask } from "./history.js";
import { logStream } from "./chunks.js";
import { sourceKey, type InstanceCursors } from "./seam.js";
import type { LogTarget } from "./target.js";
import type { Grep } from "./grep.js";

export interface HistoryRead {
  readonly seam: InstanceCursors;
  /** Where the live read starts (unix ns). */
  readonly liveSinceNs: bigint;
  readonly pages: AsyncGenerator<LogEntry[]>;
}

export async function readHistory(
  db: Kysely<Database>,
  target: LogTarget,
  q: LogQuery,
  grep: Grep | undefined,
  mask: LineMask,
): Promise<HistoryRead> {
  const sinceNs = msToNs(q.since ?? 0);
  const seam = await storedCursors(db, target.environmentId);
  let running = db
    .selectFrom("instances")
    .innerJoin("deployments", "deployments.id", "instances.deployment_id")
    .select(["instances.region", "instances.k8s_name"])
    .where("deployments.environment_id", "=", target.environmentId);
  if (target.deploymentIds.length > 0) running = running.where("deployments.id", "in", target.deploymentIds);
  if (q.instance !== undefined) running = running.where("instances.k8s_name", "=", q.instance);
  const live = (await running.execute())
    .filter((r) => target.regions.includes(r.region))
    .map((r) => sourceKey(r.region, r.k8s_name));
  return {
    seam,
    liveSinceNs: seam.liveSince(live, sinceNs),
    pages: entries(db, target, q, seam, sinceNs, grep, mask),
  };
}

async function* entries(
  db: Kysely<Database>,
  target: LogTarget,
  q: LogQuery,
  seam: InstanceCursors,
  sinceNs: bigint,
  grep: Grep | undefined,
  mask: LineMask,
): AsyncGenerator<LogEntry[]> {
  for await (const page of searchHistory(db, {
    environmentId: target.environmentId,
    sinceNs,
    deploymentIds: target.deploymentIds,
    regions: target.regions,
    instance: q.instance,
    stream: q.stream,
    matcher: grep,
    mask,
    upTo: seam,
  }))
    yield page.map((l): LogEntry => ({
      $typeName: "krane.ctrl.v1.LogEntry",
      timeUnixNano: l.ns,
      region: l.region,
      instance: l.instance,
      revision: BigInt(l.revision),
      deploymentId: l.deploymentId,
      entry: { case: "line", value: l.line },
      stream: logStream(l.stream),
    }));
}
