// What a user token's scope lets it reach, in one place for every method of the public API. Pure:
// the Authenticator (./authenticator.ts) reads what a request claims here, resolves it against
// the database, and asks `decide`.
//
// Each method has exactly one rule (METHOD_RULES; the compiler wants one for every method of a
// service listed there, and test/integration/ctrl/tenancy.test.ts calls every method of every
// public service with another workspace's token):
//   - installation: installation tokens only (regions and cluster tokens, creating and deleting
//     workspaces, the installation's audit chain, a workspace's preview quotas). A workspace token
//     gets permission_denied: that such calls exist is no secret.
//   - workspace: the request names its workspace in a field (slug or id). A workspace token may
//     name only its own; anything else answers not_found exactly as a workspace that does not
//     exist would (the message names what the caller sent), so a tenant learns nothing of other
//     workspaces, not even that they exist. Everything below the workspace (projects,
//     environments, hooks…) is looked up within it by the handlers' finders.
//   - deployment: the request names a deployment by id; it must be one of the caller's
//     workspace's, else not_found as for an id that does not exist.
//   - caller: the handler answers from the caller's own scope (`callerScope`, ./principal.ts):
//     ListWorkspaces lists only the caller's workspace, the API token calls see and change only
//     its scope's tokens, the live overview shows only its workspace's environments.
// Installation tokens pass every rule. A public method with no rule is refused to workspace
// tokens (permission_denied): a new method is closed until someone writes its rule.
import type { DescService } from "@bufbuild/protobuf";
import {
  ApiTokenService,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../gen/krane/ctrl/v1/api_pb.js";
import { AuditService } from "../../gen/krane/ctrl/v1/audit_pb.js";
import { ConfigService } from "../../gen/krane/ctrl/v1/config_pb.js";
import { InstanceEventService } from "../../gen/krane/ctrl/v1/events_pb.js";
import { DomainService, EndpointService } from "../../gen/krane/ctrl/v1/exposure_pb.js";
import { JobService } from "../../gen/krane/ctrl/v1/job_pb.js";
import { LiveService, MetricsService } from "../../gen/krane/ctrl/v1/live_pb.js";
import { LogService } from "../../gen/krane/ctrl/v1/logs_pb.js";
import { PreviewService } from "../../gen/krane/ctrl/v1/preview_pb.js";
import { ReleaseService } from "../../gen/krane/ctrl/v1/release_pb.js";
import { RolloutService } from "../../gen/krane/ctrl/v1/rollout_pb.js";
import type { ScopeWorkspace } from "./principal.js";

export type MethodRule =
  | { readonly kind: "installation" }
  | {
      readonly kind: "workspace";
      /** The field naming the workspace (nested: "filter.workspace"). */
      readonly field: string;
      /** A boolean field that, when true, asks for the installation instead (the audit log's). */
      readonly installationFlag?: string;
    }
  | { readonly kind: "deployment"; readonly field: string }
  | { readonly kind: "caller" };

const INSTALLATION: MethodRule = { kind: "installation" };
const WORKSPACE: MethodRule = { kind: "workspace", field: "workspace" };
const DEPLOYMENT: MethodRule = { kind: "deployment", field: "deployment_id" };
const CALLER: MethodRule = { kind: "caller" };

type Rules<S extends DescService> = { readonly [K in keyof S["method"]]: MethodRule };

function rules<S extends DescService>(
  service: S,
  byMethod: Rules<S>,
): [DescService, Readonly<Record<string, MethodRule>>] {
  return [service, byMethod as Readonly<Record<string, MethodRule>>];
}

/** Every public service and the rule of each of its methods (by the method's local name). */
const SERVICES: readonly [DescService, Readonly<Record<string, MethodRule>>][] = [
  rules(WorkspaceService, {
    createWorkspace: INSTALLATION,
    getWorkspace: WORKSPACE,
    listWorkspaces: CALLER,
    deleteWorkspace: INSTALLATION,
  }),
  rules(ProjectService, {
    createProject: WORKSPACE,
    getProject: WORKSPACE,
    listProjects: WORKSPACE,
    deleteProject: WORKSPACE,
  }),
  rules(EnvironmentService, {
    createEnvironment: WORKSPACE,
    getEnvironment: WORKSPACE,
    listEnvironments: WORKSPACE,
    updateEnvironment: WORKSPACE,
    deleteEnvironment: WORKSPACE,
  }),
  rules(DeploymentService, {
    createDeployment: WORKSPACE,
    getDeployment: DEPLOYMENT,
    listDeployments: WORKSPACE,
    deleteDeployment: DEPLOYMENT,
  }),
  rules(RegionService, {
    createRegion: INSTALLATION,
    listRegions: INSTALLATION,
    createClusterToken: INSTALLATION,
    listClusters: INSTALLATION,
    revokeClusterToken: INSTALLATION,
  }),
  rules(ApiTokenService, { createApiToken: CALLER, listApiTokens: CALLER, revokeApiToken: CALLER }),
  rules(StatusService, { getEnvironmentStatus: WORKSPACE }),
  rules(RolloutService, {
    scale: WORKSPACE,
    pause: WORKSPACE,
    resume: WORKSPACE,
    undo: WORKSPACE,
    restart: WORKSPACE,
    history: WORKSPACE,
    getRolloutStatus: WORKSPACE,
    promote: WORKSPACE,
    abort: WORKSPACE,
  }),
  rules(ConfigService, {
    setConfig: WORKSPACE,
    unsetConfig: WORKSPACE,
    listConfig: WORKSPACE,
    setSecrets: WORKSPACE,
    unsetSecrets: WORKSPACE,
    listSecrets: WORKSPACE,
  }),
  rules(ReleaseService, {
    applyRelease: WORKSPACE,
    getRelease: WORKSPACE,
    listReleases: WORKSPACE,
    deleteRelease: WORKSPACE,
  }),
  rules(JobService, { putJob: WORKSPACE, listJobs: WORKSPACE, deleteJob: WORKSPACE }),
  rules(EndpointService, { setEndpoint: WORKSPACE, listEndpoints: WORKSPACE, deleteEndpoint: WORKSPACE }),
  rules(DomainService, {
    addDomain: WORKSPACE,
    listDomains: WORKSPACE,
    verifyDomain: WORKSPACE,
    removeDomain: WORKSPACE,
  }),
  rules(InstanceEventService, { listInstanceEvents: WORKSPACE }),
  rules(LogService, { streamLogs: WORKSPACE }),
  // The overview holds back other workspaces' environments, and the installation's clusters.
  rules(LiveService, { watchOverview: CALLER, watchEnvironment: WORKSPACE }),
  rules(MetricsService, { getRevisionMetrics: WORKSPACE }),
  rules(AuditService, {
    listAuditEvents: { kind: "workspace", field: "filter.workspace", installationFlag: "filter.installation" },
    exportAuditEvents: { kind: "workspace", field: "filter.workspace", installationFlag: "filter.installation" },
  }),
  rules(PreviewService, {
    createPreview: WORKSPACE,
    listPreviews: WORKSPACE,
    deletePreview: WORKSPACE,
    approvePreview: WORKSPACE,
    getPreviewLimits: WORKSPACE,
    // A workspace's quota is the platform's to set, not the tenant's.
    setPreviewLimits: INSTALLATION,
    createPreviewHook: WORKSPACE,
    listPreviewHooks: WORKSPACE,
    deletePreviewHook: WORKSPACE,
  }),
];

/** Every public method's rule, by "package.Service/Method". */
export const METHOD_RULES: ReadonlyMap<string, MethodRule> = new Map(
  SERVICES.flatMap(([service, byMethod]) =>
    service.methods.map((m): [string, MethodRule] => {
      const rule = byMethod[m.localName];
      if (rule === undefined) throw new Error(`no tenancy rule for ${service.typeName}/${m.name}`);
      return [`${service.typeName}/${m.name}`, rule];
    }),
  ),
);

/** The public services the rules cover (the tenancy test compares them with src/gen). */
export const RULED_SERVICES: readonly DescService[] = SERVICES.map(([s]) => s);

export function ruleOf(serviceTypeName: string, methodName: string): MethodRule | undefined {
  return METHOD_RULES.get(`${serviceTypeName}/${methodName}`);
}

/** A request's message, read by field name (protobuf-es messages are plain objects). */
type Fields = Readonly<Record<string, unknown>>;

/** The value at a dotted path of proto field names ("filter.workspace") of a request. */
function valueAt(message: unknown, path: string): unknown {
  let v: unknown = message;
  for (const part of path.split(".")) {
    if (typeof v !== "object" || v === null) return undefined;
    v = (v as Fields)[part.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())];
  }
  return v;
}

