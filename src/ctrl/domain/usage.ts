// The instances' usage (CPU, memory, restarts per pod and minute) each region's agent reports
// (ClusterService.ReportUsage), kept in the metrics history (../history/store.ts).
//
// Who may report what: an agent's token is bound to a region; it may report only for
// environments that run in that region, and only revisions of those environments, so a
// compromised agent cannot write another region's or workspace's figures. Stores nothing on a
// refusal. Per instance and minute the report with the most readings is kept: a retry, a repeat
// or a report arriving late changes nothing.
import type { Store } from "../db/store.js";
import { DomainError } from "../errors.js";
import { setUsageMinutes } from "../history/store.js";
import { reportScope } from "./report-scope.js";
import { emptySums, type Point } from "../history/sums.js";
import type { UsageReport } from "../validate/usage.js";

function permissionDenied(field: string, problem: string): DomainError {
  return new DomainError("permission_denied", `${field}: ${problem}`, field);
}

/** Stores a validated report of `region`'s agent; returns how many instance-minutes it kept. */
export async function recordUsage(store: Store, region: string, report: UsageReport): Promise<number> {
  const entries = report.minutes.flatMap((m, i) => m.instances.map((e, j) => ({ e, i, j, minuteMs: m.minuteMs })));
  if (entries.length === 0) return 0;
  const { inRegion, envOf } = await reportScope(
    store,
    region,
    "environment_regions",
    entries.map(({ e }) => e.environmentId),
    entries.map(({ e }) => e.deploymentId),
  );
  for (const { e, i, j } of entries) {
    const f = `minutes[${i}].instances[${j}]`;
    if (!inRegion.has(e.environmentId))
      throw permissionDenied(`${f}.environment_id`, `environment ${e.environmentId} does not run in region ${region}`);
    if (envOf.get(e.deploymentId) !== e.environmentId)
      throw permissionDenied(
        `${f}.deployment_id`,
        `${e.deploymentId} is not a revision of environment ${e.environmentId}`,
      );
  }
  const points = entries.map(({ e, minuteMs }): Point => {
    const sums = emptySums();
    sums.cpuMillicoresSum = e.cpuMillicoresSum;
    sums.memoryBytesSum = e.memoryBytesSum;
    sums.usageSamples = e.readings;
    sums.restarts = e.restarts;
    return {
      environmentId: e.environmentId,
      deploymentId: e.deploymentId,
      region,
      instance: e.instance,
      atMs: minuteMs,
      sums,
    };
  });
  return store.db.transaction().execute((trx) => setUsageMinutes(trx, points));
}
