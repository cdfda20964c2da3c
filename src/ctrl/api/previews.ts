// PreviewService: previews from the CLI (create, list, delete, approve), a workspace's preview
// settings (fork approval; its limits are quotas: ./quotas.ts), and pull-request hooks. A preview's
// image is pinned to its digest before anything is recorded, as a deploy's (../images/pin.ts).
// A change of a preview's environment runs its rollout passes; a
// deletion purges what has finished at once; a hook answers the path to give the provider.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  PreviewHookSchema,
  PreviewLimitsSchema,
  PreviewSchema,
  PreviewService,
  PullRequestSchema,
  type Preview,
  type PreviewHook,
  type PreviewLimits as PreviewLimitsMsg,
} from "../../gen/krane/ctrl/v1/preview_pb.js";
import type { Store } from "../db/store.js";
import { finishDeletions } from "../domain/deletion.js";
import { endpointUrl, type ExposureSettings } from "../domain/exposure.js";
import {
  approvePreview,
  createPreview,
  createPreviewHook,
  deletePreview,
  type PreviewDeps,
} from "../domain/preview-lifecycle.js";
import { deletePreviewHook, setPreviewLimits, type PreviewLimits } from "../domain/previews.js";
import { findWorkspace } from "../domain/tenancy.js";
import { pinImage } from "../images/pin.js";
import type { ImageResolver } from "../images/resolve.js";
import type { Keyring } from "../secrets/keyring.js";
import {
  hookViews,
  listPreviewHooks,
  listPreviews,
  previewLimitsOf,
  previewUsage,
  previewView,
  viewOfPreview,
  type PreviewHookView,
  type PreviewView,
} from "../read/previews.js";
import { findProject } from "../read/tenancy.js";
import { projectRef, workspaceRef } from "../validate/api.js";
import {
  validateCreatePreview,
  validateCreatePreviewHook,
  validatePreviewLimits,
  validatePreviewRef,
} from "../validate/preview.js";
import * as rules from "../validate/rules.js";
import { keys, listPage } from "./page-token.js";

export interface PreviewApiDeps {
  store: Store;
  keyring?: Keyring;
  exposure: ExposureSettings;
  rollout?: { environmentChanged(environmentId: string): Promise<void> };
  /** A preview's commit status is due (the reporter looks now). */
  statusDue?: () => void;
  /** Pins previews' images to digests, as deploys' (absent: images run as named). */
  images?: ImageResolver;
}

/** The provider's default commit-status API. */
const STATUS_API = { github: "https://api.github.com", gitlab: "https://gitlab.com/api/v4" } as const;

export function previewMsg(v: PreviewView, exposure: ExposureSettings): Preview {
  const p = v.preview;
  return create(PreviewSchema, {
    id: p.id,
    workspaceId: p.workspace_id,
    project: v.project,
    baseEnvironment: v.base,
    name: p.name,
    environmentId: p.environment_id ?? "",
    state: p.state,
    url: v.endpoint ? endpointUrl(exposure, v.endpoint.hostname, v.endpoint.pathPrefix) : "",
    image: p.image,
    region: p.region,
    withSecrets: Number(p.with_secrets) === 1,
    expiresAtUnixMs: BigInt(p.expires_at),
    createdAtUnixMs: BigInt(p.created_at),
    source: p.source,
    pullRequest:
      p.source === "cli"
        ? undefined
        : create(PullRequestSchema, {
            provider: p.source,
            repository: p.repository,
            number: BigInt(p.pr_number),
            headSha: p.head_sha,
            fork: Number(p.fork) === 1,
          }),
    cpuMillicores: BigInt(p.cpu_millicores),
    memoryMib: BigInt(p.memory_mib),
  });
}

export function previewHookMsg(v: PreviewHookView): PreviewHook {
  const h = v.hook;
  return create(PreviewHookSchema, {
    id: h.id,
    project: v.project,
    baseEnvironment: v.base,
    provider: h.provider,
    repository: h.repository,
    path: `/hooks/${h.id}`,
    imageTemplate: h.image_template,
    region: h.region,
    ttlSeconds: BigInt(Math.round(Number(h.ttl_ms) / 1000)),
    withSecrets: Number(h.with_secrets) === 1,
    statusApiUrl: h.status_api_url,
    reportsStatus: h.status_token_sealed !== null,
    verification: h.verification,
    createdAtUnixMs: BigInt(h.created_at),
  });
}

