// The overview's read model: one summary per environment (its names, regions, newest revision,
// instances running against replicas desired, and the rollout's state in one word), read for
// many environments at once in a fixed number of queries, so the live overview's first load of
// 1,000 environments is a handful of reads, and a change re-reads only the environments it named.
import type { Kysely } from "kysely";
import type { Condition, DeploymentStatus } from "../../rollout/index.js";
import type { Database } from "../db/schema.js";
import { EMPTY_STATUS, rolloutProgress, specKey } from "../rollout/plan.js";
import { parseState, specOf } from "../rollout/progressive.js";

type Reader = Kysely<Database>;

export type SummaryState = "none" | "paused" | "failed" | "progressing" | "complete";

export interface EnvironmentSummaryView {
  environmentId: string;
  workspaceId: string;
  workspace: string;
  project: string;
  environment: string;
  regions: { region: string; replicas: number }[];
  updatedAt: number;
  revision: number;
  image: string;
  running: number;
  desired: number;
  state: SummaryState;
}

const CHUNK = 500;

function chunks<T>(xs: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < xs.length; i += CHUNK) out.push(xs.slice(i, i + CHUNK));
  return out;
}

/**
 * Summaries of the given environments (every environment not being deleted when `ids` is
 * absent). An id that names no such environment is simply absent from the answer.
 */
export async function environmentSummaries(db: Reader, ids?: readonly string[]): Promise<EnvironmentSummaryView[]> {
  const base = db
    .selectFrom("environments as e")
    .innerJoin("projects as p", "p.id", "e.project_id")
    .innerJoin("workspaces as w", "w.id", "e.workspace_id")
    .selectAll("e")
    .select(["p.slug as project_slug", "w.slug as workspace_slug"])
    .where("e.deleting_at", "is", null)
    .where("p.deleting_at", "is", null)
    .where("w.deleting_at", "is", null);
  const envs =
    ids === undefined
      ? await base.execute()
      : (await Promise.all(chunks(ids).map((c) => base.where("e.id", "in", c).execute()))).flat();
  if (envs.length === 0) return [];
  const envIds = envs.map((e) => e.id);
  const byEnv = <R extends { environment_id: string }>(rows: R[]): Map<string, R[]> => {
    const m = new Map<string, R[]>();
    for (const r of rows) {
      const l = m.get(r.environment_id);
      if (l) l.push(r);
      else m.set(r.environment_id, [r]);
    }
    return m;
  };
  const all = async <R extends { environment_id: string }>(
    read: (c: string[]) => Promise<R[]>,
  ): Promise<Map<string, R[]>> =>
    byEnv(
      ids === undefined && envIds.length > CHUNK
        ? await read([])
        : (await Promise.all(chunks(envIds).map(read))).flat(),
    );
  // An empty chunk means "every environment" (the whole-table read of a first load).
  const regions = await all((c) => {
    const q = db.selectFrom("environment_regions").select(["environment_id", "region", "replicas"]).orderBy("region");
    return (c.length ? q.where("environment_id", "in", c) : q).execute();
  });
  const deployments = await all((c) => {
    const q = db.selectFrom("deployments").select(["id", "environment_id", "revision", "image"]);
    return (c.length ? q.where("environment_id", "in", c) : q).execute();
  });
  const rollouts = await all((c) => {
    const q = db
      .selectFrom("rollouts")
      .select(["environment_id", "region", "status", "conditions", "observed_spec", "rollback_to"]);
    return (c.length ? q.where("environment_id", "in", c) : q).execute();
  });
  const progressive = await all((c) => {
    const q = db.selectFrom("progressive_rollouts").select(["environment_id", "state"]);
    return (c.length ? q.where("environment_id", "in", c) : q).execute();
  });
  const desired = await all((c) => {
    const q = db
      .selectFrom("desired_objects")
      .select(["environment_id as environment_id", (eb) => eb.fn.sum<number>("replicas").as("n")])
      .where("kind", "=", "deployment")
      .where("environment_id", "is not", null)
      .groupBy("environment_id");
    return (c.length ? q.where("environment_id", "in", c) : q)
      .execute()
      .then((rows) => rows.map((r) => ({ environment_id: r.environment_id ?? "", n: Number(r.n ?? 0) })));
  });
  const running = await all((c) => {
    const q = db
      .selectFrom("instances as i")
      .innerJoin("deployments as d", "d.id", "i.deployment_id")
      .select(["d.environment_id as environment_id", (eb) => eb.fn.countAll<number>().as("n")])
      .where("i.status", "=", "running")
      .groupBy("d.environment_id");
    return (c.length ? q.where("d.environment_id", "in", c) : q)
      .execute()
      .then((rows) => rows.map((r) => ({ environment_id: r.environment_id, n: Number(r.n) })));
  });
  return envs.map((env) => {
    const regs = (regions.get(env.id) ?? []).map((r) => ({ region: r.region, replicas: Number(r.replicas) }));
    let newest: { revision: number; image: string } | undefined;
    for (const d of deployments.get(env.id) ?? [])
      if (newest === undefined || Number(d.revision) > newest.revision)
        newest = { revision: Number(d.revision), image: d.image };
    return {
      environmentId: env.id,
      workspaceId: env.workspace_id,
      workspace: env.workspace_slug,
      project: env.project_slug,
      environment: env.slug,
      regions: regs,
      updatedAt: Number(env.updated_at),
      revision: newest?.revision ?? 0,
      image: newest?.image ?? "",
      running: running.get(env.id)?.[0]?.n ?? 0,
      desired: desired.get(env.id)?.[0]?.n ?? 0,
      state: stateOf(env, regs, rollouts.get(env.id) ?? [], progressive.get(env.id)?.[0]?.state, newest !== undefined),
    };
  });
}

