// LiveService (WatchOverview, WatchEnvironment) and MetricsService (GetRevisionMetrics,
// GetMetricsHistory): the public API's live views (proto/krane/ctrl/v1/live.proto). A stream
// sends the whole view first, then what changed whenever a write commits (./hub.ts), an empty
// keepalive after `keepaliveMs` of quiet, and ends after `maxStreamMs`, at ctrl's shutdown, or when its caller's credential is
// gone (looked up again every `recheckMs`; a revoked token, a signed-out or expired session). A
// stream carries only what its caller may read: the environment is found as every call finds it,
// and the overview holds back environments of workspaces the caller may not read.
import { create } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import {
  GetMetricsHistoryResponseSchema,
  GetRevisionMetricsResponseSchema,
  MetricsHistoryPointSchema,
  MetricsSeriesSchema,
  LiveService,
  MetricsPointSchema,
  MetricsService,
  RevisionMetricsSchema,
  WatchEnvironmentResponseSchema,
  WatchOverviewResponseSchema,
  type EnvironmentSummary,
  type WatchEnvironmentResponse,
  type WatchOverviewResponse,
} from "../../gen/krane/ctrl/v1/live_pb.js";
import { principalKey, type Principal } from "../auth/principal.js";
import type { Store } from "../db/store.js";
import { notFound } from "../errors.js";
import { MINUTE_MS, startOf, stepFor } from "../history/sums.js";
import { historyPoints, historySeries, type HistoryPointView } from "../read/metric-history.js";
import { bucketMetrics, measurementRows } from "../read/metrics.js";
import { findEnvironment } from "../read/tenancy.js";
import { validateEnvironmentRef } from "../validate/api.js";
import { invalidArgument } from "../errors.js";
import * as rules from "../validate/rules.js";
import { FinalError } from "./follower.js";
import type { LiveHub } from "./hub.js";

export interface LiveServiceOptions {
  /** An empty message after this much quiet (ms; default 15 s). */
  keepaliveMs?: number;
  /** A stream ends after this long; the client reconnects (ms; default 10 min). */
  maxStreamMs?: number;
  /** How often a stream's credential is looked up again (ms; default 30 s). */
  recheckMs?: number;
  /** Live streams one token (or session's token) may hold open at once, per ctrl process (default 64). */
  perCallerMax?: number;
}

export interface LiveServiceDeps extends LiveServiceOptions {
  store: Store;
  hub: LiveHub;
  /** Aborted when ctrl drains: streams end, and their clients reconnect elsewhere. */
  stop: AbortSignal;
  /** Whether the credential the call came with (bearer token or session cookie) still holds. */
  stillValid(header: Headers): Promise<boolean>;
}

/**
 * Whether `p` may read a workspace's environments: an installation token every workspace's, a
 * workspace token its own only (the rule every method follows: ../auth/scope.ts).
 */
export function mayRead(p: Principal | undefined, workspaceId: string): boolean {
  return p?.kind === "user" && (p.workspace === null || p.workspace.id === workspaceId);
}

/** Clusters are the installation's: a workspace token's overview holds them back, as ListClusters does. */
function maySeeClusters(p: Principal | undefined): boolean {
  return p?.kind === "user" && p.workspace === null;
}

function callerOf(ctx: HandlerContext): string {
  const p = ctx.values.get(principalKey);
  return p?.kind === "user" ? p.tokenId : "";
}