function limitsMsg(l: PreviewLimits): PreviewLimitsMsg {
  return create(PreviewLimitsSchema, { forkApproval: l.forkApproval });
}

export function previewServiceImpl(d: PreviewApiDeps): ServiceImpl<typeof PreviewService> {
  const { store, exposure } = d;
  const deps: PreviewDeps = { keyring: d.keyring, exposure };
  return {
    async createPreview(req) {
      const v = validateCreatePreview(req);
      const imageDigest = await pinImage(d.images, store.db, d.keyring, v.workspace, "image", v.image);
      const out = await createPreview(store, deps, { ...v, base: v.base, imageDigest });
      if (out.environmentId) await d.rollout?.environmentChanged(out.environmentId);
      return { preview: previewMsg(await viewOfPreview(store.db, out.preview), exposure) };
    },
    async listPreviews(req, ctx) {
      const workspace = await findWorkspace(store.db, workspaceRef("workspace", req.workspace));
      const project =
        req.project === ""
          ? undefined
          : (await findProject(store.db, workspace.id, projectRef("project", req.project))).project;
      const page = await listPage(
        ctx,
        req,
        `ListPreviews\u0000${workspace.id}\u0000${project?.id ?? ""}`,
        keys.tuple("string", "string"),
        (q) => listPreviews(store.db, workspace.id, project?.id, q),
        (v) => [v.preview.name, v.preview.id] as const,
      );
      return { previews: page.items.map((v) => previewMsg(v, exposure)), nextPageToken: page.nextPageToken };
    },
    async deletePreview(req) {
      const ref = validatePreviewRef(req);
      const p = await deletePreview(store, ref);
      await finishDeletions(store);
      return { preview: previewMsg(await viewOfPreview(store.db, p), exposure) };
    },
    async approvePreview(req) {
      const ref = validatePreviewRef(req);
      const { image } = (await previewView(store.db, ref)).preview;
      const digest = await pinImage(d.images, store.db, d.keyring, ref.workspace, "image", image);
      const out = await approvePreview(store, deps, ref, { image, digest });
      if (out.environmentId) await d.rollout?.environmentChanged(out.environmentId);
      d.statusDue?.();
      return { preview: previewMsg(await previewView(store.db, ref), exposure) };
    },
    async getPreviewLimits(req) {
      const workspace = await findWorkspace(store.db, workspaceRef("workspace", req.workspace));
      const used = await previewUsage(store.db, workspace.id);
      return {
        limits: limitsMsg(await previewLimitsOf(store.db, workspace.id)),
        previews: used.previews,
        cpuMillicores: BigInt(used.cpuMillicores),
        memoryMib: BigInt(used.memoryMib),
      };
    },
    async setPreviewLimits(req) {
      const workspace = await findWorkspace(store.db, workspaceRef("workspace", req.workspace));
      return { limits: limitsMsg(await setPreviewLimits(store, workspace.id, validatePreviewLimits(req.limits))) };
    },
    async createPreviewHook(req) {
      const v = validateCreatePreviewHook(req);
      const hook = await createPreviewHook(store, d.keyring, {
        ...v,
        statusApiUrl: v.statusApiUrl ?? STATUS_API[v.provider],
      });
      const [view] = await hookViews(store.db, [hook]);
      return { hook: view ? previewHookMsg(view) : undefined };
    },
    async listPreviewHooks(req, ctx) {
      const workspace = await findWorkspace(store.db, workspaceRef("workspace", req.workspace));
      const page = await listPage(
        ctx,
        req,
        `ListPreviewHooks\u0000${workspace.id}`,
        keys.tuple("number", "string"),
        (q) => listPreviewHooks(store.db, workspace.id, q),
        (v) => [v.hook.created_at, v.hook.id] as const,
      );
      return { hooks: page.items.map(previewHookMsg), nextPageToken: page.nextPageToken };
    },
    async deletePreviewHook(req) {
      const workspace = await findWorkspace(store.db, workspaceRef("workspace", req.workspace));
      await deletePreviewHook(store, workspace.id, rules.id("hook_id", req.hookId, "pwh"));
      return {};
    },
  };
}
