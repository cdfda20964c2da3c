// Previews as the API answers with them: a workspace's previews (by name, optionally of one
// project) with their project's and base environment's slugs and their endpoint's address, one
// preview, and a workspace's pull-request hooks.
import type { Kysely } from "kysely";
import type { Database, PreviewHookRow, PreviewRow } from "../db/schema.js";
import { findPreview } from "../domain/previews.js";
import { notFound } from "../errors.js";
import { findProject } from "../domain/tenancy.js";
import { limitToPage, takePage, type Page, type PageQuery } from "./page.js";

export { previewLimitsOf, previewUsage } from "../domain/previews.js";

type Reader = Kysely<Database>;

export interface PreviewView {
  preview: PreviewRow;
  project: string;
  base: string;
  /** The endpoint's host and prefix, when it has one. */
  endpoint?: { hostname: string; pathPrefix: string };
}

/** The slugs of rows of `table` by id. */
async function slugsById(db: Reader, table: "projects" | "environments", ids: string[]): Promise<Map<string, string>> {
  const rows = await db
    .selectFrom(table)
    .select(["id", "slug"])
    .where("id", "in", [...new Set(ids)])
    .execute();
  return new Map(rows.map((r) => [r.id, r.slug]));
}

type InProject = Pick<PreviewRow, "project_id" | "base_environment_id">;

/** Names the project and base environment of previews or hooks by slug (an id without a row as itself). */
async function slugsOf(
  db: Reader,
  rows: readonly InProject[],
): Promise<(row: InProject) => { project: string; base: string }> {
  const projects = await slugsById(
    db,
    "projects",
    rows.map((r) => r.project_id),
  );
  const bases = await slugsById(
    db,
    "environments",
    rows.map((r) => r.base_environment_id),
  );
  return (row) => ({
    project: projects.get(row.project_id) ?? row.project_id,
    base: bases.get(row.base_environment_id) ?? row.base_environment_id,
  });
}

async function viewsOf(db: Reader, rows: PreviewRow[]): Promise<PreviewView[]> {
  if (rows.length === 0) return [];
  const slugs = await slugsOf(db, rows);
  const envIds = rows.flatMap((r) => (r.environment_id === null ? [] : [r.environment_id]));
  const endpoints = new Map<string, { hostname: string; pathPrefix: string }>();
  if (envIds.length > 0)
    for (const e of await db
      .selectFrom("endpoints")
      .select(["environment_id", "hostname", "path_prefix", "visibility"])
      .where("environment_id", "in", envIds)
      // "public" sorts after "organization": the public address wins when there are both.
      .orderBy("visibility")
      .execute())
      endpoints.set(e.environment_id, { hostname: e.hostname, pathPrefix: e.path_prefix });
  return rows.map((preview) => ({
    preview,
    ...slugs(preview),
    endpoint: preview.environment_id === null ? undefined : endpoints.get(preview.environment_id),
  }));
}

/** By name, then id; a page's key is both of its last preview. */
export async function listPreviews(
  db: Reader,
  workspaceId: string,
  projectId: string | undefined,
  page?: PageQuery<readonly [string, string]>,
): Promise<Page<PreviewView>> {
  let q = db.selectFrom("previews").selectAll().where("workspace_id", "=", workspaceId);
  if (projectId !== undefined) q = q.where("project_id", "=", projectId);
  if (page?.after !== undefined) {
    const [name, id] = page.after;
    q = q.where((eb) => eb.or([eb("name", ">", name), eb.and([eb("name", "=", name), eb("id", ">", id)])]));
  }
  const rows = await limitToPage(q, page).orderBy("name").orderBy("id").execute();
  const p = takePage(rows, page);
  return { items: await viewsOf(db, p.items), more: p.more };
}

export async function previewView(
  db: Reader,
  ref: { workspace: string; project: string; name: string },
): Promise<PreviewView> {
  const { project } = await findProject(db, ref.workspace, ref.project, { includeDeleting: true });
  const p = await findPreview(db, project.id, ref.name);
  if (!p) throw notFound(`preview "${ref.name}" in project "${project.slug}"`);
  const [v] = await viewsOf(db, [p]);
  if (!v) throw notFound(`preview "${ref.name}"`);
  return v;
}

/** What a preview row and its context answer with when it was just changed. */
export async function viewOfPreview(db: Reader, p: PreviewRow): Promise<PreviewView> {
  const [v] = await viewsOf(db, [p]);
  return v ?? { preview: p, project: p.project_id, base: p.base_environment_id };
}

export interface PreviewHookView {
  hook: PreviewHookRow;
  project: string;
  base: string;
}

/** Oldest first; a page's key is the creation time and id of its last hook. */
export async function listPreviewHooks(
  db: Reader,
  workspaceId: string,
  page?: PageQuery<readonly [number, string]>,
): Promise<Page<PreviewHookView>> {
  let q = db.selectFrom("preview_hooks").selectAll().where("workspace_id", "=", workspaceId);
  if (page?.after !== undefined) {
    const [at, id] = page.after;
    q = q.where((eb) => eb.or([eb("created_at", ">", at), eb.and([eb("created_at", "=", at), eb("id", ">", id)])]));
  }
  const rows = takePage(await limitToPage(q, page).orderBy("created_at").orderBy("id").execute(), page);
  return { items: await hookViews(db, rows.items), more: rows.more };
}

export async function hookViews(db: Reader, hooks: PreviewHookRow[]): Promise<PreviewHookView[]> {
  if (hooks.length === 0) return [];
  const slugs = await slugsOf(db, hooks);
  return hooks.map((hook) => ({ hook, ...slugs(hook) }));
}
