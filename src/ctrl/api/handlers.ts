// The public API: workspaces, projects, environments, deployments, regions/clusters, API tokens
// and status. Each handler validates (→ InvalidArgument naming the field), calls the domain, and
// converts. Every List method answers one page (./page-token.ts) in the order its response
// documents.
import { edgePolicyMsg } from "./edge-policies.js";
import { storedPolicies } from "../domain/edge-policies.js";
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  type GetEnvironmentStatusResponse,
  ApiTokenService,
  DeploymentRegionStatusSchema,
  DeploymentService,
  DeploymentStatusSchema,
  EnvironmentService,
  GetEnvironmentStatusResponseSchema,
  ProjectService,
  RegionSchema,
  RegionService,
  SentinelStatusSchema,
  StatusService,
  WorkspaceService,
} from "../../gen/krane/ctrl/v1/api_pb.js";
import { AutoscaleStatusSchema } from "../../gen/krane/ctrl/v1/autoscale_pb.js";
import {
  callerScope,
  callerUser,
  principalKey,
  scopeRefusalKey,
  type RevocationListener,
  type UserPrincipal,
} from "../auth/principal.js";
import { DomainError, invalidArgument, notFound } from "../errors.js";
import type { Store } from "../db/store.js";
import { createRegion, issueClusterToken, revokeClusterToken } from "../domain/clusters.js";
import { createAskedDeployment, deleteDeployment } from "../domain/deployments.js";
import { pinImage } from "../images/pin.js";
import type { ImageResolver } from "../images/resolve.js";
import type { Keyring } from "../secrets/keyring.js";
import { updateEnvironment } from "../domain/environment-update.js";
import { createEnvironment } from "../domain/environments.js";
import { DEFAULT_EXPOSURE, type ExposureSettings } from "../domain/exposure.js";
import { createProject, createWorkspace } from "../domain/tenancy.js";
import { createApiToken, hashToken, revokeApiToken, type NewTokenOwner, type TokenScope } from "../domain/tokens.js";
import { allows, withArticle } from "../../contracts/roles.js";
import { clusterLag, listApiTokens, listClusters, listRegions } from "../read/clusters.js";
import {
  desiredReplicasByRegion,
  desiredReplicasOf,
  getDeployment,
  listDeployments,
  pinnedDeployment,
} from "../read/deployments.js";
import { environmentStatus } from "../read/status.js";
import { currentRevision } from "../rollout/actions.js";
import {
  environmentRegions,
  findEnvironment,
  findProject,
  findWorkspace,
  listEnvironments,
  listProjects,
  listWorkspaces,
  regionsOfEnvironments,
} from "../read/tenancy.js";
import { autoscaleMsg } from "../payloads/sentinel.js";
import { exposureStatus } from "./exposure.js";
import {
  apiTokenId,
  deploymentId,
  environmentRef,
  projectRef,
  regionName,
  validateCreateDeployment,
  validateCreateEnvironment,
  validateCreateProject,
  validateCreateApiToken,
  validateCreateWorkspace,
  validateEnvironmentRef,
  validateUpdateEnvironment,
  workspaceRef,
} from "../validate/api.js";
import * as rules from "../validate/rules.js";
import type { EnvironmentRef } from "../validate/types.js";
import { deleteEnvironmentCall, deleteProjectCall, deleteWorkspaceCall } from "./deletion.js";
import {
  apiTokenMsg,
  clusterMsg,
  deploymentMsg,
  environmentMsg,
  healthEnum,
  instanceMsg,
  projectMsg,
  workspaceMsg,
} from "./convert.js";
import { keys, listPage } from "./page-token.js";

