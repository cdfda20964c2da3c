// The read model of tenancy: lists of workspaces, projects and environments (keyset pages), the
// regions of environments, and the lookups by slug or id the API answers Get calls with (the
// domain's finders: a lookup reads exactly what a write checks).
import type { Kysely } from "kysely";
import type { Database, ProjectRow, WorkspaceRow } from "../db/schema.js";
import { findProject, findWorkspace, type EnvironmentContext } from "../domain/tenancy.js";
import { limitToPage, takePage, type Page, type PageQuery } from "./page.js";

export { findEnvironment, findProject, findWorkspace } from "../domain/tenancy.js";
export { environmentRegions } from "../domain/environments.js";

type Reader = Kysely<Database>;

/** By slug; a page's key is the slug of its last workspace. `only`: that workspace (by id) alone. */
export async function listWorkspaces(db: Reader, page?: PageQuery<string>, only?: string): Promise<Page<WorkspaceRow>> {
  let q = db.selectFrom("workspaces").selectAll();
  if (only !== undefined) q = q.where("id", "=", only);
  if (page?.after !== undefined) q = q.where("slug", ">", page.after);
  return takePage(await limitToPage(q, page).orderBy("slug").execute(), page);
}

/** By slug; a page's key is the slug of its last project. */
export async function listProjects(
  db: Reader,
  workspaceRef: string,
  page?: PageQuery<string>,
): Promise<Page<ProjectRow>> {
  const workspace = await findWorkspace(db, workspaceRef);
  let q = db.selectFrom("projects").selectAll().where("workspace_id", "=", workspace.id);
  if (page?.after !== undefined) q = q.where("slug", ">", page.after);
  return takePage(await limitToPage(q, page).orderBy("slug").execute(), page);
}

/** By slug; a page's key is the slug of its last environment. */
export async function listEnvironments(
  db: Reader,
  workspaceRef: string,
  projectRef: string,
  page?: PageQuery<string>,
): Promise<Page<EnvironmentContext>> {
  const { workspace, project } = await findProject(db, workspaceRef, projectRef);
  let q = db.selectFrom("environments").selectAll().where("project_id", "=", project.id);
  if (page?.after !== undefined) q = q.where("slug", ">", page.after);
  const rows = await limitToPage(q, page).orderBy("slug").execute();
  return takePage(
    rows.map((environment) => ({ workspace, project, environment })),
    page,
  );
}

/** The regions of several environments, by environment id (each list by region). */
export async function regionsOfEnvironments(
  db: Reader,
  environmentIds: readonly string[],
): Promise<Map<string, { region: string; replicas: number }[]>> {
  const out = new Map<string, { region: string; replicas: number }[]>(environmentIds.map((id) => [id, []]));
  if (environmentIds.length === 0) return out;
  const rows = await db
    .selectFrom("environment_regions")
    .select(["environment_id", "region", "replicas"])
    .where("environment_id", "in", [...environmentIds])
    .orderBy("environment_id")
    .orderBy("region")
    .execute();
  for (const r of rows) out.get(r.environment_id)?.push({ region: r.region, replicas: r.replicas });
  return out;
}

/** The id of the workspace a slug names now (being deleted or not), or undefined. */
export async function workspaceIdBySlug(db: Reader, slug: string): Promise<string | undefined> {
  const row = await db.selectFrom("workspaces").select("id").where("slug", "=", slug).executeTakeFirst();
  return row?.id;
}
