// Validation of RepositoryService requests (pure): the repository's URL (no credentials in it),
// the provider, the fetch credential (a token for an https URL, a deploy key for an ssh one), the
// webhook secret, the branch → environment map and the commit-status settings. A credential is
// never echoed in an error.
import { repositoryTransport, type RepositoryTransport } from "../../builds/git.js";
import { invalidArgument } from "../errors.js";
import { projectRef, workspaceRef } from "./api.js";
import { printableToken, statusApiUrl, webhookSecret } from "./preview.js";
import * as r from "./rules.js";

export type Credential =
  | { readonly kind: "token"; readonly token: string; readonly username: string }
  | { readonly kind: "deploy_key"; readonly privateKey: string }
  | { readonly kind: "none" };

export interface ConnectRepositoryInput {
  readonly workspace: string;
  readonly project: string;
  readonly provider: "github" | "gitlab";
  readonly url: string;
  readonly transport: RepositoryTransport;
  /** "owner/name": what push events name the repository. */
  readonly path: string;
  readonly credential: Credential;
  readonly webhookSecret: string;
  readonly branches: Record<string, string>;
  readonly statusApiUrl: string | undefined;
  /** "" : the fetch token when there is one, else no statuses. */
  readonly statusToken: string;
  /** How pull requests are built (previews "": not at all). */
  readonly pullRequests: PullRequestBuilds;
}

export interface PullRequestBuilds {
  /** The environment (slug) a pull request's preview is made from; "": pull requests build nothing. */
  readonly previews: string;
  /** Pull requests from forks are built too. */
  readonly buildForks: boolean;
}

/** How pull requests are built: a preview base is a slug; forks need one. */
export function validatePullRequestBuilds(req: { previews: string; buildForks: boolean }): PullRequestBuilds {
  const previews = req.previews === "" ? "" : r.slug("previews", req.previews);
  if (req.buildForks && previews === "")
    throw invalidArgument("build_forks", "builds forks' pull requests into previews: name the previews' base too");
  return { previews, buildForks: req.buildForks };
}

/** The repository's path at its host ("owner/name", "group/sub/name"), without ".git". */
export function repositoryPath(url: string): string {
  const rest =
    url.startsWith("https://") || url.startsWith("ssh://")
      ? url.replace(/^[a-z]+:\/\/[^/]+\//, "")
      : url.replace(/^[^:]+:/, "");
  return rest.replace(/\/+$/, "").replace(/\.git$/, "");
}

const PRIVATE_KEY = /^-----BEGIN ([A-Z]+ )?PRIVATE KEY-----\r?\n[\s\S]+\r?\n-----END ([A-Z]+ )?PRIVATE KEY-----\s*$/;

function credentialOf(transport: RepositoryTransport, req: ConnectRequestFields): Credential {
  if (req.token !== "" && req.deployKey !== "")
    throw invalidArgument("token", "give a token (https) or a deploy key (ssh), not both");
  if (transport === "https") {
    if (req.deployKey !== "")
      throw invalidArgument("deploy_key", "is for an ssh URL; an https URL is fetched with a token");
    if (req.token === "") return { kind: "none" };
    return {
      kind: "token",
      token: printableToken("token", req.token),
      username: req.tokenUsername === "" ? "x-access-token" : r.text("token_username", req.tokenUsername, 100),
    };
  }
  if (req.token !== "") throw invalidArgument("token", "is for an https URL; an ssh URL is fetched with a deploy key");
  if (req.deployKey === "") throw invalidArgument("deploy_key", "is required for an ssh URL");
  if (req.deployKey.length > 16_384 || !PRIVATE_KEY.test(req.deployKey))
    throw invalidArgument("deploy_key", "must be a private key in PEM or OpenSSH form (-----BEGIN … PRIVATE KEY-----)");
  return { kind: "deploy_key", privateKey: req.deployKey };
}

export interface ConnectRequestFields {
  workspace: string;
  project: string;
  provider: string;
  url: string;
  token: string;
  tokenUsername: string;
  deployKey: string;
  webhookSecret: string;
  branches: readonly string[];
  statusApiUrl: string;
  statusToken: string;
  previews: string;
  buildForks: boolean;
}

export function validateConnectRepository(req: ConnectRequestFields): ConnectRepositoryInput {
  if (req.provider !== "github" && req.provider !== "gitlab")
    throw invalidArgument("provider", 'must be "github" or "gitlab"');
  if (req.url === "") throw invalidArgument("url", "is required");
  const t = repositoryTransport(req.url);
  if (!t.ok) throw invalidArgument("url", t.problem);
  const path = repositoryPath(req.url);
  if (path === "" || path.includes("..")) throw invalidArgument("url", "names no repository path");
  return {
    workspace: workspaceRef("workspace", req.workspace),
    project: projectRef("project", req.project),
    provider: req.provider,
    url: req.url,
    transport: t.transport,
    path,
    credential: credentialOf(t.transport, req),
    webhookSecret: webhookSecret("webhook_secret", req.provider, req.webhookSecret),
    branches: validateBranches(req.branches),
    statusApiUrl: req.statusApiUrl === "" ? undefined : statusApiUrl("status_api_url", req.statusApiUrl),
    statusToken: printableToken("status_token", req.statusToken),
    pullRequests: validatePullRequestBuilds(req),
  };
}

/** The branch → environment map: at least one entry. */
export function validateBranches(entries: readonly string[]): Record<string, string> {
  if (entries.length === 0) throw invalidArgument("branches", "map at least one branch (e.g. main=production)");
  return parseBranchMap("branches", entries);
}

/** A branch name as git allows it (git check-ref-format's rules, for one branch). */
function branchName(field: string, v: string): string {
  if (
    v === "" ||
    v.length > 255 ||
    [...v].some((c) => c <= " " || c === "\x7f") ||
    /[~^:?*[\\]/.test(v) ||
    v.includes("..") ||
    v.includes("@{") ||
    v.includes("//") ||
    v.startsWith("/") ||
    v.startsWith("-") ||
    v.endsWith("/") ||
    v.endsWith(".") ||
    v.endsWith(".lock") ||
    v === "@"
  )
    throw invalidArgument(field, `"${v}" is not a branch name git allows`);
  return v;
}

/** `branch=environment` entries as a map; each branch at most once. */
export function parseBranchMap(field: string, entries: readonly string[]): Record<string, string> {
  r.list(field, entries, 50);
  const out: Record<string, string> = {};
  entries.forEach((e, i) => {
    const at = `${field}[${i}]`;
    const eq = e.lastIndexOf("=");
    if (eq <= 0) throw invalidArgument(at, `"${e}" is not branch=environment (e.g. main=production)`);
    const branch = branchName(at, e.slice(0, eq));
    const environment = r.slug(at, e.slice(eq + 1));
    if (branch in out) throw invalidArgument(at, `branch "${branch}" is mapped twice`);
    out[branch] = environment;
  });
  return out;
}