export interface ApiDeps {
  store: Store;
  /** The rollout driver: runs passes after deployments change (absent in store-only tests). */
  rollout?: { environmentChanged(environmentId: string): Promise<void> };
  /** This process's authenticator, told about revoked credentials (absent in store-only tests). */
  auth?: RevocationListener;
  /** Generated addresses (status shows endpoint URLs); default DEFAULT_EXPOSURE. */
  exposure?: ExposureSettings;
  /** Pins deploys' images to digests (absent: images run as named). */
  images?: ImageResolver;
  /** Opens the workspaces' registry credentials (absent: none can be used). */
  keyring?: Keyring;
}

export function workspaceServiceImpl({ store }: ApiDeps): ServiceImpl<typeof WorkspaceService> {
  return {
    async createWorkspace(req) {
      return { workspace: workspaceMsg(await createWorkspace(store, validateCreateWorkspace(req))) };
    },
    async getWorkspace(req) {
      return { workspace: workspaceMsg(await findWorkspace(store.db, workspaceRef("workspace", req.workspace))) };
    },
    async listWorkspaces(req, ctx) {
      // A workspace token sees its own workspace only.
      const scope = callerScope(ctx);
      const only = scope === "installation" ? undefined : scope.workspaceId;
      const page = await listPage(
        ctx,
        req,
        `ListWorkspaces\u0000${only ?? ""}`,
        keys.string,
        (q) => listWorkspaces(store.db, q, only),
        (w) => w.slug,
      );
      return { workspaces: page.items.map(workspaceMsg), nextPageToken: page.nextPageToken };
    },
    async deleteWorkspace(req) {
      return { deletion: await deleteWorkspaceCall(store, req) };
    },
  };
}

export function projectServiceImpl({ store }: ApiDeps): ServiceImpl<typeof ProjectService> {
  return {
    async createProject(req) {
      return { project: projectMsg(await createProject(store, validateCreateProject(req))) };
    },
    async getProject(req) {
      const { project } = await findProject(
        store.db,
        workspaceRef("workspace", req.workspace),
        projectRef("project", req.project),
      );
      return { project: projectMsg(project) };
    },
    async listProjects(req, ctx) {
      const workspace = workspaceRef("workspace", req.workspace);
      const page = await listPage(
        ctx,
        req,
        `ListProjects\u0000${workspace}`,
        keys.string,
        (q) => listProjects(store.db, workspace, q),
        (p) => p.slug,
      );
      return { projects: page.items.map(projectMsg), nextPageToken: page.nextPageToken };
    },
    async deleteProject(req) {
      return { deletion: await deleteProjectCall(store, req) };
    },
  };
}

export function environmentServiceImpl({ store, rollout }: ApiDeps): ServiceImpl<typeof EnvironmentService> {
  return {
    async createEnvironment(req) {
      const ctx = await createEnvironment(store, validateCreateEnvironment(req));
      return { environment: environmentMsg(ctx.environment, await environmentRegions(store.db, ctx.environment.id)) };
    },
    async getEnvironment(req) {
      const ctx = await findEnvironment(store.db, validateEnvironmentRef(req));
      return { environment: environmentMsg(ctx.environment, await environmentRegions(store.db, ctx.environment.id)) };
    },
    async listEnvironments(req, ctx) {
      const workspace = workspaceRef("workspace", req.workspace);
      const project = projectRef("project", req.project);
      const page = await listPage(
        ctx,
        req,
        `ListEnvironments\u0000${workspace}\u0000${project}`,
        keys.string,
        (q) => listEnvironments(store.db, workspace, project, q),
        (e) => e.environment.slug,
      );
      const regions = await regionsOfEnvironments(
        store.db,
        page.items.map((e) => e.environment.id),
      );
      return {
        environments: page.items.map((e) => environmentMsg(e.environment, regions.get(e.environment.id) ?? [])),
        nextPageToken: page.nextPageToken,
      };
    },
    async updateEnvironment(req) {
      const updated = await updateEnvironment(store, validateUpdateEnvironment(req));
      if (updated.changed && rollout) await rollout.environmentChanged(updated.context.environment.id);
      return { environment: environmentMsg(updated.context.environment, updated.regions) };
    },
    async deleteEnvironment(req) {
      return { deletion: await deleteEnvironmentCall(store, req) };
    },
  };
}

