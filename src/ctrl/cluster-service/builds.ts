// ClusterService's build methods beside the build kind's stream (`ctrl serve --builds-in
// cluster`): a region's agent asks for the source and the push credential of a build handed to
// its region — never of any other build — and reports its log lines and outcome. Thin: authorize
// the region, validate, then the domain (../domain/builds.ts) and the build worker
// (../builds/worker.ts), which records an outcome as after its own builds.
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import type {
  GetBuildPushAuthorizationRequest,
  GetBuildSourceRequest,
  ReportBuildProgressRequest,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { agentRegion } from "../auth/principal.js";
import type { BuildRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { buildHandedTo, logBuild, readSource } from "../domain/builds.js";
import * as rules from "../validate/rules.js";
import type { ClusterServiceMethods } from "../kinds/kind.js";

/** What the build methods need of ctrl's build worker (../builds/worker.ts BuildWorker). */
export interface ClusterBuilds {
  readonly leaseMs: number;
  pushAuthorization(row: BuildRow): Promise<string>;
  complete(
    row: BuildRow,
    outcome:
      | { state: "succeeded"; imageDigest: string }
      | { state: "failed" | "cancelled"; error: string; failedStep?: string; failedOutput: readonly string[] },
  ): Promise<void>;
}

/** Lines a report may carry, and a line's length. */
const MAX_LINES = 500;
const MAX_LINE = 4_000;

/** The outcome a report carries, checked (each error names its field); undefined while it runs. */
export function reportedOutcome(
  req: Pick<ReportBuildProgressRequest, "outcome">,
): Parameters<ClusterBuilds["complete"]>[1] | undefined {
  const o = req.outcome;
  switch (o.case) {
    case "succeeded": {
      const digest = o.value.imageDigest;
      if (!/^sha256:[0-9a-f]{64}$/.test(digest))
        throw new ConnectError(`succeeded.image_digest: must be sha256:<64 hex digits>`, Code.InvalidArgument);
      return { state: "succeeded", imageDigest: digest };
    }
    case "failed": {
      const f = o.value;
      rules.list("failed.failed_output", f.failedOutput, 30);
      return {
        state: f.cancelled ? "cancelled" : "failed",
        error: rules.text("failed.error", f.error, MAX_LINE, true),
        ...(f.failedStep === "" ? {} : { failedStep: rules.text("failed.failed_step", f.failedStep, MAX_LINE) }),
        failedOutput: f.failedOutput.map((l) => l.slice(0, MAX_LINE)),
      };
    }
    default:
      return undefined;
  }
}

export function buildMethods(store: Store, builds: ClusterBuilds | undefined): ClusterServiceMethods {
  /** The build handed to the caller's region, or NotFound (any other build, whatever its id). */
  const handed = async (
    req: { region: string; buildId: string },
    ctx: HandlerContext,
  ): Promise<{ region: string; row: BuildRow; builds: ClusterBuilds }> => {
    const region = agentRegion(ctx, req.region);
    // The store first: a ctrl that runs no builds has handed none (not_found), and every method
    // answers unavailable alike while the database is down.
    const row = await buildHandedTo(store.db, region, rules.id("build_id", req.buildId, "bld"));
    if (!row) throw new ConnectError(`build "${req.buildId}" is not handed to region ${region}`, Code.NotFound);
    if (!builds) throw new ConnectError("this ctrl runs no builds", Code.FailedPrecondition);
    return { region, row, builds };
  };
  return {
    async getBuildSource(req: GetBuildSourceRequest, ctx) {
      const { row } = await handed(req, ctx);
      const archive = await readSource(store.db, row.project_id, row.source_digest);
      if (!archive) throw new ConnectError(`the source archive ${row.source_digest} is gone`, Code.FailedPrecondition);
      return { archive, digest: row.source_digest };
    },
    async getBuildPushAuthorization(req: GetBuildPushAuthorizationRequest, ctx) {
      const { row, builds: b } = await handed(req, ctx);
      return { authorization: await b.pushAuthorization(row) };
    },
    async reportBuildProgress(req: ReportBuildProgressRequest, ctx) {
      const region = agentRegion(ctx, req.region);
      const id = rules.id("build_id", req.buildId, "bld");
      rules.list("lines", req.lines, MAX_LINES);
      const outcome = reportedOutcome(req);
      // A build no longer handed to the region (finished, cancelled, requeued) is not running there.
      const row = await buildHandedTo(store.db, region, id);
      if (!row) return { running: false };
      if (!builds) throw new ConnectError("this ctrl runs no builds", Code.FailedPrecondition);
      const state = await logBuild(
        store,
        id,
        req.lines.map((l) => l.slice(0, MAX_LINE)),
        builds.leaseMs,
      );
      if (state !== "running") return { running: false };
      if (outcome === undefined) return { running: true };
      await builds.complete(row, outcome);
      return { running: false };
    },
  };
}
