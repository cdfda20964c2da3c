// What a user token's scope lets it reach, in one place for every method of the public API. Pure:
// the Authenticator (./authenticator.ts) reads what a request claims here, resolves it against
// the database, and asks `decide`.
//
// Each method's rule is read from its policy (./policy.ts), declared beside the method in its
// proto (`option (krane.ctrl.v1.policy) = {scope: …}`; a test walks every generated service, and
// test/integration/ctrl/tenancy.test.ts calls every method of every public service with another
// workspace's token):
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
// tokens (permission_denied): a new method is closed until someone declares its policy.
import type { DescMethod } from "@bufbuild/protobuf";
import { policyOf, Scope } from "./policy.js";
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

const rules = new WeakMap<DescMethod, MethodRule | null>();

/** The method's rule, from its declared policy (undefined: none, or an agents' method). */
export function ruleOf(method: DescMethod): MethodRule | undefined {
  let rule = rules.get(method);
  if (rule === undefined) {
    rule = ruleFrom(method);
    rules.set(method, rule);
  }
  return rule ?? undefined;
}

function ruleFrom(method: DescMethod): MethodRule | null {
  const p = policyOf(method);
  switch (p?.scope) {
    case Scope.INSTALLATION:
      return { kind: "installation" };
    case Scope.CALLER:
      return { kind: "caller" };
    case Scope.DEPLOYMENT:
      return { kind: "deployment", field: p.field || "deployment_id" };
    case Scope.WORKSPACE:
      return {
        kind: "workspace",
        field: p.field || "workspace",
        ...(p.installationFlag !== "" ? { installationFlag: p.installationFlag } : {}),
      };
    default:
      return null;
  }
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