/** What a request claims to be about, read by its method's rule. */
export type Claim =
  | { kind: "installation" }
  | { kind: "workspace"; ref: string }
  | { kind: "deployment"; id: string }
  | { kind: "caller" }
  /** The field that names the workspace (or deployment) is empty. */
  | { kind: "missing"; field: string }
  /** The method has no rule. */
  | { kind: "unruled" };

export function claimOf(rule: MethodRule | undefined, message: unknown): Claim {
  if (rule === undefined) return { kind: "unruled" };
  switch (rule.kind) {
    case "installation":
      return { kind: "installation" };
    case "caller":
      return { kind: "caller" };
    case "deployment": {
      const id = valueAt(message, rule.field);
      return typeof id === "string" && id !== "" ? { kind: "deployment", id } : { kind: "missing", field: rule.field };
    }
    case "workspace": {
      if (rule.installationFlag !== undefined && valueAt(message, rule.installationFlag) === true)
        return { kind: "installation" };
      const ref = valueAt(message, rule.field);
      return typeof ref === "string" && ref !== ""
        ? { kind: "workspace", ref }
        : { kind: "missing", field: rule.field };
    }
  }
}

/**
 * What must be read before deciding a workspace token's claim: nothing (the verdict follows from
 * the claim alone), the workspace a slug names now, or a deployment's workspace. A reference that
 * is neither the token's workspace's slug nor its id is refused without a read, so how long the
 * answer takes says nothing of whether it exists.
 */