export function deploymentServiceImpl({
  store,
  rollout,
  images,
  keyring,
}: ApiDeps): ServiceImpl<typeof DeploymentService> {
  return {
    async createDeployment(req) {
      const ask = validateCreateDeployment(req);
      // Once, before anything is recorded: a registry that cannot say refuses the deploy.
      if (images) ask.imageDigest = await pinImage(images, store.db, keyring, ask.workspace, "image", ask.image);
      const ctx = await createAskedDeployment(store, ask, currentRevision);
      await rollout?.environmentChanged(ctx.environment.id);
      return {
        deployment: deploymentMsg(ctx, await desiredReplicasByRegion(store.db, ctx.deployment.id)),
        pinnedDeploymentId: await pinnedDeployment(store.db, ctx.environment.id),
      };
    },
    async getDeployment(req) {
      const ctx = await getDeployment(store.db, deploymentId("deployment_id", req.deploymentId));
      return { deployment: deploymentMsg(ctx, await desiredReplicasByRegion(store.db, ctx.deployment.id)) };
    },
    async listDeployments(req, ctx) {
      const workspace = workspaceRef("workspace", req.workspace);
      const project = req.project === "" ? undefined : projectRef("project", req.project);
      let environment: string | undefined;
      if (req.environment !== "") {
        if (project === undefined) throw rules.requiredWith("project", "environment");
        environment = environmentRef("environment", req.environment);
      }
      const page = await listPage(
        ctx,
        req,
        `ListDeployments\u0000${workspace}\u0000${project ?? ""}\u0000${environment ?? ""}`,
        keys.tuple("number", "number", "string"),
        (q) => listDeployments(store.db, { workspace, project, environment }, q),
        (d) => [d.deployment.created_at, d.deployment.revision, d.deployment.id] as const,
      );
      const byRegion = await desiredReplicasOf(
        store.db,
        page.items.map((d) => d.deployment.id),
      );
      const replicasOf = (id: string): { region: string; replicas: number }[] =>
        [...byRegion]
          .flatMap(([region, m]) => (m.has(id) ? [{ region, replicas: m.get(id) ?? 0 }] : []))
          .sort((a, b) => (a.region < b.region ? -1 : 1));
      return {
        deployments: page.items.map((d) => deploymentMsg(d, replicasOf(d.deployment.id))),
        nextPageToken: page.nextPageToken,
      };
    },
    async deleteDeployment(req) {
      const deleted = await getDeployment(store.db, deploymentId("deployment_id", req.deploymentId));
      await deleteDeployment(store, deleted.deployment.id);
      await rollout?.environmentChanged(deleted.environment.id);
      return {};
    },
  };
}

export function regionServiceImpl({ store, auth }: ApiDeps): ServiceImpl<typeof RegionService> {
  return {
    async createRegion(req) {
      const r = await createRegion(store, regionName("name", req.name));
      return { region: create(RegionSchema, { name: r.name, createdAtUnixMs: BigInt(r.created_at) }) };
    },
    async listRegions(req, ctx) {
      const page = await listPage(
        ctx,
        req,
        "ListRegions",
        keys.string,
        (q) => listRegions(store.db, q),
        (r) => r.name,
      );
      return {
        regions: page.items.map((r) => create(RegionSchema, { name: r.name, createdAtUnixMs: BigInt(r.created_at) })),
        nextPageToken: page.nextPageToken,
      };
    },
    async createClusterToken(req) {
      const region = regionName("region", req.region);
      const name = req.clusterName === "" ? "default" : rules.slug("cluster_name", req.clusterName);
      const { cluster, token } = await issueClusterToken(store, region, name);
      // Rotation retires the previous token at once here, streams included.
      auth?.forgetCluster(cluster.id, hashToken(token));
      return { cluster: clusterMsg(cluster), token };
    },
    async revokeClusterToken(req) {
      const region = regionName("region", req.region);
      const name = req.clusterName === "" ? "default" : rules.slug("cluster_name", req.clusterName);
      const cluster = await revokeClusterToken(store, region, name);
      auth?.forgetCluster(cluster.id);
      return { cluster: clusterMsg(cluster) };
    },
    async listClusters(req, ctx) {
      const region = req.region === "" ? undefined : regionName("region", req.region);
      const page = await listPage(
        ctx,
        req,
        `ListClusters\u0000${region ?? ""}`,
        keys.tuple("string", "string"),
        (q) => listClusters(store.db, region, q),
        (c) => [c.region, c.name] as const,
      );
      const lag = await clusterLag(store.db, page.items);
      return { clusters: page.items.map((c) => clusterMsg(c, lag.get(c.id))), nextPageToken: page.nextPageToken };
    },
  };
}

