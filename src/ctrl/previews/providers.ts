// Pull-request webhooks of GitHub and GitLab: is a request really from the provider (and which
// delivery it is), and what does it say about a pull request (a malformed one: invalid_argument
// naming the field). Pure (the body and headers in, a verdict out); the receiver is ./webhooks.ts.
//
// GitHub signs every delivery with the hook's secret: X-Hub-Signature-256 = "sha256=" + hex
// HMAC-SHA256 of the raw body; X-GitHub-Delivery is the delivery's id. The body carries no
// signed timestamp, so a delivery's age is the pull request's `updated_at` in the signed body.
//
// GitLab has two ways, chosen by the secret the hook was given:
//   - a signing token ("whsec_" + base64 of 32 random bytes; GitLab's webhook signing, which
//     follows the Standard Webhooks scheme): webhook-signature = "v1," + base64 HMAC-SHA256 over
//     "<webhook-id>.<webhook-timestamp>.<body>" with the decoded key, so body, id and time are
//     all signed; the timestamp gives the age, webhook-id the delivery;
//   - a secret token (anything else): GitLab sends the token itself in X-Gitlab-Token, which
//     proves knowledge of the token but signs nothing; the delivery is X-Gitlab-Event-UUID (or
//     Idempotency-Key), the age the merge request's `updated_at`. Prefer the signing token.
// Every comparison is constant-time.
import { createHmac, timingSafeEqual } from "node:crypto";
import { invalidArgument } from "../errors.js";

export type Provider = "github" | "gitlab";

export type Headers = Readonly<Record<string, string | undefined>>;

export type Verdict =
  { ok: true; deliveryId: string; method: string; signedAt?: number } | { ok: false; reason: string };