/** The rollout's state in one word, as RolloutService.GetRolloutStatus would tell it. */
function stateOf(
  env: Parameters<typeof specOf>[0] & {
    paused: number;
    strategy: string;
    max_surge: string;
    max_unavailable: string;
    min_ready_seconds: number;
    revision_history_limit: number;
    last_revision: number;
  },
  regions: readonly { region: string; replicas: number }[],
  rows: readonly {
    region: string;
    status: string;
    conditions: string;
    observed_spec: string;
    rollback_to: number | null;
  }[],
  progressiveState: string | undefined,
  deployed: boolean,
): SummaryState {
  if (!deployed) return "none";
  if (Number(env.paused) === 1) return "paused";
  if (specOf(env) !== null) {
    const st = parseState(progressiveState);
    if (st.aborted) return "failed";
    return st.canary === null && st.phase === "Healthy" ? "complete" : "progressing";
  }
  let complete = true;
  for (const { region, replicas } of regions) {
    const row = rows.find((r) => r.region === region);
    const policy = {
      replicas,
      strategy: env.strategy,
      maxSurge: env.max_surge,
      maxUnavailable: env.max_unavailable,
      minReadySeconds: Number(env.min_ready_seconds),
      progressDeadlineSeconds: Number(env.progress_deadline_seconds),
      revisionHistoryLimit: Number(env.revision_history_limit),
      paused: false,
      rollbackTo: row?.rollback_to === null || row === undefined ? null : Number(row.rollback_to),
    };
    const observed = row !== undefined && row.observed_spec === specKey(policy, Number(env.last_revision));
    const status = row ? (JSON.parse(row.status) as DeploymentStatus) : EMPTY_STATUS;
    const conditions = row ? (JSON.parse(row.conditions) as Condition[]) : [];
    const p = rolloutProgress(replicas, status, conditions, observed);
    if (p.failed) return "failed";
    if (!p.complete) complete = false;
  }
  return complete ? "complete" : "progressing";
}
