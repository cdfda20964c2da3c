// Builds from source: uploaded archives (chunks, in order, under the uploader's digest, checked
// when a build names it) and the builds of environments — queued, claimed by a worker under a
// lease (src/ctrl/builds/worker.ts), logged, finished. The queue's rules (which build starts,
// which a newer one cancels) are src/builds/queue.ts's; this file applies them in transactions.
import { createHash } from "node:crypto";
import type { Kysely } from "kysely";
import { buildsToStart, isFinished, supersededBy, type BuildState, type QueuedBuild } from "../../builds/queue.js";
import { readDesired, type WriteTx } from "../db/outbox.js";
import type { BuildRow, Database } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { noteWriteSubject } from "../db/write-hook.js";
import { DomainError, failedPrecondition, invalidArgument, notFound } from "../errors.js";
import { buildPayloads, encodeDeleteBuild } from "../payloads/build.js";
import { newId } from "./ids.js";
import { notify } from "./notifications.js";

type Reader = Kysely<Database>;

/** Lines of a build's log kept (the newest). */
export const BUILD_LOG_LINES = 2000;

export interface SourceChunk {
  readonly projectId: string;
  readonly digest: string;
  readonly size: number;
  readonly position: number;
  readonly data: Uint8Array;
}

/** One archive's chunks. */
function chunksOf(db: Reader, projectId: string, digest: string) {
  return db.selectFrom("build_source_chunks").where("project_id", "=", projectId).where("digest", "=", digest);
}

async function received(db: Reader, projectId: string, digest: string): Promise<{ bytes: number; size: number }> {
  const rows = await chunksOf(db, projectId, digest)
    .select(["position", "size", (eb) => eb.fn<number>("length", ["data"]).as("length")])
    .execute();
  let bytes = 0;
  for (const r of rows) bytes += Number(r.length);
  return { bytes, size: Number(rows[0]?.size ?? 0) };
}

/**
 * Stores one chunk of an archive; answers the bytes held. A chunk must start where the held bytes
 * end; a repeat of a chunk already held is answered as it was.
 */
export async function appendSourceChunk(store: Store, c: SourceChunk): Promise<number> {
  return store.write(async (tx) => {
    const held = await received(tx.trx, c.projectId, c.digest);
    if (held.bytes > 0 && held.size !== c.size)
      throw invalidArgument("size", `is ${c.size}, but this archive's upload began with size ${held.size}`);
    if (c.position < held.bytes) {
      const same = await chunksOf(tx.trx, c.projectId, c.digest)
        .select("position")
        .where("position", "=", c.position)
        .executeTakeFirst();
      if (same) return held.bytes;
    }
    if (c.position !== held.bytes)
      throw invalidArgument("offset", `is ${c.position}, but ctrl holds ${held.bytes} bytes of this archive`);
    if (c.position + c.data.length > c.size)
      throw invalidArgument("data", `goes past the archive's size of ${c.size} bytes`);
    await tx.trx
      .insertInto("build_source_chunks")
      .values({
        project_id: c.projectId,
        digest: c.digest,
        position: c.position,
        size: c.size,
        data: c.data,
        created_at: tx.now,
      })
      .execute();
    return held.bytes + c.data.length;
  });
}

/** The whole archive (undefined: not all uploaded). */
export async function readSource(db: Reader, projectId: string, digest: string): Promise<Buffer | undefined> {
  const rows = await chunksOf(db, projectId, digest).select(["data", "size"]).orderBy("position").execute();
  const whole = Buffer.concat(rows.map((r) => Buffer.from(r.data)));
  if (rows.length === 0 || whole.length !== Number(rows[0]?.size)) return undefined;
  return whole;
}

export interface NewBuild {
  readonly workspaceId: string;
  readonly projectId: string;
  readonly environmentId: string;
  readonly production: boolean;
  readonly sourceDigest: string;
  readonly dockerfile: string | undefined;
  readonly deploy: boolean;
}