function callerTokenId(ctx: HandlerContext): string | undefined {
  const p = ctx.values.get(principalKey);
  return p?.kind === "user" ? p.tokenId : undefined;
}

/**
 * Whose tokens a user manages: an installation token every token; a workspace admin (a member or
 * service account whose role is admin or owner) the workspace's; anyone else their own.
 */
function tokenScopeOf(u: UserPrincipal): TokenScope {
  if (u.workspace === null) return "installation";
  const workspaceId = u.workspace.id;
  if (u.role !== undefined && allows(u.role, "admin")) return { workspaceId };
  if (u.member) return { workspaceId, memberId: u.member.id };
  if (u.serviceAccount) return { workspaceId, serviceAccountId: u.serviceAccount.id };
  return { workspaceId };
}

/**
 * Tokens within a workspace: every member or service account may create more of its own (so a
 * tenant's CI tokens need no platform admin) and list and revoke those; an admin manages every
 * token of the workspace and mints tokens of its service accounts (none of a role above their
 * own). Nothing here reaches another scope, nor mints an installation token.
 */
export function apiTokenServiceImpl({ store, auth }: ApiDeps): ServiceImpl<typeof ApiTokenService> {
  return {
    async createApiToken(req, ctx) {
      const v = validateCreateApiToken(req);
      const user = callerUser(ctx);
      let workspace = v.workspace;
      let owner: NewTokenOwner | undefined;
      if (user.workspace === null) {
        if (workspace === null && v.serviceAccount !== null)
          throw invalidArgument("service_account", "needs a workspace: an installation token has no owner");
        if (workspace !== null)
          owner =
            v.serviceAccount === null
              ? { ownServiceAccount: true }
              : { serviceAccount: v.serviceAccount, granter: "installation" };
      } else {
        const own = user.workspace;
        // Named by slug or id, it must be the caller's own; unnamed, it is.
        if (workspace !== null && workspace !== own.slug && workspace !== own.id) {
          ctx.values.set(scopeRefusalKey, true);
          throw notFound(`workspace "${workspace}"`);
        }
        workspace = own.id;
        const role = user.role ?? "viewer";
        if (v.serviceAccount !== null) {
          if (!allows(role, "admin"))
            throw new DomainError(
              "permission_denied",
              `tokens of a service account are an admin's to make (this token's owner is ${withArticle(role)})`,
            );
          owner = { serviceAccount: v.serviceAccount, granter: role };
        } else if (user.member) owner = { memberId: user.member.id };
        else if (user.serviceAccount) owner = { serviceAccount: user.serviceAccount.id, granter: role };
        else throw notFound(`the owner of api token "${user.name}"`);
      }
      const { row, token } = await createApiToken(store, v.name, workspace, owner);
      return { apiToken: apiTokenMsg(row, callerTokenId(ctx)), token };
    },
    async listApiTokens(req, ctx) {
      const current = callerTokenId(ctx);
      const tokens = tokenScopeOf(callerUser(ctx));
      const page = await listPage(
        ctx,
        req,
        `ListApiTokens\u0000${tokens === "installation" ? "" : `${tokens.workspaceId}\u0000${tokens.memberId ?? tokens.serviceAccountId ?? ""}`}`,
        keys.tuple("number", "string"),
        (q) => listApiTokens(store.db, tokens, q),
        (t) => [t.created_at, t.id] as const,
      );
      return { apiTokens: page.items.map((t) => apiTokenMsg(t, current)), nextPageToken: page.nextPageToken };
    },
    async revokeApiToken(req, ctx) {
      const user = callerUser(ctx);
      const granter = user.workspace === null ? "installation" : (user.role ?? "viewer");
      const row = await revokeApiToken(store, apiTokenId("token_id", req.tokenId), tokenScopeOf(user), granter);
      auth?.forgetUserToken(row.id);
      return { apiToken: apiTokenMsg(row, callerTokenId(ctx)) };
    },
  };
}

