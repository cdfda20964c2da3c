// Scheduled jobs of an environment (JobService; tables jobs and job_status): created or replaced
// by name, desired in every region of the environment (./environment-objects.ts renders each
// region's CronJob from the revision that region runs), deleted from every region; and what
// agents report of their last runs.
import type { Store } from "../db/store.js";
import { DomainError, notFound } from "../errors.js";
import type { StoredJobSpec } from "../validate/types.js";
import type { WriteTx } from "../db/outbox.js";
import { jobPayloads } from "../payloads/job.js";
import type { EnvironmentRef } from "../validate/types.js";
import { MAX_JOBS_PER_ENVIRONMENT, refuseBeyondLimit, syncEnvironmentObjects } from "./environment-objects.js";
import { newId, objectK8sName, randomChars } from "./ids.js";
import { findEnvironment, type EnvironmentContext } from "./tenancy.js";

/** Creates or replaces the environment's job of that name; returns its id. */
export async function putJob(store: Store, ref: EnvironmentRef, spec: StoredJobSpec): Promise<string> {
  return store.write(async (tx) => putJobIn(tx, await findEnvironment(tx.trx, ref), spec));
}

/** putJob as a step of the caller's transaction. */
export async function putJobIn(tx: WriteTx, env: EnvironmentContext, spec: StoredJobSpec): Promise<string> {
  const existing = await tx.trx
    .selectFrom("jobs")
    .selectAll()
    .where("environment_id", "=", env.environment.id)
    .where("name", "=", spec.name)
    .executeTakeFirst();
  let jobId: string;
  if (existing) {
    jobId = existing.id;
    await tx.trx
      .updateTable("jobs")
      .set({ spec: JSON.stringify(spec), updated_at: tx.now })
      .where("id", "=", existing.id)
      .execute();
  } else {
    await refuseBeyondLimit(tx, "jobs", env.environment.id, MAX_JOBS_PER_ENVIRONMENT, "spec.name", "jobs");
    jobId = newId("job");
    await tx.trx
      .insertInto("jobs")
      .values({
        id: jobId,
        workspace_id: env.workspace.id,
        project_id: env.project.id,
        environment_id: env.environment.id,
        name: spec.name,
        // CronJob names are at most 52 characters (the Jobs it makes append 11).
        k8s_name: objectK8sName(
          env.project.slug.slice(0, 14),
          env.environment.slug.slice(0, 14),
          `${spec.name.slice(0, 12)}-${randomChars(6)}`,
          "job-",
        )
          .slice(0, 52)
          .replace(/-+$/, ""),
        spec: JSON.stringify(spec),
        created_at: tx.now,
        updated_at: tx.now,
      })
      .execute();
  }
  await syncEnvironmentObjects(tx, env.environment, env.workspace);
  return jobId;
}

export async function deleteJob(store: Store, ref: EnvironmentRef, name: string): Promise<void> {
  await store.write(async (tx) => deleteJobIn(tx, await findEnvironment(tx.trx, ref), name));
}

/** deleteJob as a step of the caller's transaction. */
export async function deleteJobIn(tx: WriteTx, env: EnvironmentContext, name: string): Promise<void> {
  const job = await tx.trx
    .selectFrom("jobs")
    .select("id")
    .where("environment_id", "=", env.environment.id)
    .where("name", "=", name)
    .executeTakeFirst();
  if (!job) throw notFound(`job "${name}" of environment "${env.environment.slug}"`);
  await dropJobs(tx, [job.id]);
  await syncEnvironmentObjects(tx, env.environment, env.workspace);
}

async function dropJobs(tx: WriteTx, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await tx.trx
    .deleteFrom("job_status")
    .where("job_id", "in", [...ids])
    .execute();
  await tx.trx
    .deleteFrom("jobs")
    .where("id", "in", [...ids])
    .execute();
}

/** Deletes an environment's jobs (the end of its deletion). */
export async function purgeJobs(tx: WriteTx, environmentId: string): Promise<void> {
  const ids = (await tx.trx.selectFrom("jobs").select("id").where("environment_id", "=", environmentId).execute()).map(
    (j) => j.id,
  );
  await dropJobs(tx, ids);
}

// ---------------------------------------------------------------- reports

export interface ReportedRun {
  k8sName: string;
  startedAt: number;
  finishedAt: number;
  result: "running" | "succeeded" | "failed" | "unknown";
}

/** A validated report of a job in a region (../kinds/job.ts). `id` may be empty: the agent then names it by `k8sName`. */
export type JobReport =
  | { type: "update"; id: string; k8sName: string; runs: ReportedRun[]; lastSchedule: number }
  | { type: "delete"; id: string; k8sName: string }
  | { type: "rejected"; id: string; k8sName: string; reason: string };

export async function recordJobReport(store: Store, region: string, report: JobReport): Promise<void> {
  await store.write(async (tx) => {
    const q = tx.trx.selectFrom("jobs").select(["id", "environment_id"]);
    const job = await (
      report.id !== "" ? q.where("id", "=", report.id) : q.where("k8s_name", "=", report.k8sName)
    ).executeTakeFirst();
    if (!job) {
      if (report.type === "delete") return;
      throw notFound(`job "${report.id || report.k8sName}"`);
    }
    if (report.type === "delete") {
      await tx.trx.deleteFrom("job_status").where("job_id", "=", job.id).where("region", "=", region).execute();
      return;
    }
    const desired = await tx.trx
      .selectFrom("desired_objects")
      .select("region")
      .where("kind", "=", jobPayloads.name)
      .where("object_id", "=", job.id)
      .where("region", "=", region)
      .executeTakeFirst();
    if (!desired) throw new DomainError("permission_denied", `job ${job.id} is not desired in region ${region}`);
    const values =
      report.type === "update"
        ? {
            runs: JSON.stringify(report.runs),
            last_schedule: report.lastSchedule,
            rejected_reason: null,
            reported_at: tx.now,
          }
        : { rejected_reason: report.reason, reported_at: tx.now };
    await tx.trx
      .insertInto("job_status")
      .values({ job_id: job.id, region, runs: "[]", last_schedule: 0, ...values })
      .onConflict((oc) => oc.columns(["job_id", "region"]).doUpdateSet(values))
      .execute();
  });
}