export function liveServiceImpl(d: LiveServiceDeps): ServiceImpl<typeof LiveService> {
  const keepaliveMs = d.keepaliveMs ?? 15_000;
  const maxStreamMs = d.maxStreamMs ?? 600_000;
  const recheckMs = d.recheckMs ?? 30_000;
  const perCallerMax = d.perCallerMax ?? 64;
  const open = new Map<string, number>();

  /** Runs one stream's bookkeeping: the per-caller count, its end, the credential re-check. */
  async function* session<T>(
    ctx: HandlerContext,
    body: (end: AbortSignal, tick: () => AbortSignal, check: () => Promise<void>) => AsyncGenerator<T>,
  ): AsyncGenerator<T> {
    const caller = callerOf(ctx);
    const n = open.get(caller) ?? 0;
    if (n >= perCallerMax)
      throw new ConnectError(
        `this token has ${n} live streams open on this ctrl (at most ${perCallerMax}): close some`,
        Code.ResourceExhausted,
      );
    open.set(caller, n + 1);
    const end = AbortSignal.any([ctx.signal, d.stop, AbortSignal.timeout(maxStreamMs)]);
    let checked = Date.now();
    const check = async (): Promise<void> => {
      if (Date.now() - checked < recheckMs) return;
      checked = Date.now();
      if (!(await d.stillValid(ctx.requestHeader)))
        throw new ConnectError("the token or session has ended: sign in again", Code.Unauthenticated);
    };
    try {
      yield* body(end, () => AbortSignal.any([end, AbortSignal.timeout(keepaliveMs)]), check);
    } finally {
      const left = (open.get(caller) ?? 1) - 1;
      if (left <= 0) open.delete(caller);
      else open.set(caller, left);
    }
  }

  return {
    async *watchEnvironment(req, ctx): AsyncGenerator<WatchEnvironmentResponse> {
      const ref = validateEnvironmentRef(req);
      const { workspace, environment } = await findEnvironment(d.store.db, ref);
      if (!mayRead(ctx.values.get(principalKey), workspace.id)) throw notFound(`environment "${req.environment}"`);
      const json = (ctx.requestHeader.get("content-type") ?? "").includes("json");
      yield* session(ctx, async function* (end, tick, check) {
        const { follower, release } = d.hub.watchEnvironment(environment.id);
        try {
          let sent = 0;
          while (!end.aborted) {
            let got;
            try {
              got = await follower.next(sent, tick());
            } catch (err) {
              throw err instanceof FinalError ? err.cause : err;
            }
            if (end.aborted) return;
            await check();
            const msg = create(WatchEnvironmentResponseSchema, { sentAtUnixMs: BigInt(Date.now()) });
            if (got !== undefined) {
              sent = got.version;
              // Binary clients get the view encoded once for every stream (an unknown field is
              // written as it is); JSON clients, whose encoding drops unknown fields, the message.
              if (json) msg.view = got.value.view;
              else msg.$unknown = [{ no: VIEW_FIELD, wireType: WireType.LengthDelimited, data: got.value.field }];
            }
            yield msg;
          }
        } finally {
          release();
        }
      });
    },

    async *watchOverview(_req, ctx): AsyncGenerator<WatchOverviewResponse> {
      const principal = ctx.values.get(principalKey);
      const visible = (s: EnvironmentSummary): boolean => mayRead(principal, s.workspaceId);
      const clustersVisible = maySeeClusters(principal);
      yield* session(ctx, async function* (end, tick, check) {
        const { feed, release } = d.hub.watchOverview();
        try {
          let sent = 0;
          /** Environments this stream has shown: only those are ever named as removed. */
          const shown = new Set<string>();
          while (!end.aborted) {
            const delta = await feed.next(sent, visible, tick());
            if (end.aborted) return;
            await check();
            if (delta === undefined) {
              yield create(WatchOverviewResponseSchema, { sentAtUnixMs: BigInt(Date.now()) });
              continue;
            }
            sent = delta.version;
            if (delta.reset) shown.clear();
            for (const s of delta.upserts) shown.add(s.environmentId);
            const removed = delta.removed.filter((id) => shown.delete(id));
            const clusters = clustersVisible ? delta.clusters : null;
            if (!delta.reset && delta.upserts.length === 0 && removed.length === 0 && clusters === null) continue;
            yield create(WatchOverviewResponseSchema, {
              reset: delta.reset,
              environments: delta.upserts,
              removedEnvironmentIds: removed,
              clustersChanged: clusters !== null,
              clusters: clusters ?? [],
              sentAtUnixMs: BigInt(Date.now()),
            });
          }
        } finally {
          release();
        }
      });
    },
  };
}

const HOUR_MS = 3_600_000;
/** WatchEnvironmentResponse.view's field number. */
const VIEW_FIELD = WatchEnvironmentResponseSchema.fields.find((f) => f.localName === "view")?.number ?? 1;

/** How far back GetMetricsHistory reads: hours are kept 30 days, minutes 7. */
const HISTORY_DAYS_MS = 30 * 24 * HOUR_MS;
const MINUTES_BACK_MS = 7 * 24 * HOUR_MS;

function historyPoint(p: HistoryPointView) {
  const ms = (v: number | null): number | undefined => (v === null ? undefined : v === Infinity ? -1 : v);
  return create(MetricsHistoryPointSchema, {
    atUnixMs: BigInt(p.atMs),
    requests: BigInt(p.requests),
    requestsPerSecond: p.requestsPerSecond,
    errors: BigInt(p.errors),
    errorRatePercent: p.errorRatePercent,
    p50Ms: ms(p.p50Ms),
    p95Ms: ms(p.p95Ms),
    p99Ms: ms(p.p99Ms),
    cpuMillicores: p.cpuMillicores ?? undefined,
    memoryBytes: p.memoryBytes ?? undefined,
    restarts: BigInt(p.restarts),
  });
}