/** What GetEnvironmentStatus answers for `ref` (the live views send it too: ../live). */
export async function environmentStatusMsg(
  { store, exposure }: Pick<ApiDeps, "store" | "exposure">,
  ref: EnvironmentRef,
): Promise<GetEnvironmentStatusResponse> {
  const view = await environmentStatus(store.db, ref);
  const env = view.environment.environment;
  const lag = await clusterLag(store.db, view.clusters);
  const exposed = await exposureStatus(
    store.db,
    env.id,
    view.regions.map((r) => r.region),
    exposure ?? DEFAULT_EXPOSURE,
  );
  return create(GetEnvironmentStatusResponseSchema, {
    environment: environmentMsg(env, view.regions),
    deployments: view.deployments.map((d) =>
      create(DeploymentStatusSchema, {
        deployment: deploymentMsg(
          d.deployment,
          d.regions.filter((r) => r.desired).map((r) => ({ region: r.region, replicas: r.desiredReplicas })),
        ),
        regions: d.regions.map((r) =>
          create(DeploymentRegionStatusSchema, {
            region: r.region,
            desiredReplicas: r.desiredReplicas,
            runningInstances: r.instances.filter((i) => i.status === "running").length,
            rejectedReason: r.rejectedReason ?? "",
            instances: r.instances.map(instanceMsg),
          }),
        ),
      }),
    ),
    sentinels: view.sentinels.map((s) =>
      create(SentinelStatusSchema, {
        sentinelId: s.id,
        region: s.region,
        k8sName: s.k8s_name,
        desiredReplicas: env.sentinel_replicas,
        availableReplicas: s.available_replicas,
        health: healthEnum(s.health),
        rejectedReason: s.rejected_reason ?? "",
        reportedAtUnixMs: BigInt(s.reported_at ?? 0),
        address: s.address ?? "",
        routingVersion: BigInt(env.routing_version),
        servedRoutingVersion: BigInt(s.served_routing_version ?? 0),
      }),
    ),
    clusters: view.clusters.map((c) => clusterMsg(c, lag.get(c.id))),
    endpoints: exposed.endpoints,
    domains: exposed.domains,
    edgePolicies: storedPolicies(env).map(edgePolicyMsg),
    autoscale: view.autoscale.map((a) =>
      create(AutoscaleStatusSchema, {
        region: a.region,
        replicas: a.decision?.replicas ?? a.replicas,
        reason: a.decision?.reason ?? "no decision from the region's agent yet",
        decidedAtUnixMs: BigInt(a.decision?.decidedAtMs ?? 0),
        reportedAtUnixMs: BigInt(a.decision?.reportedAtMs ?? 0),
        policy: autoscaleMsg(a.policy),
      }),
    ),
  });
}

export function statusServiceImpl(deps: ApiDeps): ServiceImpl<typeof StatusService> {
  return {
    async getEnvironmentStatus(req) {
      return environmentStatusMsg(deps, validateEnvironmentRef(req));
    },
  };
}
