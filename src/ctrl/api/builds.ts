// BuildService: source archives uploaded in chunks (bounded, checked against their digest), builds
// queued for an environment, read with their logs, cancelled. The builds run in ctrl's build
// worker (../builds/worker.ts), told here when one is queued.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { normalizePath } from "../../builds/detect.js";
import { isProductionEnvironment } from "../../builds/queue.js";
import { BuildSchema, type Build, type BuildService } from "../../gen/krane/ctrl/v1/build_pb.js";
import type { BuildRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { appendSourceChunk, cancelBuild, createBuild, getBuild, listBuilds, logFrom } from "../domain/builds.js";
import { findEnvironment, findProject, findWorkspace } from "../domain/tenancy.js";
import { buildAllowanceOf } from "../domain/quotas.js";
import { DomainError, failedPrecondition, invalidArgument } from "../errors.js";
import * as r from "../validate/rules.js";
import { projectRef, validateEnvironmentRef, workspaceRef } from "../validate/api.js";

/** A chunk's bound (the API's request limit is 4 MiB). */
export const MAX_SOURCE_CHUNK_BYTES = 2 * 1024 * 1024;
/** A source archive's default bound. */
export const DEFAULT_MAX_SOURCE_BYTES = 64 * 1024 * 1024;

export interface BuildApiDeps {
  readonly store: Store;
  /** Whether this ctrl builds (absent: StartBuild is refused, saying how to turn builds on). */
  readonly worker: { readonly queued: () => void; readonly maxSourceBytes: number } | undefined;
}

const DIGEST = /^sha256:[0-9a-f]{64}$/;

function digestField(field: string, v: string): string {
  if (v === "") throw invalidArgument(field, "is required");
  if (!DIGEST.test(v)) throw invalidArgument(field, "must be sha256:<64 lowercase hex digits>");
  return v;
}

export function buildMsg(b: BuildRow, names: { project: string; environment: string }): Build {
  const failedOutput: unknown = b.failed_output ? JSON.parse(b.failed_output) : [];
  return create(BuildSchema, {
    id: b.id,
    project: names.project,
    environment: names.environment,
    state: b.state,
    sourceDigest: b.source_digest,
    deploy: Number(b.deploy) === 1,
    image: b.image ?? "",
    imageDigest: b.image_digest ?? "",
    deploymentId: b.deployment_id ?? "",
    error: b.error ?? "",
    failedStep: b.failed_step ?? "",
    failedOutput: Array.isArray(failedOutput) ? failedOutput.map(String) : [],
    createdAtUnixMs: BigInt(b.created_at),
    startedAtUnixMs: BigInt(b.started_at ?? 0),
    finishedAtUnixMs: BigInt(b.finished_at ?? 0),
    commit: b.commit_sha ?? "",
    branch: b.branch ?? "",
    preview: b.preview ?? "",
  });
}

async function namesOf(store: Store, b: BuildRow): Promise<{ project: string; environment: string }> {
  const env = await store.db
    .selectFrom("environments as e")
    .innerJoin("projects as p", "p.id", "e.project_id")
    .select(["p.slug as project", "e.slug as environment"])
    .where("e.id", "=", b.environment_id)
    .executeTakeFirst();
  return env ?? { project: b.project_id, environment: b.environment_id };
}

export function buildServiceImpl({ store, worker }: BuildApiDeps): ServiceImpl<typeof BuildService> {
  const maxSourceBytes = worker?.maxSourceBytes ?? DEFAULT_MAX_SOURCE_BYTES;
  return {
    async uploadSource(req) {
      const workspace = workspaceRef("workspace", req.workspace);
      const project = projectRef("project", req.project);
      const digest = digestField("digest", req.digest);
      const size = Number(req.size);
      if (size <= 0) throw invalidArgument("size", "must be the archive's size in bytes (more than 0)");
      if (size > maxSourceBytes)
        throw invalidArgument(
          "size",
          `is ${size} bytes, over this ctrl's limit of ${maxSourceBytes} for a source archive`,
        );
      const position = Number(req.offset);
      if (position < 0) throw invalidArgument("offset", "must not be negative");
      if (req.data.length === 0) throw invalidArgument("data", "is empty");
      if (req.data.length > MAX_SOURCE_CHUNK_BYTES)
        throw invalidArgument("data", `is ${req.data.length} bytes; a chunk is at most ${MAX_SOURCE_CHUNK_BYTES}`);
      const { project: p } = await findProject(store.db, workspace, project);
      const got = await appendSourceChunk(store, { projectId: p.id, digest, size, position, data: req.data });
      return { received: BigInt(got) };
    },
    async startBuild(req) {
      const ref = validateEnvironmentRef(req);
      const sourceDigest = digestField("source_digest", req.sourceDigest);
      let dockerfile: string | undefined;
      if (req.dockerfile !== "") {
        dockerfile = normalizePath(req.dockerfile);
        if (dockerfile === undefined)
          throw invalidArgument("dockerfile", "must be a relative path inside the source (no .., not absolute)");
      }
      if (!worker)
        throw failedPrecondition(
          "this ctrl does not build from source (start it with --build-registry and the BuildKit flags)",
        );
      const ctx = await findEnvironment(store.db, ref);
      // A workspace whose build minutes are spent queues nothing (only the refusal matters here:
      // the worker caps the time limit when the build starts).
      const allowance = await buildAllowanceOf(store.db, ctx.workspace.id, 0, Date.now());
      if (!allowance.ok) throw new DomainError("resource_exhausted", allowance.message);
      const { build, cancelled } = await createBuild(store, {
        workspaceId: ctx.workspace.id,
        projectId: ctx.project.id,
        environmentId: ctx.environment.id,
        production: isProductionEnvironment(ctx.environment.slug),
        sourceDigest,
        dockerfile,
        deploy: req.deploy,
      });
      worker.queued();
      return {
        build: buildMsg(build, { project: ctx.project.slug, environment: ctx.environment.slug }),
        cancelledBuildIds: cancelled,
      };
    },
    async getBuild(req) {
      const ws = await findWorkspace(store.db, workspaceRef("workspace", req.workspace));
      const b = await getBuild(store.db, ws.id, r.id("build_id", req.buildId, "bld"));
      if (req.logFrom < 0) throw invalidArgument("log_from", "must not be negative");
      const log = logFrom(b, req.logFrom);
      return { build: buildMsg(b, await namesOf(store, b)), log: log.lines, logNext: log.next };
    },
    async listBuilds(req) {
      const ctx = await findEnvironment(store.db, validateEnvironmentRef(req));
      const limit = req.limit === 0 ? 20 : r.intRange("limit", req.limit, 1, 100);
      const rows = await listBuilds(store.db, ctx.environment.id, limit);
      const names = { project: ctx.project.slug, environment: ctx.environment.slug };
      return { builds: rows.map((b) => buildMsg(b, names)) };
    },
    async cancelBuild(req) {
      const ws = await findWorkspace(store.db, workspaceRef("workspace", req.workspace));
      const b = await cancelBuild(store, ws.id, r.id("build_id", req.buildId, "bld"));
      return { build: buildMsg(b, await namesOf(store, b)) };
    },
  };
}
