// Workspaces and projects (tables workspaces and projects): creation, lookup by slug or id, and
// a deletion's marks and end; and finding an environment by its workspace, project and slug (or
// ids). Environments themselves are ./environments.ts.
import type { Kysely } from "kysely";
import type { Database, EnvironmentRow, ProjectRow, WorkspaceRow } from "../db/schema.js";
import type { WriteTx } from "../db/outbox.js";
import type { Store } from "../db/store.js";
import { alreadyExists, DomainError, failedPrecondition, notFound } from "../errors.js";
import type { EnvironmentRef, NewProject, NewWorkspace } from "../validate/types.js";
import { newId, workspaceNamespace } from "./ids.js";

type Reader = Kysely<Database>;

/** Lookups refuse what is being deleted (failed_precondition) unless asked not to. */
export interface FindOptions {
  includeDeleting?: boolean;
}

export function beingDeleted(what: string): DomainError {
  return failedPrecondition(`${what} is being deleted (repeat its delete command to see what is left)`);
}

export async function findWorkspace(db: Reader, ref: string, opts: FindOptions = {}): Promise<WorkspaceRow> {
  const row = await db
    .selectFrom("workspaces")
    .selectAll()
    .where(ref.startsWith("ws_") ? "id" : "slug", "=", ref)
    .executeTakeFirst();
  if (!row) throw notFound(`workspace "${ref}"`);
  if (row.deleting_at !== null && !opts.includeDeleting) throw beingDeleted(`workspace "${row.slug}"`);
  return row;
}

export async function findProject(
  db: Reader,
  workspaceRef: string,
  ref: string,
  opts: FindOptions = {},
): Promise<{ workspace: WorkspaceRow; project: ProjectRow }> {
  const workspace = await findWorkspace(db, workspaceRef, opts);
  const project = await db
    .selectFrom("projects")
    .selectAll()
    .where("workspace_id", "=", workspace.id)
    .where(ref.startsWith("prj_") ? "id" : "slug", "=", ref)
    .executeTakeFirst();
  if (!project) throw notFound(`project "${ref}" in workspace "${workspace.slug}"`);
  if (project.deleting_at !== null && !opts.includeDeleting) throw beingDeleted(`project "${project.slug}"`);
  return { workspace, project };
}

export interface EnvironmentContext {
  workspace: WorkspaceRow;
  project: ProjectRow;
  environment: EnvironmentRow;
}

/** An environment's row with the workspace and project it belongs to. */
export async function environmentContext(db: Reader, environment: EnvironmentRow): Promise<EnvironmentContext> {
  const project = await db
    .selectFrom("projects")
    .selectAll()
    .where("id", "=", environment.project_id)
    .executeTakeFirstOrThrow();
  const workspace = await db
    .selectFrom("workspaces")
    .selectAll()
    .where("id", "=", environment.workspace_id)
    .executeTakeFirstOrThrow();
  return { workspace, project, environment };
}

export async function findEnvironment(
  db: Reader,
  ref: EnvironmentRef,
  opts: FindOptions = {},
): Promise<EnvironmentContext> {
  const { workspace, project } = await findProject(db, ref.workspace, ref.project, opts);
  const environment = await db
    .selectFrom("environments")
    .selectAll()
    .where("project_id", "=", project.id)
    .where(ref.environment.startsWith("env_") ? "id" : "slug", "=", ref.environment)
    .executeTakeFirst();
  if (!environment) throw notFound(`environment "${ref.environment}" in project "${project.slug}"`);
  if (environment.deleting_at !== null && !opts.includeDeleting)
    throw beingDeleted(`environment "${environment.slug}"`);
  return { workspace, project, environment };
}

export async function createWorkspace(store: Store, input: NewWorkspace): Promise<WorkspaceRow> {
  const row: WorkspaceRow = {
    id: newId("ws"),
    slug: input.slug,
    name: input.name,
    k8s_namespace: workspaceNamespace(input.slug),
    created_at: store.clock(),
    deleting_at: null,
  };
  try {
    await store.write(async (tx) => {
      await tx.trx.insertInto("workspaces").values(row).execute();
    });
  } catch (err) {
    if (store.isUniqueViolation(err)) throw alreadyExists(`workspace "${input.slug}"`);
    throw err;
  }
  return row;
}

export async function createProject(store: Store, input: NewProject): Promise<ProjectRow> {
  try {
    return await store.write(async (tx) => {
      const workspace = await findWorkspace(tx.trx, input.workspace);
      const row: ProjectRow = {
        id: newId("prj"),
        workspace_id: workspace.id,
        slug: input.slug,
        name: input.name,
        created_at: tx.now,
        deleting_at: null,
      };
      await tx.trx.insertInto("projects").values(row).execute();
      return row;
    });
  } catch (err) {
    if (store.isUniqueViolation(err)) throw alreadyExists(`project "${input.slug}"`);
    throw err;
  }
}

/** Marks a workspace or project as being deleted (lookups refuse it from then on). */
export async function markDeleting(tx: WriteTx, scope: "workspace" | "project", id: string, at: number): Promise<void> {
  if (scope === "workspace")
    await tx.trx.updateTable("workspaces").set({ deleting_at: at }).where("id", "=", id).execute();
  else await tx.trx.updateTable("projects").set({ deleting_at: at }).where("id", "=", id).execute();
}

/** Deletes a project or workspace row (its deletion ended); returns whether it was there. */
export async function purgeTenant(tx: WriteTx, scope: "workspace" | "project", id: string): Promise<boolean> {
  const res =
    scope === "workspace"
      ? await tx.trx.deleteFrom("workspaces").where("id", "=", id).executeTakeFirst()
      : await tx.trx.deleteFrom("projects").where("id", "=", id).executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}
