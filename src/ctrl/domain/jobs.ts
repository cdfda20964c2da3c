// Scheduled jobs of an environment (JobService): created or replaced by name, desired in every
// region of the environment (./environment-objects.ts renders each region's CronJob from the
// revision that region runs), deleted from every region.
import type { Kysely } from "kysely";
import type { Database, JobRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { notFound } from "../errors.js";
import type { StoredJobSpec } from "../kinds/job.js";
import type { EnvironmentRef } from "../validate/types.js";
import { MAX_JOBS_PER_ENVIRONMENT, refuseBeyondLimit, syncEnvironmentObjects } from "./environment-objects.js";
import { newId, objectK8sName, randomChars } from "./ids.js";
import { findEnvironment, type EnvironmentContext } from "./tenancy.js";

type Reader = Kysely<Database>;

export interface JobView {
  environment: EnvironmentContext;
  job: JobRow;
  status: {
    region: string;
    runs: unknown[];
    lastSchedule: number;
    rejectedReason: string | null;
    reportedAt: number;
  }[];
}

export async function putJob(store: Store, ref: EnvironmentRef, spec: StoredJobSpec): Promise<JobView> {
  const id = await store.write(async (tx) => {
    const env = await findEnvironment(tx.trx, ref);
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
  });
  return jobView(store.db, ref, id);
}

async function jobView(db: Reader, ref: EnvironmentRef, id: string): Promise<JobView> {
  const environment = await findEnvironment(db, ref);
  const job = await db.selectFrom("jobs").selectAll().where("id", "=", id).executeTakeFirstOrThrow();
  return { environment, job, status: await statusOf(db, id) };
}

async function statusOf(db: Reader, jobId: string): Promise<JobView["status"]> {
  const rows = await db.selectFrom("job_status").selectAll().where("job_id", "=", jobId).orderBy("region").execute();
  return rows.map((s) => ({
    region: s.region,
    runs: JSON.parse(s.runs) as unknown[],
    lastSchedule: Number(s.last_schedule),
    rejectedReason: s.rejected_reason,
    reportedAt: Number(s.reported_at),
  }));
}

export async function listJobs(db: Reader, ref: EnvironmentRef): Promise<JobView[]> {
  const environment = await findEnvironment(db, ref);
  const jobs = await db
    .selectFrom("jobs")
    .selectAll()
    .where("environment_id", "=", environment.environment.id)
    .orderBy("name")
    .execute();
  const out: JobView[] = [];
  for (const job of jobs) out.push({ environment, job, status: await statusOf(db, job.id) });
  return out;
}

export async function deleteJob(store: Store, ref: EnvironmentRef, name: string): Promise<void> {
  await store.write(async (tx) => {
    const env = await findEnvironment(tx.trx, ref);
    const job = await tx.trx
      .selectFrom("jobs")
      .select("id")
      .where("environment_id", "=", env.environment.id)
      .where("name", "=", name)
      .executeTakeFirst();
    if (!job) throw notFound(`job "${name}" of environment "${env.environment.slug}"`);
    await tx.trx.deleteFrom("job_status").where("job_id", "=", job.id).execute();
    await tx.trx.deleteFrom("jobs").where("id", "=", job.id).execute();
    await syncEnvironmentObjects(tx, env.environment, env.workspace);
  });
}
