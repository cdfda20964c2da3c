// The environment-wide streamed objects — releases and cron jobs — follow the
// environment: desired in each of its regions, re-rendered when a region's running revision
// changes (a job runs the image and settings of the revision its region runs), put into a region
// the environment joins and removed from one it leaves. `syncEnvironmentObjects` does all of it
// from the rows, idempotently; the callers are the writes that change any of that (releases,
// jobs, environment updates, rollout passes that retarget).
import type { WriteTx } from "../db/outbox.js";
import { DomainError } from "../errors.js";
import type { DeploymentRow, EnvironmentRow, WorkspaceRow } from "../db/schema.js";
import { deletePayload } from "../payloads/delete-payload.js";
import { encodeApplyJob, jobPayloads } from "../payloads/job.js";
import { encodeApplyRelease, releasePayloads } from "../payloads/release.js";
import type { Limits } from "../../contracts/quotas.js";
import { limitsOf } from "./quotas.js";
import { pullSecretOf } from "./registries.js";

/** The revision each region runs (its rollout target), else the environment's newest. */
async function revisionsByRegion(
  tx: WriteTx,
  environmentId: string,
): Promise<{ byRegion: Map<string, DeploymentRow>; newest: DeploymentRow | undefined }> {
  const deployments = await tx.trx
    .selectFrom("deployments")
    .selectAll()
    .where("environment_id", "=", environmentId)
    .execute();
  const byId = new Map(deployments.map((d) => [d.id, d]));
  let newest: DeploymentRow | undefined;
  for (const d of deployments) if (!newest || Number(d.revision) > Number(newest.revision)) newest = d;
  const byRegion = new Map<string, DeploymentRow>();
  for (const r of await tx.trx
    .selectFrom("rollouts")
    .select(["region", "target_deployment_id"])
    .where("environment_id", "=", environmentId)
    .execute()) {
    const d = r.target_deployment_id === null ? undefined : byId.get(r.target_deployment_id);
    if (d) byRegion.set(r.region, d);
  }
  return { byRegion, newest };
}

/**
 * Puts the environment's releases and jobs into each of its regions (a put whose payload did not
 * change is skipped) and removes them from regions it left. Returns how many changes it streamed.
 */
export async function syncEnvironmentObjects(
  tx: WriteTx,
  environment: EnvironmentRow,
  workspace?: WorkspaceRow,
): Promise<number> {
  const envId = environment.id;
  const ws =
    workspace ??
    (await tx.trx
      .selectFrom("workspaces")
      .selectAll()
      .where("id", "=", environment.workspace_id)
      .executeTakeFirstOrThrow());
  const regions = (
    await tx.trx.selectFrom("environment_regions").select("region").where("environment_id", "=", envId).execute()
  ).map((r) => r.region);
  const current = await tx.trx
    .selectFrom("desired_objects")
    .select(["region", "kind", "object_id", "payload"])
    .where("environment_id", "=", envId)
    .where("kind", "in", [releasePayloads.name, jobPayloads.name])
    .execute();
  const stored = new Map(current.map((c) => [`${c.kind}/${c.object_id}/${c.region}`, c.payload]));
  const wanted = new Set<string>();
  let changes = 0;
  // The workspace's quota as it is now: the agent backs it in the namespace for the pods of
  // releases and jobs too; a change re-renders them (./workload-refresh.ts).
  let quota: Limits | undefined;
  const quotaNow = async (): Promise<Limits> => (quota ??= (await limitsOf(tx.trx, ws.id)).limits);
  const put = async (kind: string, id: string, region: string, payload: Uint8Array): Promise<void> => {
    const key = `${kind}/${id}/${region}`;
    wanted.add(key);
    const before = stored.get(key);
    if (before && Buffer.compare(Buffer.from(before), Buffer.from(payload)) === 0) return;
    await tx.putDesired(region, kind, id, payload, null, envId);
    changes++;
  };

  const releases = await tx.trx.selectFrom("releases").selectAll().where("environment_id", "=", envId).execute();
  if (releases.length > 0) await quotaNow();
  for (const release of releases) {
    const objects = await tx.trx
      .selectFrom("release_objects")
      .selectAll()
      .where("release_id", "=", release.id)
      .execute();
    const kindsEver = await tx.trx
      .selectFrom("release_kinds")
      .selectAll()
      .where("release_id", "=", release.id)
      .execute();
    for (const region of regions)
      await put(
        releasePayloads.name,
        release.id,
        region,
        encodeApplyRelease({ workspace: ws, environment, release, objects, kindsEver, quota }, region),
      );
  }
  const jobs = await tx.trx.selectFrom("jobs").selectAll().where("environment_id", "=", envId).execute();
  if (jobs.length > 0) {
    await quotaNow();
    const { byRegion, newest } = await revisionsByRegion(tx, envId);
    const pullSecret = await pullSecretOf(tx.trx, ws.id);
    for (const job of jobs) {
      for (const region of regions)
        await put(
          jobPayloads.name,
          job.id,
          region,
          encodeApplyJob(
            { workspace: ws, environment, job, revision: byRegion.get(region) ?? newest, pullSecret, quota },
            region,
          ),
        );
    }
  }
  // Whatever is stored but no longer wanted (a region left, a release or job deleted): its
  // Delete is made from the stored Apply (the kind's generic delete payload).
  for (const c of current) {
    if (wanted.has(`${c.kind}/${c.object_id}/${c.region}`)) continue;
    await tx.removeDesired(
      c.region,
      c.kind,
      c.object_id,
      deletePayload(c.kind === releasePayloads.name ? releasePayloads : jobPayloads, c.payload),
    );
    changes++;
  }
  return changes;
}

/** At most this many releases per environment (so a list of them is one bounded answer). */
export const MAX_RELEASES_PER_ENVIRONMENT = 100;
/** At most this many cron jobs per environment (likewise). */
export const MAX_JOBS_PER_ENVIRONMENT = 100;

/** Refuses a new release or job once the environment holds `max` of them. */
export async function refuseBeyondLimit(
  tx: WriteTx,
  table: "releases" | "jobs",
  environmentId: string,
  max: number,
  field: string,
  what: string,
): Promise<void> {
  const row = await tx.trx
    .selectFrom(table)
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("environment_id", "=", environmentId)
    .executeTakeFirst();
  if (Number(row?.n ?? 0) >= max)
    throw new DomainError(
      "failed_precondition",
      `an environment holds at most ${max} ${what}; delete one first`,
      field,
    );
}
