// RepositoryService: a project's git repository connected (credentials sealed, never answered),
// read, its branch map replaced, disconnected. Pushes arrive on ctrl's webhook port
// (../repositories/hooks.ts).
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { RepositorySchema, type Repository, type RepositoryService } from "../../gen/krane/ctrl/v1/repository_pb.js";
import type { RepositoryRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import {
  branchesOf,
  connectRepository,
  disconnectRepository,
  findRepository,
  listRepositories,
  repositoryHookPath,
  updateRepository,
} from "../domain/repositories.js";
import { findProject, findWorkspace } from "../domain/tenancy.js";
import type { Keyring } from "../secrets/keyring.js";
import { projectRef, workspaceRef } from "../validate/api.js";
import { slug } from "../validate/rules.js";
import { validateBranches, validateConnectRepository } from "../validate/repository.js";

export interface RepositoryApiDeps {
  readonly store: Store;
  readonly keyring: Keyring | undefined;
}

/** A repository as answered: every field but the sealed ones. */
export function repositoryMsg(r: RepositoryRow, project: string): Repository {
  return create(RepositorySchema, {
    id: r.id,
    project,
    provider: r.provider,
    url: r.url,
    transport: r.transport,
    path: r.path,
    credential: r.credential_kind,
    branches: Object.entries(branchesOf(r))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([b, e]) => `${b}=${e}`),
    webhookPath: repositoryHookPath(r.id),
    statusApiUrl: r.status_api_url,
    reportsStatus: r.status_token_sealed !== null,
    createdAtUnixMs: BigInt(r.created_at),
    updatedAtUnixMs: BigInt(r.updated_at),
    previews: r.preview_base,
    buildForks: Number(r.preview_forks) === 1,
  });
}

export function repositoryServiceImpl({ store, keyring }: RepositoryApiDeps): ServiceImpl<typeof RepositoryService> {
  const ref = (req: { workspace: string; project: string }) => ({
    workspace: workspaceRef("workspace", req.workspace),
    project: projectRef("project", req.project),
  });
  const slugOf = async (r: RepositoryRow): Promise<string> =>
    (await store.db.selectFrom("projects").select("slug").where("id", "=", r.project_id).executeTakeFirst())?.slug ??
    r.project_id;
  return {
    async connectRepository(req) {
      const spec = validateConnectRepository(req);
      const row = await connectRepository(store, keyring, spec);
      return { repository: repositoryMsg(row, await slugOf(row)) };
    },
    async listRepositories(req) {
      const ws = await findWorkspace(store.db, workspaceRef("workspace", req.workspace));
      const rows = await listRepositories(store.db, ws.id);
      return { repositories: rows.map((r) => repositoryMsg(r.repository, r.project)) };
    },
    async getRepository(req) {
      const { workspace, project } = ref(req);
      const row = await findRepository(store.db, workspace, project);
      return { repository: repositoryMsg(row, await slugOf(row)) };
    },
    async updateRepository(req) {
      const { workspace, project } = ref(req);
      // An empty map keeps the one there is when only how pull requests build changes.
      const keepMap = req.branches.length === 0 && (req.previews !== undefined || req.buildForks !== undefined);
      const row = await updateRepository(store, workspace, project, {
        ...(keepMap ? {} : { branches: validateBranches(req.branches) }),
        ...(req.previews === undefined ? {} : { previews: req.previews === "" ? "" : slug("previews", req.previews) }),
        ...(req.buildForks === undefined ? {} : { buildForks: req.buildForks }),
      });
      return { repository: repositoryMsg(row, await slugOf(row)) };
    },
    async disconnectRepository(req) {
      const { workspace, project } = ref(req);
      await findProject(store.db, workspace, project);
      await disconnectRepository(store, workspace, project);
      return {};
    },
  };
}