function queued(
  r: Pick<BuildRow, "id" | "environment_id" | "preview" | "production" | "created_at" | "state">,
): QueuedBuild {
  return {
    id: r.id,
    environmentId: r.environment_id,
    ...(r.preview === null ? {} : { preview: r.preview }),
    production: Number(r.production) === 1,
    createdAt: Number(r.created_at),
    state: r.state as BuildState,
  };
}

/**
 * Queues a build of an uploaded archive, whose bytes must match its digest; cancels the
 * environment's older builds still queued or running. Answers the build and those it cancelled.
 */
export async function createBuild(store: Store, b: NewBuild): Promise<{ build: BuildRow; cancelled: string[] }> {
  const source = await readSource(store.db, b.projectId, b.sourceDigest);
  if (source === undefined)
    throw failedPrecondition(
      `source_digest: no complete upload of ${b.sourceDigest} in this project (upload it first)`,
    );
  const actual = `sha256:${createHash("sha256").update(source).digest("hex")}`;
  if (actual !== b.sourceDigest) {
    await store.write((tx) => dropSource(tx, b.projectId, b.sourceDigest));
    throw invalidArgument("source_digest", `is ${b.sourceDigest}, but the uploaded bytes' digest is ${actual}`);
  }
  return store.write((tx) => queueBuildIn(tx, b));
}

/** A commit of a connected repository to build (instead of an uploaded archive). */
export interface GitSource {
  readonly repositoryId: string;
  readonly branch: string;
  readonly commit: string;
}

/** A pull request's build: the preview it makes from its base environment (the build's environment). */
export interface PreviewTarget {
  /** The preview's name ("pr-7", "mr-7"). */
  readonly name: string;
  readonly number: number;
  readonly fork: boolean;
}

/**
 * Queues a build in the caller's transaction and cancels the environment's older open builds. A
 * commit already queued or building for the environment is not queued twice: that build is
 * answered (with nothing cancelled).
 */
export async function queueBuildIn(
  tx: WriteTx,
  b: NewBuild & { readonly git?: GitSource; readonly preview?: PreviewTarget },
): Promise<{ build: BuildRow; cancelled: string[] }> {
  if (b.git) {
    const sameLane = tx.trx
      .selectFrom("builds")
      .selectAll()
      .where("environment_id", "=", b.environmentId)
      .where("commit_sha", "=", b.git.commit)
      .where("state", "in", ["queued", "running"]);
    const same = await (
      b.preview ? sameLane.where("preview", "=", b.preview.name) : sameLane.where("preview", "is", null)
    ).executeTakeFirst();
    if (same) return { build: same, cancelled: [] };
  }
  const id = newId("bld");
  const build: BuildRow = {
    id,
    workspace_id: b.workspaceId,
    project_id: b.projectId,
    environment_id: b.environmentId,
    production: b.production ? 1 : 0,
    state: "queued",
    source_digest: b.sourceDigest,
    dockerfile: b.dockerfile ?? null,
    deploy: b.deploy ? 1 : 0,
    image: null,
    image_digest: null,
    deployment_id: null,
    error: null,
    failed_step: null,
    failed_output: null,
    log: "",
    log_lines: 0,
    lease_until: null,
    created_at: tx.now,
    started_at: null,
    finished_at: null,
    repository_id: b.git?.repositoryId ?? null,
    branch: b.git?.branch ?? null,
    commit_sha: b.git?.commit ?? null,
    status_reported: null,
    // A repository build's commit status is due with each change of its state (the reporter
    // posts it: ../repositories/statuses.ts), written in the change's transaction.
    status_due_at: b.git ? tx.now : null,
    preview: b.preview?.name ?? null,
    pr_number: b.preview?.number ?? null,
    pr_fork: b.preview === undefined ? null : b.preview.fork ? 1 : 0,
  };
  await tx.trx.insertInto("builds").values(build).execute();
  await noteWriteSubject(tx, id);
  const open = await tx.trx
    .selectFrom("builds")
    .select(["id", "environment_id", "preview", "production", "created_at", "state"])
    .where("environment_id", "=", b.environmentId)
    .where("state", "in", ["queued", "running"])
    .execute();
  const cancelled = supersededBy(open.map(queued), queued(build));
  for (const old of cancelled) await finish(tx, old, { state: "cancelled", error: `superseded by build ${id}` });
  return { build, cancelled };
}