export type Lookup =
  { kind: "none" } | { kind: "workspace-by-slug"; slug: string } | { kind: "deployment"; id: string };

export function lookupFor(own: ScopeWorkspace, claim: Claim): Lookup {
  if (claim.kind === "deployment") return { kind: "deployment", id: claim.id };
  // By slug, the slug may have been freed and taken by another workspace since the token's scope
  // was read (its workspace deleted, one created again under the same slug): read it again.
  if (claim.kind === "workspace" && claim.ref === own.slug && claim.ref !== own.id)
    return { kind: "workspace-by-slug", slug: claim.ref };
  return { kind: "none" };
}

export type Verdict =
  { allow: true } | { allow: false; code: "not_found" | "permission_denied" | "invalid_argument"; message: string };

const ALLOW: Verdict = { allow: true };

/**
 * Whether a caller of `scope` (null: an installation token) may make a call claiming `claim`.
 * `resolved` is the workspace id the lookup found (undefined: none, or no lookup was needed).
 * A refusal of another workspace's object reads exactly as the refusal of one that does not
 * exist.
 */
export function decide(scope: ScopeWorkspace | null, claim: Claim, resolved?: string): Verdict {
  if (scope === null) return ALLOW;
  switch (claim.kind) {
    case "caller":
      return ALLOW;
    case "installation":
      return { allow: false, code: "permission_denied", message: "this call needs an installation API token" };
    case "unruled":
      return {
        allow: false,
        code: "permission_denied",
        message: "this call is open to installation API tokens only (it has no workspace rule)",
      };
    case "missing":
      return { allow: false, code: "invalid_argument", message: `${claim.field}: is required` };
    case "workspace": {
      const own = claim.ref === scope.id || (claim.ref === scope.slug && resolved === scope.id);
      return own
        ? ALLOW
        : { allow: false, code: "not_found", message: `workspace "${claim.ref.slice(0, 64)}" not found` };
    }
    case "deployment":
      return resolved === scope.id
        ? ALLOW
        : { allow: false, code: "not_found", message: `deployment "${claim.id.slice(0, 64)}" not found` };
  }
}
