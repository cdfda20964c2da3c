// A project's git repository (table repositories): connected with its fetch credential, webhook
// secret and status token sealed with the workspace's data key (so they go with the workspace,
// and a reader of the database can neither fetch the code nor forge a push), its branch →
// environment map, read back without any secret, updated, disconnected (with the deliveries it
// accepted), and purged with its project.
import type { Kysely } from "kysely";
import type { WriteTx } from "../db/outbox.js";
import type { Database, RepositoryRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { noteWriteSubject } from "../db/write-hook.js";
import { DomainError, failedPrecondition, notFound } from "../errors.js";
import type { Keyring } from "../secrets/keyring.js";
import type { ConnectRepositoryInput } from "../validate/repository.js";
import { webhookVerification } from "../validate/preview.js";
import { dataKeyFor, existingDataKey, openWith, sealWith } from "./data-keys.js";
import { newId } from "./ids.js";
import { forgetDeliveries } from "./previews.js";
import { findProject } from "./tenancy.js";

type Reader = Kysely<Database>;

/** What of a repository is sealed. */
export type RepositorySecret = "credential" | "webhook-secret" | "status-token";

/** Associated data of a repository's sealed values. */
export function repositorySecretAad(id: string, what: RepositorySecret): string {
  return `repository ${id} ${what}`;
}

/** The path GitHub or GitLab posts a repository's push events to (ctrl's webhook port). */
export function repositoryHookPath(id: string): string {
  return `/hooks/repositories/${id}`;
}

export function branchesOf(row: Pick<RepositoryRow, "branches">): Record<string, string> {
  const v: unknown = JSON.parse(row.branches);
  const out: Record<string, string> = {};
  if (v !== null && typeof v === "object")
    for (const [k, e] of Object.entries(v)) if (typeof e === "string") out[k] = e;
  return out;
}

/** Each mapped environment, and the previews' base, must exist in the project. */
async function checkEnvironments(
  db: Reader,
  projectId: string,
  branches: Record<string, string>,
  previews: string,
): Promise<void> {
  const wanted = [...new Set([...Object.values(branches), ...(previews === "" ? [] : [previews])])];
  const have = await db
    .selectFrom("environments")
    .select("slug")
    .where("project_id", "=", projectId)
    .where("slug", "in", wanted)
    .execute();
  const known = new Set(have.map((e) => e.slug));
  for (const [branch, env] of Object.entries(branches))
    if (!known.has(env))
      throw failedPrecondition(
        `branches: branch "${branch}" is mapped to environment "${env}", which this project has not`,
      );
  if (previews !== "" && !known.has(previews))
    throw failedPrecondition(`previews: this project has no environment "${previews}" to make previews from`);
}

function needKeyring(keyring: Keyring | undefined): Keyring {
  if (!keyring)
    throw failedPrecondition(
      "repositories keep their credentials sealed: start ctrl with a master key (--master-key-file)",
    );
  return keyring;
}

export async function connectRepository(
  store: Store,
  keyring: Keyring | undefined,
  spec: ConnectRepositoryInput,
): Promise<RepositoryRow> {
  const ring = needKeyring(keyring);
  return store.write(async (tx) => {
    const { workspace, project } = await findProject(tx.trx, spec.workspace, spec.project);
    const existing = await tx.trx
      .selectFrom("repositories")
      .select("url")
      .where("project_id", "=", project.id)
      .executeTakeFirst();
    if (existing)
      throw new DomainError(
        "already_exists",
        `project "${project.slug}" is already connected to ${existing.url} (krane repo disconnect ${project.slug} first)`,
      );
    await checkEnvironments(tx.trx, project.id, spec.branches, spec.pullRequests.previews);
    const key = await dataKeyFor(tx, ring, workspace.id);
    const id = newId("rep");
    const c = spec.credential;
    const secret = c.kind === "token" ? c.token : c.kind === "deploy_key" ? c.privateKey : undefined;
    const statusToken = spec.statusToken !== "" ? spec.statusToken : c.kind === "token" ? c.token : undefined;
    const row: RepositoryRow = {
      id,
      workspace_id: workspace.id,
      project_id: project.id,
      provider: spec.provider,
      url: spec.url,
      transport: spec.transport,
      path: spec.path,
      credential_kind: c.kind,
      credential_username: c.kind === "token" ? c.username : "",
      credential_sealed: secret === undefined ? null : sealWith(key, secret, repositorySecretAad(id, "credential")),
      webhook_verification: webhookVerification(spec.provider, spec.webhookSecret),
      webhook_secret_sealed: sealWith(key, spec.webhookSecret, repositorySecretAad(id, "webhook-secret")),
      status_api_url:
        spec.statusApiUrl ?? (spec.provider === "github" ? "https://api.github.com" : "https://gitlab.com/api/v4"),
      status_token_sealed:
        statusToken === undefined ? null : sealWith(key, statusToken, repositorySecretAad(id, "status-token")),
      branches: JSON.stringify(spec.branches),
      preview_base: spec.pullRequests.previews,
      preview_forks: spec.pullRequests.buildForks ? 1 : 0,
      created_at: tx.now,
      updated_at: tx.now,
    };
    await tx.trx.insertInto("repositories").values(row).execute();
    await noteWriteSubject(tx, id);
    return row;
  });
}

export async function findRepository(db: Reader, workspace: string, project: string): Promise<RepositoryRow> {
  const p = await findProject(db, workspace, project);
  const row = await db.selectFrom("repositories").selectAll().where("project_id", "=", p.project.id).executeTakeFirst();
  if (!row) throw notFound(`repository of project "${p.project.slug}" (krane repo connect)`);
  return row;
}

export function repositoryById(db: Reader, id: string): Promise<RepositoryRow | undefined> {
  return db.selectFrom("repositories").selectAll().where("id", "=", id).executeTakeFirst();
}

/** The workspace's repositories with their projects' slugs, by slug. */
export async function listRepositories(
  db: Reader,
  workspaceId: string,
): Promise<{ repository: RepositoryRow; project: string }[]> {
  const rows = await db
    .selectFrom("repositories as r")
    .innerJoin("projects as p", "p.id", "r.project_id")
    .selectAll("r")
    .select("p.slug as project_slug")
    .where("r.workspace_id", "=", workspaceId)
    .orderBy("p.slug")
    .execute();
  return rows.map(({ project_slug, ...repository }) => ({ repository, project: project_slug }));
}

/** Replaces the branch map (undefined: kept) and how pull requests build (each field undefined: kept). */
export async function updateRepository(
  store: Store,
  workspace: string,
  project: string,
  change: { branches?: Record<string, string>; previews?: string; buildForks?: boolean },
): Promise<RepositoryRow> {
  return store.write(async (tx) => {
    const row = await findRepository(tx.trx, workspace, project);
    const branches = change.branches ?? branchesOf(row);
    const previews = change.previews ?? row.preview_base;
    const forks = change.buildForks ?? Number(row.preview_forks) === 1;
    if (forks && previews === "")
      throw failedPrecondition("build_forks: pull requests build no previews (give previews an environment)");
    await checkEnvironments(tx.trx, row.project_id, branches, previews);
    const set = {
      branches: JSON.stringify(branches),
      preview_base: previews,
      preview_forks: forks ? 1 : 0,
      updated_at: tx.now,
    };
    await tx.trx.updateTable("repositories").set(set).where("id", "=", row.id).execute();
    return { ...row, ...set };
  });
}

export async function disconnectRepository(store: Store, workspace: string, project: string): Promise<void> {
  await store.write(async (tx) => {
    const row = await findRepository(tx.trx, workspace, project);
    await dropRepository(tx, row.id);
  });
}

async function dropRepository(tx: WriteTx, id: string): Promise<void> {
  await tx.trx.deleteFrom("repositories").where("id", "=", id).execute();
  await forgetDeliveries(tx, id);
}

/** A project's repository goes with the project. */
export async function purgeProjectRepository(tx: WriteTx, projectId: string): Promise<void> {
  const row = await tx.trx
    .selectFrom("repositories")
    .select("id")
    .where("project_id", "=", projectId)
    .executeTakeFirst();
  if (row) await dropRepository(tx, row.id);
}

/** A sealed value of a repository, opened in memory (undefined: none, or no key to open it). */
export async function openRepositorySecret(
  db: Reader,
  keyring: Keyring | undefined,
  row: RepositoryRow,
  what: RepositorySecret,
): Promise<string | undefined> {
  const sealed =
    what === "credential"
      ? row.credential_sealed
      : what === "webhook-secret"
        ? row.webhook_secret_sealed
        : row.status_token_sealed;
  if (!keyring || sealed === null) return undefined;
  const key = await existingDataKey(db, keyring, row.workspace_id);
  if (!key) return undefined;
  return openWith(key, sealed, repositorySecretAad(row.id, what)).toString("utf8");
}