/** The commit status of these builds (those of a repository) is due now. */
async function statusDue(tx: WriteTx, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await tx.trx
    .updateTable("builds")
    .set({ status_due_at: tx.now })
    .where("id", "in", ids)
    .where("repository_id", "is not", null)
    .execute();
}

async function dropSource(tx: WriteTx, projectId: string, digest: string): Promise<void> {
  await tx.trx
    .deleteFrom("build_source_chunks")
    .where("project_id", "=", projectId)
    .where("digest", "=", digest)
    .execute();
}

export async function getBuild(db: Reader, workspaceId: string, id: string): Promise<BuildRow> {
  const row = await db
    .selectFrom("builds")
    .selectAll()
    .where("id", "=", id)
    .where("workspace_id", "=", workspaceId)
    .executeTakeFirst();
  if (!row) throw notFound(`build "${id}"`);
  return row;
}

export async function buildById(db: Reader, id: string): Promise<BuildRow | undefined> {
  return db.selectFrom("builds").selectAll().where("id", "=", id).executeTakeFirst();
}

export async function listBuilds(db: Reader, environmentId: string, limit: number): Promise<BuildRow[]> {
  return db
    .selectFrom("builds")
    .selectAll()
    .where("environment_id", "=", environmentId)
    .orderBy("created_at", "desc")
    .orderBy("id", "desc")
    .limit(limit)
    .execute();
}

export interface Outcome {
  readonly state: "succeeded" | "failed" | "cancelled";
  readonly error?: string;
  readonly failedStep?: string;
  readonly failedOutput?: readonly string[];
  readonly image?: string;
  readonly imageDigest?: string;
  readonly deploymentId?: string;
}

/** The last lines of a failed build's output a notification carries. */
export const NOTIFIED_LINES = 10;

/**
 * Ends a build not finished yet; false when it already was (cancelled meanwhile, say). A failure
 * is notified (build.failed) in the same transaction, so it is told once, and always.
 */
async function finish(tx: WriteTx, id: string, o: Outcome): Promise<boolean> {
  const res = await tx.trx
    .updateTable("builds")
    .set({
      state: o.state,
      error: o.error ?? null,
      failed_step: o.failedStep ?? null,
      failed_output: o.failedOutput ? JSON.stringify(o.failedOutput) : null,
      image: o.image ?? null,
      image_digest: o.imageDigest ?? null,
      deployment_id: o.deploymentId ?? null,
      lease_until: null,
      finished_at: tx.now,
    })
    .where("id", "=", id)
    .where("state", "in", ["queued", "running"])
    .returning(["environment_id"])
    .executeTakeFirst();
  if (!res) return false;
  await dropHandoff(tx, id);
  await statusDue(tx, [id]);
  if (o.state === "failed") {
    const last = (o.failedOutput ?? []).slice(-NOTIFIED_LINES);
    const error = o.error ?? "failed";
    await notify(tx, {
      type: "build.failed",
      severity: "critical",
      environmentId: res.environment_id,
      summary: "build failed",
      text:
        o.failedStep === undefined
          ? `Build ${id} failed: ${error}`
          : `Build ${id} failed at step ${o.failedStep}: ${error}`,
      details: { build_id: id, step: o.failedStep ?? null, error, last_lines: last.join("\n") },
    });
  }
  return true;
}

/** Cancels a pull request's open builds (it was closed): answers their ids. */
export async function cancelPreviewBuildsIn(
  tx: WriteTx,
  projectId: string,
  preview: string,
  why: string,
): Promise<string[]> {
  const open = await tx.trx
    .selectFrom("builds")
    .select("id")
    .where("project_id", "=", projectId)
    .where("preview", "=", preview)
    .where("state", "in", ["queued", "running"])
    .execute();
  const out: string[] = [];
  for (const b of open) if (await finish(tx, b.id, { state: "cancelled", error: why })) out.push(b.id);
  return out;
}

