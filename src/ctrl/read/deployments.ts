// The read model of deployments: one revision with its context, pages of revisions (of a
// workspace, project or environment), and where each is desired at how many replicas.
import type { Kysely } from "kysely";
import type { Database, DeploymentRow } from "../db/schema.js";
import { loadDeploymentContext } from "../domain/deployments.js";
import { findEnvironment, findProject, findWorkspace } from "../domain/tenancy.js";
import type { DeploymentContext } from "../payloads/deployment.js";
import { deploymentPayloads } from "../payloads/deployment.js";
import { limitToPage, takePage, type Page, type PageQuery } from "./page.js";

export { desiredReplicasOf } from "../domain/deployments.js";

type Reader = Kysely<Database>;

export async function getDeployment(db: Reader, deploymentId: string): Promise<DeploymentContext> {
  return loadDeploymentContext(db, deploymentId);
}

export interface DeploymentFilter {
  workspace: string;
  project?: string;
  environment?: string;
}

/** Where a page of deployments ends: its last deployment's (created_at, revision, id). */
export type DeploymentKey = readonly [createdAt: number, revision: number, id: string];

/** Newest first: by created_at, then revision, then id, all descending (a total order, so pages never overlap or skip). */
export async function listDeployments(
  db: Reader,
  filter: DeploymentFilter,
  page?: PageQuery<DeploymentKey>,
): Promise<Page<DeploymentContext>> {
  let q = db.selectFrom("deployments").selectAll();
  if (filter.project !== undefined && filter.environment !== undefined) {
    const { environment } = await findEnvironment(db, {
      workspace: filter.workspace,
      project: filter.project,
      environment: filter.environment,
    });
    q = q.where("environment_id", "=", environment.id);
  } else if (filter.project !== undefined) {
    const { project } = await findProject(db, filter.workspace, filter.project);
    q = q.where("project_id", "=", project.id);
  } else {
    const workspace = await findWorkspace(db, filter.workspace);
    q = q.where("workspace_id", "=", workspace.id);
  }
  if (page?.after !== undefined) {
    const [createdAt, revision, id] = page.after;
    q = q.where((eb) => eb(eb.refTuple("created_at", "revision", "id"), "<", eb.tuple(createdAt, revision, id)));
  }
  const rows = await limitToPage(q, page)
    .orderBy("created_at", "desc")
    .orderBy("revision", "desc")
    .orderBy("id", "desc")
    .execute();
  if (rows.length === 0) return takePage([], page);
  // The rows' environments, projects and workspaces in one query each (a page of a workspace's
  // deployments can span as many environments as it has rows).
  const byId = <T extends { id: string }>(list: T[]): Map<string, T> => new Map(list.map((x) => [x.id, x]));
  const ids = (f: (d: DeploymentRow) => string): string[] => [...new Set(rows.map(f))];
  const environments = byId(
    await db
      .selectFrom("environments")
      .selectAll()
      .where(
        "id",
        "in",
        ids((d) => d.environment_id),
      )
      .execute(),
  );
  const projects = byId(
    await db
      .selectFrom("projects")
      .selectAll()
      .where(
        "id",
        "in",
        ids((d) => d.project_id),
      )
      .execute(),
  );
  const workspaces = byId(
    await db
      .selectFrom("workspaces")
      .selectAll()
      .where(
        "id",
        "in",
        ids((d) => d.workspace_id),
      )
      .execute(),
  );
  const out = rows.map((deployment): DeploymentContext => {
    const environment = environments.get(deployment.environment_id);
    const project = projects.get(deployment.project_id);
    const workspace = workspaces.get(deployment.workspace_id);
    if (!environment || !project || !workspace)
      throw new Error(`deployment ${deployment.id}: its environment, project or workspace is missing`);
    return { workspace, project, environment, deployment };
  });
  return takePage(out, page);
}

/** Desired replica count of a deployment per region (regions where it is not desired are absent). */
export async function desiredReplicasByRegion(
  db: Reader,
  deploymentId: string,
): Promise<{ region: string; replicas: number }[]> {
  const rows = await db
    .selectFrom("desired_objects")
    .select(["region", "replicas"])
    .where("kind", "=", deploymentPayloads.name)
    .where("object_id", "=", deploymentId)
    .orderBy("region")
    .execute();
  return rows.map((r) => ({ region: r.region, replicas: r.replicas ?? 0 }));
}

/** The workspace a deployment belongs to, or undefined when there is no such deployment. */
export async function workspaceOfDeployment(db: Reader, deploymentId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom("deployments")
    .select("workspace_id")
    .where("id", "=", deploymentId)
    .executeTakeFirst();
  return row?.workspace_id;
}

/** The revision `krane rollback` pinned the environment to ("" when none). */
export async function pinnedDeployment(db: Kysely<Database>, environmentId: string): Promise<string> {
  const row = await db
    .selectFrom("environments")
    .select("pinned_deployment_id")
    .where("id", "=", environmentId)
    .executeTakeFirst();
  return row?.pinned_deployment_id ?? "";
}