function equal(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

const DELIVERY = /^[A-Za-z0-9._:-]{1,128}$/;

function delivery(v: string | undefined): string | undefined {
  return v !== undefined && DELIVERY.test(v) ? v : undefined;
}

/** The hex signature GitHub sends for `body` (tests and `krane preview hook` examples). */
export function githubSignature(secret: string, body: Uint8Array | string): string {
  return `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;
}

/** A GitLab signing token's key, or undefined when the secret is not one ("whsec_" + base64). */
export function signingKey(secret: string): Buffer | undefined {
  if (!secret.startsWith("whsec_")) return undefined;
  const key = Buffer.from(secret.slice(6), "base64");
  return key.length >= 24 ? key : undefined;
}

/** GitLab's signed form: "v1," + base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>"). */
export function gitlabSignature(key: Buffer, id: string, timestamp: string, body: Uint8Array | string): string {
  return `v1,${createHmac("sha256", key).update(`${id}.${timestamp}.`).update(body).digest("base64")}`;
}

export function verifyGithub(secret: string, h: Headers, body: Buffer): Verdict {
  const sig = h["x-hub-signature-256"];
  if (sig === undefined) return { ok: false, reason: "no X-Hub-Signature-256 header: the delivery is not signed" };
  if (!equal(sig, githubSignature(secret, body)))
    return { ok: false, reason: "X-Hub-Signature-256 does not match the body (wrong secret, or the body was changed)" };
  const id = delivery(h["x-github-delivery"]);
  if (id === undefined) return { ok: false, reason: "no valid X-GitHub-Delivery header" };
  return { ok: true, deliveryId: id, method: "hmac-sha256" };
}

export function verifyGitlab(secret: string, h: Headers, body: Buffer): Verdict {
  const key = signingKey(secret);
  if (key !== undefined) {
    const id = delivery(h["webhook-id"]);
    const ts = h["webhook-timestamp"];
    const sigs = h["webhook-signature"];
    if (sigs === undefined || ts === undefined || id === undefined)
      return {
        ok: false,
        reason: "no webhook-signature, webhook-timestamp and webhook-id headers: the delivery is not signed",
      };
    if (!/^\d{1,12}$/.test(ts)) return { ok: false, reason: "webhook-timestamp is not unix seconds" };
    const want = gitlabSignature(key, id, ts, body);
    // Several signatures may be sent, space-separated (a key rotation): one must match.
    if (!sigs.split(" ").some((s) => equal(s, want)))
      return { ok: false, reason: "webhook-signature does not match (wrong signing token, or the body was changed)" };
    return { ok: true, deliveryId: id, method: "signing-token", signedAt: Number(ts) * 1000 };
  }
  const token = h["x-gitlab-token"];
  if (token === undefined) return { ok: false, reason: "no X-Gitlab-Token header" };
  if (!equal(token, secret)) return { ok: false, reason: "X-Gitlab-Token is not the hook's secret token" };
  const id = delivery(h["x-gitlab-event-uuid"]) ?? delivery(h["idempotency-key"]);
  if (id === undefined) return { ok: false, reason: "no valid X-Gitlab-Event-UUID header" };
  return { ok: true, deliveryId: id, method: "secret-token" };
}

/** What a pull-request event means for its preview. */
export interface PullRequestEvent {
  action: "open" | "update" | "close" | "ignore";
  /** Why it is ignored (not a pull request event, an action that changes nothing …). */
  ignored?: string;
  number: number;
  headSha: string;
  headRef: string;
  /** From a fork (another repository than the one the request is merged into). */
  fork: boolean;
  /** The repository the pull request targets (GitHub "owner/name"; GitLab path and id). */
  repository: string[];
  /** The provider's time of the change (unix ms), when the body says. */
  updatedAt?: number;
  /** Who triggered it (a login), for the audit log. */
  sender: string;
}

export type Json = Record<string, unknown>;

export function obj(v: unknown): Json {
  return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Json) : {};
}

export function str(v: unknown): string {
  return typeof v === "string" ? v : typeof v === "number" ? String(v) : "";
}

export function time(v: unknown): number | undefined {
  if (typeof v !== "string") return undefined;
  // GitLab writes "2024-05-01 10:00:00 UTC" in some versions, ISO 8601 in others.
  const t = Date.parse(v.replace(/^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d) UTC$/, "$1T$2Z"));
  return Number.isNaN(t) ? undefined : t;
}

const IGNORED = (why: string): PullRequestEvent => ({
  action: "ignore",
  ignored: why,
  number: 0,
  headSha: "",
  headRef: "",
  fork: false,
  repository: [],
  sender: "",
});

const SHA = /^[0-9a-f]{7,64}$/;

export function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * A pull request event: what it means, or invalid_argument naming what is missing or malformed
 * in it (another event, or an action that changes no preview, is ignored).
 */
export function parseGithub(event: string | undefined, body: unknown): PullRequestEvent {
  if (event === "ping") return IGNORED("ping");
  if (event !== "pull_request") return IGNORED(`event "${event ?? ""}" is not a pull request event`);
  if (!isObject(body)) throw invalidArgument("body", "is not a JSON object");
  const b = body;
  if (!isObject(b.pull_request))
    throw invalidArgument("pull_request", "is missing: a pull_request event carries the pull request");
  const pr = b.pull_request;
  const head = obj(pr.head);
  const headRepo = obj(head.repo);
  const baseRepo = obj(obj(pr.base).repo);
  const action = str(b.action);
  if (action === "") throw invalidArgument("action", "is missing");
  const number = Number(b.number ?? pr.number);
  if (!Number.isSafeInteger(number) || number <= 0) throw invalidArgument("number", "is not a pull request number");
  const sha = str(head.sha);
  if (!SHA.test(sha)) throw invalidArgument("pull_request.head.sha", "is not a commit sha");
  const mapped: PullRequestEvent["action"] =
    action === "opened" || action === "reopened"
      ? "open"
      : action === "synchronize"
        ? "update"
        : action === "closed"
          ? "close"
          : "ignore";
  const base = str(baseRepo.full_name) || str(obj(b.repository).full_name);
  return {
    action: mapped,
    ignored: mapped === "ignore" ? `action "${action}" changes no preview` : undefined,
    number,
    headSha: sha,
    headRef: str(head.ref),
    // A head repository other than the base (or one deleted since: null) is a fork.
    fork: str(headRepo.full_name) !== base || head.repo === null,
    repository: [base],
    updatedAt: time(pr.updated_at),
    sender: str(obj(b.sender).login),
  };
}

/** A merge request event, as parseGithub does for GitHub's. */
export function parseGitlab(event: string | undefined, body: unknown): PullRequestEvent {
  if (event !== "Merge Request Hook") return IGNORED(`event "${event ?? ""}" is not a merge request event`);
  if (!isObject(body)) throw invalidArgument("body", "is not a JSON object");
  const b = body;
  if (b.object_kind !== "merge_request")
    throw invalidArgument("object_kind", `is "${str(b.object_kind)}", not "merge_request" as the event header says`);
  if (!isObject(b.object_attributes))
    throw invalidArgument("object_attributes", "is missing: a merge request event carries the merge request");
  const a = b.object_attributes;
  const action = str(a.action);
  if (action === "") throw invalidArgument("object_attributes.action", "is missing");
  const number = Number(a.iid);
  if (!Number.isSafeInteger(number) || number <= 0)
    throw invalidArgument("object_attributes.iid", "is not a merge request number");
  const sha = str(obj(a.last_commit).id);
  if (!SHA.test(sha)) throw invalidArgument("object_attributes.last_commit.id", "is not a commit sha");
  // An update without oldrev changed the title or labels, not the code.
  const mapped: PullRequestEvent["action"] =
    action === "open" || action === "reopen"
      ? "open"
      : action === "update"
        ? a.oldrev !== undefined && a.oldrev !== null
          ? "update"
          : "ignore"
        : action === "close" || action === "merge"
          ? "close"
          : "ignore";
  const project = obj(b.project);
  return {
    action: mapped,
    ignored: mapped === "ignore" ? `action "${action}" changes no preview` : undefined,
    number,
    headSha: sha,
    headRef: str(a.source_branch),
    fork: str(a.source_project_id) !== str(a.target_project_id),
    repository: [str(project.path_with_namespace), str(project.id)].filter((x) => x !== ""),
    updatedAt: time(a.updated_at),
    sender: str(obj(b.user).username),
  };
}

/** A Docker tag's characters only (a branch name can hold anything). */
function tagSafe(s: string): string {
  return (
    s
      .replace(/[^A-Za-z0-9_.-]/g, "-")
      .replace(/^[.-]+/, "")
      .slice(0, 100) || "x"
  );
}

/** The preview's image for an event: {sha}, {short_sha}, {pr} and {branch} filled in. */
export function imageFor(template: string, ev: Pick<PullRequestEvent, "headSha" | "number" | "headRef">): string {
  return template
    .replaceAll("{sha}", ev.headSha)
    .replaceAll("{short_sha}", ev.headSha.slice(0, 7))
    .replaceAll("{pr}", String(ev.number))
    .replaceAll("{branch}", tagSafe(ev.headRef));
}

/** The preview environment's name for a pull request. */
export function previewName(provider: Provider, number: number): string {
  return provider === "github" ? `pr-${number}` : `mr-${number}`;
}