/**
 * Whether the build is still running, holding its row until the transaction ends (an UPDATE locks
 * it): a build cancelled meanwhile (its pull request closed) must not deploy.
 */
export async function holdRunningBuild(tx: WriteTx, id: string): Promise<boolean> {
  const res = await tx.trx
    .updateTable("builds")
    .set({ state: "running" })
    .where("id", "=", id)
    .where("state", "=", "running")
    .executeTakeFirst();
  return Number(res.numUpdatedRows) === 1;
}

/** Cancels a queued or running build of the workspace; answers it as it is now. */
export async function cancelBuild(store: Store, workspaceId: string, id: string): Promise<BuildRow> {
  return store.write(async (tx) => {
    const row = await getBuild(tx.trx, workspaceId, id);
    if (!isFinished(row.state as BuildState)) await finish(tx, id, { state: "cancelled", error: "cancelled" });
    return getBuild(tx.trx, workspaceId, id);
  });
}

/** Ends a running build with its outcome (kept as it is when it was cancelled meanwhile). */
export async function finishBuild(store: Store, id: string, o: Outcome): Promise<boolean> {
  return store.write((tx) => finish(tx, id, o));
}

/**
 * Starts the builds whose turn it is, at most `slots` running at once: first a running build whose
 * worker let its lease lapse (ctrl stopped mid-build) goes back to the queue. Answers the ids started.
 */
export async function claimBuilds(store: Store, slots: number, leaseMs: number): Promise<string[]> {
  return store.write(async (tx) => {
    const lapsed = await tx.trx
      .updateTable("builds")
      .set({ state: "queued", lease_until: null, started_at: null })
      .where("state", "=", "running")
      .where("lease_until", "<", tx.now)
      .returning("id")
      .execute();
    // A lapsed build handed to a region (its agent stopped reporting) is taken back from it.
    for (const r of lapsed) await dropHandoff(tx, r.id);
    await statusDue(
      tx,
      lapsed.map((r) => r.id),
    );
    const open = await tx.trx
      .selectFrom("builds")
      .select(["id", "environment_id", "preview", "production", "created_at", "state"])
      .where("state", "in", ["queued", "running"])
      .execute();
    const start = buildsToStart(open.map(queued), slots);
    const out: string[] = [];
    for (const id of start) {
      const res = await tx.trx
        .updateTable("builds")
        .set({ state: "running", started_at: tx.now, lease_until: tx.now + leaseMs })
        .where("id", "=", id)
        .where("state", "=", "queued")
        .executeTakeFirst();
      if (Number(res.numUpdatedRows) === 1) out.push(id);
    }
    await statusDue(tx, out);
    return out;
  });
}

/**
 * Appends log lines to a running build and renews its lease; answers its state (a worker stops a
 * build that is no longer "running": cancelled).
 */
export async function logBuild(store: Store, id: string, lines: readonly string[], leaseMs: number): Promise<string> {
  return store.write(async (tx) => {
    const row = await tx.trx
      .selectFrom("builds")
      .select(["state", "log", "log_lines"])
      .where("id", "=", id)
      .executeTakeFirst();
    if (!row) return "cancelled";
    if (row.state !== "running") return row.state;
    const kept = [...(row.log === "" ? [] : row.log.split("\n")), ...lines].slice(-BUILD_LOG_LINES);
    await tx.trx
      .updateTable("builds")
      .set({ log: kept.join("\n"), log_lines: Number(row.log_lines) + lines.length, lease_until: tx.now + leaseMs })
      .where("id", "=", id)
      .execute();
    return row.state;
  });
}

/** A build's log lines from line `from` on (lines past the kept ones are gone), and the next line's number. */
export function logFrom(row: Pick<BuildRow, "log" | "log_lines">, from: number): { lines: string[]; next: number } {
  const kept = row.log === "" ? [] : row.log.split("\n");
  const total = Number(row.log_lines);
  const first = total - kept.length;
  return { lines: kept.slice(Math.max(0, from - first)), next: total };
}

/**
 * Claims the repository builds whose commit status is due: moves their next look `leaseMs` ahead
 * (another ctrl replica's sweep skips them meanwhile) and returns their ids.
 */
