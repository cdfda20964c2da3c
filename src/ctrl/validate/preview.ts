// Validation of PreviewService requests: names, TTLs, limits, and pull-request hooks (provider,
// repository, the secret's form, the image template, the status API's address). Pure; a secret is
// never echoed.
import { invalidArgument } from "../errors.js";
import { environmentRef, projectRef, workspaceRef } from "./api.js";
import * as r from "./rules.js";

const DAY_S = 86_400;
const DEFAULT_TTL_S = 72 * 3600;

/** ttl_seconds: 0 means 72 hours; at most 30 days. */
export function ttlMs(field: string, seconds: bigint): number {
  if (seconds === 0n) return DEFAULT_TTL_S * 1000;
  return r.intRange(field, seconds, 1, 30 * DAY_S) * 1000;
}

export interface PreviewRefInput {
  workspace: string;
  project: string;
  name: string;
}

export function validatePreviewRef(req: { workspace: string; project: string; name: string }): PreviewRefInput {
  return {
    workspace: workspaceRef("workspace", req.workspace),
    project: projectRef("project", req.project),
    name: r.slug("name", req.name),
  };
}

export function validateCreatePreview(req: {
  workspace: string;
  project: string;
  baseEnvironment: string;
  name: string;
  image: string;
  ttlSeconds: bigint;
  region: string;
  withSecrets: boolean;
}) {
  return {
    ...validatePreviewRef(req),
    base: environmentRef("base_environment", req.baseEnvironment),
    image: r.image("image", req.image),
    ttlMs: ttlMs("ttl_seconds", req.ttlSeconds),
    region: req.region === "" ? undefined : r.slug("region", req.region),
    withSecrets: req.withSecrets,
  };
}

/** The preview settings: fork approval (the max_* fields are unused: previews count in the quotas). */
export function validatePreviewLimits(l: { forkApproval: boolean } | undefined) {
  if (l === undefined) throw invalidArgument("limits", "is required");
  return { forkApproval: l.forkApproval };
}

const GITHUB_REPO = /^[A-Za-z0-9_.-]{1,100}\/[A-Za-z0-9_.-]{1,100}$/;
const GITLAB_REPO = /^([0-9]{1,20}|[A-Za-z0-9_.-]{1,255}(\/[A-Za-z0-9_.-]{1,255}){1,20})$/;

export function statusApiUrl(field: string, v: string): string {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw invalidArgument(field, "must be an https:// URL");
  }
  const loopback = ["127.0.0.1", "localhost", "[::1]"].includes(u.hostname);
  if (u.protocol !== "https:" && !(u.protocol === "http:" && loopback))
    throw invalidArgument(field, "must be an https:// URL (http:// only on a loopback host)");
  if (u.username !== "" || u.password !== "") throw invalidArgument(field, "must not hold credentials");
  return v.replace(/\/+$/, "");
}

/** A webhook's secret as the provider signs with it (GitHub HMAC; GitLab a signing or secret token). */
export function webhookSecret(field: string, provider: "github" | "gitlab", secret: string): string {
  if (secret.length > 512) throw invalidArgument(field, "must be at most 512 characters");
  if (provider === "gitlab" && secret.startsWith("whsec_")) {
    if (Buffer.from(secret.slice(6), "base64").length !== 32)
      throw invalidArgument(field, 'a GitLab signing token is "whsec_" and the base64 of 32 bytes');
  } else if (secret.length < 16 || !/^[\x21-\x7e]+$/.test(secret)) {
    throw invalidArgument(field, "must be at least 16 printable characters without spaces");
  }
  return secret;
}

/** An API token: printable characters without spaces, at most 512 ("" when none is given). */
export function printableToken(field: string, token: string): string {
  if (token !== "" && (token.length > 512 || !/^[\x21-\x7e]+$/.test(token)))
    throw invalidArgument(field, "must be printable characters without spaces, at most 512");
  return token;
}

/** How a hook's deliveries are signed, as preview_hooks.verification and repositories.webhook_verification say. */
export function webhookVerification(provider: "github" | "gitlab", secret: string): string {
  return provider === "github" ? "hmac-sha256" : secret.startsWith("whsec_") ? "signing-token" : "secret-token";
}

export interface PreviewHookInput {
  workspace: string;
  project: string;
  base: string;
  provider: "github" | "gitlab";
  repository: string;
  secret: string;
  imageTemplate: string;
  region: string;
  ttlMs: number;
  withSecrets: boolean;
  statusApiUrl: string | undefined;
  statusToken: string | undefined;
}

export function validateCreatePreviewHook(req: {
  workspace: string;
  project: string;
  baseEnvironment: string;
  provider: string;
  repository: string;
  secret: string;
  imageTemplate: string;
  region: string;
  ttlSeconds: bigint;
  withSecrets: boolean;
  statusApiUrl: string;
  statusToken: string;
}): PreviewHookInput {
  if (req.provider !== "github" && req.provider !== "gitlab")
    throw invalidArgument("provider", 'must be "github" or "gitlab"');
  const provider = req.provider;
  if (!(provider === "github" ? GITHUB_REPO : GITLAB_REPO).test(req.repository))
    throw invalidArgument(
      "repository",
      provider === "github" ? 'must be "owner/name"' : 'must be the project\'s path ("group/name") or numeric id',
    );
  const secret = webhookSecret("secret", provider, req.secret);
  const imageTemplate = r.text("image_template", req.imageTemplate, r.LIMITS.imageMax, true);
  // The template must make a valid image for any pull request.
  r.image(
    "image_template",
    imageTemplate
      .replaceAll("{sha}", "0123456789abcdef0123456789abcdef01234567")
      .replaceAll("{short_sha}", "0123456")
      .replaceAll("{pr}", "12345")
      .replaceAll("{branch}", "feature-x"),
  );
  const token = printableToken("status_token", req.statusToken);
  return {
    workspace: workspaceRef("workspace", req.workspace),
    project: projectRef("project", req.project),
    base: environmentRef("base_environment", req.baseEnvironment),
    provider,
    repository: req.repository,
    secret,
    imageTemplate,
    region: req.region === "" ? "" : r.slug("region", req.region),
    ttlMs: ttlMs("ttl_seconds", req.ttlSeconds),
    withSecrets: req.withSecrets,
    statusApiUrl: req.statusApiUrl === "" ? undefined : statusApiUrl("status_api_url", req.statusApiUrl),
    statusToken: token === "" ? undefined : token,
  };
}