export function metricsServiceImpl({ store }: { store: Store }): ServiceImpl<typeof MetricsService> {
  return {
    async getMetricsHistory(req, ctx) {
      const ref = validateEnvironmentRef(req);
      const now = store.clock();
      const revision = rules.intRange("revision", req.revision, 0, Number.MAX_SAFE_INTEGER);
      const region = rules.text("region", req.region, 63);
      const instance = rules.text("instance", req.instance, 253);
      let since =
        req.sinceUnixMs === 0n
          ? now - HOUR_MS
          : rules.intRange("since_unix_ms", req.sinceUnixMs, 0, Number.MAX_SAFE_INTEGER);
      if (since > now) throw invalidArgument("since_unix_ms", "is in the future");
      since = Math.max(since, now - HISTORY_DAYS_MS);
      const stepMs =
        req.stepSeconds === 0
          ? stepFor(now - since)
          : req.stepSeconds === 60 || req.stepSeconds === 3600
            ? req.stepSeconds * 1000
            : (() => {
                throw invalidArgument("step_seconds", "must be 60, 3600 or 0");
              })();
      if (stepMs === MINUTE_MS) since = Math.max(since, now - MINUTES_BACK_MS);
      since = startOf(since, stepMs);
      const { workspace, environment } = await findEnvironment(store.db, ref);
      if (!mayRead(ctx.values.get(principalKey), workspace.id)) throw notFound(`environment "${req.environment}"`);
      const deps = await store.db
        .selectFrom("deployments")
        .select(["id", "revision"])
        .where("environment_id", "=", environment.id)
        .execute();
      const revisionOf = new Map(deps.map((d) => [d.id, Number(d.revision)]));
      let deploymentId: string | undefined;
      if (revision !== 0) {
        deploymentId = deps.find((d) => Number(d.revision) === revision)?.id;
        if (deploymentId === undefined) throw notFound(`revision ${revision} of environment "${req.environment}"`);
      }
      const points = await historyPoints(
        store.db,
        {
          environmentId: environment.id,
          fromMs: since,
          ...(deploymentId === undefined ? {} : { deploymentId }),
          ...(region === "" ? {} : { region }),
          ...(instance === "" ? {} : { instance }),
        },
        stepMs,
        now,
      );
      const series = historySeries(points, since, now, stepMs)
        .filter((s) => revisionOf.has(s.deploymentId))
        .sort(
          (a, b) =>
            (revisionOf.get(b.deploymentId) ?? 0) - (revisionOf.get(a.deploymentId) ?? 0) ||
            a.region.localeCompare(b.region) ||
            a.instance.localeCompare(b.instance),
        );
      return create(GetMetricsHistoryResponseSchema, {
        sinceUnixMs: BigInt(since),
        stepSeconds: stepMs / 1000,
        untilUnixMs: BigInt(now),
        series: series.map((s) =>
          create(MetricsSeriesSchema, {
            deploymentId: s.deploymentId,
            revision: BigInt(revisionOf.get(s.deploymentId) ?? 0),
            region: s.region,
            instance: s.instance,
            points: s.points.map(historyPoint),
            total: historyPoint(s.total),
          }),
        ),
      });
    },
    async getRevisionMetrics(req, ctx) {
      const ref = validateEnvironmentRef(req);
      const now = Date.now();
      const bucketSeconds = req.bucketSeconds === 0 ? 30 : rules.intRange("bucket_seconds", req.bucketSeconds, 10, 600);
      let since =
        req.sinceUnixMs === 0n
          ? now - 15 * 60_000
          : rules.intRange("since_unix_ms", req.sinceUnixMs, 0, Number.MAX_SAFE_INTEGER);
      if (since > now) throw invalidArgument("since_unix_ms", "is in the future");
      since = Math.max(since, now - HOUR_MS);
      // Buckets start on whole multiples of their length, so charts of two calls line up.
      const bucketMs = bucketSeconds * 1000;
      since = Math.floor(since / bucketMs) * bucketMs;
      const { workspace, environment } = await findEnvironment(store.db, ref);
      if (!mayRead(ctx.values.get(principalKey), workspace.id)) throw notFound(`environment "${req.environment}"`);
      const points = bucketMetrics(await measurementRows(store.db, environment.id, since), since, bucketMs);
      const deps = points.size
        ? await store.db
            .selectFrom("deployments")
            .select(["id", "revision"])
            .where("id", "in", [...points.keys()])
            .execute()
        : [];
      const revisionOf = new Map(deps.map((x) => [x.id, Number(x.revision)]));
      return create(GetRevisionMetricsResponseSchema, {
        sinceUnixMs: BigInt(since),
        bucketSeconds,
        revisions: [...points]
          .filter(([id]) => revisionOf.has(id))
          .sort(([a], [b]) => (revisionOf.get(b) ?? 0) - (revisionOf.get(a) ?? 0))
          .map(([id, pts]) =>
            create(RevisionMetricsSchema, {
              deploymentId: id,
              revision: BigInt(revisionOf.get(id) ?? 0),
              points: pts.map((p) =>
                create(MetricsPointSchema, {
                  atUnixMs: BigInt(p.atMs),
                  requests: BigInt(p.requests),
                  requestsPerSecond: p.requestsPerSecond,
                  errorRatePercent: p.errorRatePercent,
                  p50Ms: p.p50Ms ?? undefined,
                  p99Ms: p.p99Ms ?? undefined,
                }),
              ),
            }),
          ),
      });
    },
  };
}