export async function claimDueBuildStatuses(store: Store, limit: number, leaseMs: number): Promise<string[]> {
  return store.write(async (tx) => {
    const ids = (
      await tx.trx
        .selectFrom("builds")
        .select("id")
        .where("status_due_at", "<=", tx.now)
        .orderBy("status_due_at")
        .limit(limit)
        .execute()
    ).map((d) => d.id);
    if (ids.length > 0)
      await tx.trx
        .updateTable("builds")
        .set({ status_due_at: tx.now + leaseMs })
        .where("id", "in", ids)
        .execute();
    return ids;
  });
}

/**
 * Records the commit status posted for a build (null: nothing posted) and that none is due —
 * unless its state changed since it was read (`seenState`): then the change's own due time stands.
 */
export async function recordBuildStatus(
  store: Store,
  id: string,
  reported: string | null,
  seenState: string,
): Promise<void> {
  await store.write(async (tx) => {
    const q = tx.trx.updateTable("builds").where("id", "=", id).where("state", "=", seenState);
    await (reported === null ? q : q.set({ status_reported: reported })).set({ status_due_at: null }).execute();
  });
}

// ---------------------------------------------------------------- builds run by a region's agent

/**
 * Removes a build handed to a region's builder pods from that region's desired state: its agent
 * aborts the build if it still runs it. Nothing when it was not handed to any.
 */
async function dropHandoff(tx: WriteTx, id: string): Promise<void> {
  const desired = await tx.trx
    .selectFrom("desired_objects")
    .select("region")
    .where("kind", "=", buildPayloads.name)
    .where("object_id", "=", id)
    .execute();
  for (const d of desired) await tx.removeDesired(d.region, buildPayloads.name, id, encodeDeleteBuild(id));
}

/**
 * Hands a running build to a region's builder pods (`--builds-in cluster`): its ApplyBuild becomes
 * desired there, in the transaction that checks it still runs. False: it no longer runs.
 */
export async function handBuildTo(
  store: Store,
  id: string,
  region: string,
  environmentId: string,
  payload: Uint8Array,
): Promise<boolean> {
  return store.write(async (tx) => {
    if (!(await holdRunningBuild(tx, id))) return false;
    await tx.putDesired(region, buildPayloads.name, id, payload, null, environmentId);
    return true;
  });
}

/** The build when it is handed to this region's builder pods; undefined for any other build. */
export async function buildHandedTo(db: Reader, region: string, id: string): Promise<BuildRow | undefined> {
  const desired = await readDesired(db, region, buildPayloads.name, [id]);
  return desired.has(id) ? buildById(db, id) : undefined;
}

/**
 * Keeps a source ctrl fetched (a repository's commit) as an archive of the build's project under
 * its digest, and names it the build's source: a region's agent asks for it by the build's id.
 * Answers the digest.
 */
export async function keepFetchedSource(store: Store, row: BuildRow, archive: Buffer): Promise<string> {
  const digest = `sha256:${createHash("sha256").update(archive).digest("hex")}`;
  await appendSourceChunk(store, {
    projectId: row.project_id,
    digest,
    size: archive.length,
    position: 0,
    data: archive,
  });
  await store.write((tx) =>
    tx.trx.updateTable("builds").set({ source_digest: digest }).where("id", "=", row.id).execute(),
  );
  return digest;
}

/** Records a build kind's report: a build the region's agent refused fails with its reason. */
export type BuildReport =
  | { type: "update" | "delete"; id: string; k8sName: string }
  | { type: "rejected"; id: string; k8sName: string; reason: string };

export async function recordBuildReport(store: Store, region: string, report: BuildReport): Promise<void> {
  if (report.type !== "rejected") return;
  await store.write(async (tx) => {
    if (!(await readDesired(tx.trx, region, buildPayloads.name, [report.id])).has(report.id))
      throw new DomainError("permission_denied", `build ${report.id} is not handed to region ${region}`);
    await finish(tx, report.id, { state: "failed", error: `region ${region}'s agent refused it: ${report.reason}` });
  });
}
