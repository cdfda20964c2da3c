// The read model of an environment's releases, cron jobs, configuration and secrets: each with
// what the agents reported of it per region; secrets as keys, sources and times, never values.
import type { Kysely } from "kysely";
import type { Database, JobRow, ReleaseRow } from "../db/schema.js";
import { findEnvironment, type EnvironmentContext } from "../domain/tenancy.js";
import { notFound } from "../errors.js";
import type { EnvironmentRef } from "../validate/types.js";

type Reader = Kysely<Database>;

export interface ReleaseView {
  environment: EnvironmentContext;
  release: ReleaseRow;
  objects: { id: string; group: string; version: string; kind: string; name: string }[];
  status: {
    region: string;
    observedVersion: number;
    rejectedReason: string | null;
    objects: unknown[];
    reportedAt: number;
  }[];
}

export async function getRelease(db: Reader, ref: EnvironmentRef, name: string): Promise<ReleaseView> {
  const environment = await findEnvironment(db, ref);
  const release = await db
    .selectFrom("releases")
    .selectAll()
    .where("environment_id", "=", environment.environment.id)
    .where("name", "=", name)
    .executeTakeFirst();
  if (!release) throw notFound(`release "${name}" of environment "${environment.environment.slug}"`);
  return viewOf(db, environment, release);
}

async function viewOf(db: Reader, environment: EnvironmentContext, release: ReleaseRow): Promise<ReleaseView> {
  const objects = await db
    .selectFrom("release_objects")
    .select(["object_id", "api_group", "api_version", "kind", "name"])
    .where("release_id", "=", release.id)
    .orderBy("seq")
    .execute();
  const status = await db
    .selectFrom("release_status")
    .selectAll()
    .where("release_id", "=", release.id)
    .orderBy("region")
    .execute();
  return {
    environment,
    release,
    objects: objects.map((o) => ({
      id: o.object_id,
      group: o.api_group,
      version: o.api_version,
      kind: o.kind,
      name: o.name,
    })),
    status: status.map((s) => ({
      region: s.region,
      observedVersion: Number(s.observed_version),
      rejectedReason: s.rejected_reason,
      objects: JSON.parse(s.objects) as unknown[],
      reportedAt: Number(s.reported_at),
    })),
  };
}

export async function listReleases(db: Reader, ref: EnvironmentRef): Promise<ReleaseView[]> {
  const environment = await findEnvironment(db, ref);
  const releases = await db
    .selectFrom("releases")
    .selectAll()
    .where("environment_id", "=", environment.environment.id)
    .orderBy("name")
    .execute();
  const out: ReleaseView[] = [];
  for (const r of releases) out.push(await viewOf(db, environment, r));
  return out;
}

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

export async function jobView(db: Reader, ref: EnvironmentRef, id: string): Promise<JobView> {
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

export async function listConfig(
  db: Reader,
  ref: EnvironmentRef,
): Promise<{ key: string; value: string; updated_at: number }[]> {
  const env = await findEnvironment(db, ref);
  return db
    .selectFrom("environment_config")
    .select(["key", "value", "updated_at"])
    .where("environment_id", "=", env.environment.id)
    .orderBy("key")
    .execute();
}

export interface SecretListing {
  key: string;
  source: string;
  externalPath: string;
  updatedAt: number;
}

/** Keys, sources and times: never a value, never a ciphertext. */
export async function listSecrets(db: Reader, ref: EnvironmentRef): Promise<SecretListing[]> {
  const env = await findEnvironment(db, ref);
  const rows = await db
    .selectFrom("environment_secrets")
    .select(["key", "source", "external_path", "updated_at"])
    .where("environment_id", "=", env.environment.id)
    .orderBy("key")
    .execute();
  return rows.map((r) => ({
    key: r.key,
    source: r.source,
    externalPath: r.external_path ?? "",
    updatedAt: Number(r.updated_at),
  }));
}
