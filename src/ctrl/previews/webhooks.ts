// The pull-request webhook receiver: POST /hooks/<hook id> on ctrl's webhook port (HTTP/1.1,
// which GitHub and GitLab speak; ctrl's API port speaks HTTP/2 only, and its ops port serves
// /metrics and is meant to stay inside the cluster, so webhooks get a listener of their own that
// an operator can expose to the internet alone).
//
// A delivery is checked before anything is read from it: its size (past 2 MiB: 413, the body
// read and dropped so that the sender gets the answer), the hook's signature (./providers.ts;
// unsigned or badly signed: 401), then what it says (a pull request event missing its pull
// request, number or head commit: 400 naming the field; other events: 200 "ignored"), its age
// (the signed timestamp, or the pull request's time in the signed body, within the replay
// window: else 409), the repository it names (the hook's only: else 403). The preview's image is
// then pinned to its digest (its registry asked, with the workspace's credential; an image not
// there yet is a 400 naming it, with no record of the delivery). What it says then happens in one transaction with the record of its delivery
// id, so a delivery replayed within the window is refused (409) and one that failed leaves no
// record and can be redelivered: opened / reopened creates the preview (or updates it), a new
// head commit gives it a new revision, closed or merged deletes it. Every such change is audited
// with the hook as its actor; every refusal too (an unsigned one in the installation's chain, like
// any caller without a credential).
import type * as http from "node:http";
import type { Logger } from "pino";
import { pino } from "pino";
import { actorOf, auditedWork, recordRefused, type CallInfo } from "../audit/recorder.js";
import { RefusalLimiter } from "../audit/limiter.js";
import { subjectReader } from "../audit/views.js";
import { PreviewService } from "../../gen/krane/ctrl/v1/preview_pb.js";
import type { Store } from "../db/store.js";
import { INSTALLATION_CHAIN } from "../domain/audit.js";
import {
  createPreviewIn,
  deletePreviewIn,
  updatePreviewIn,
  type PreviewDeps,
  type PreviewOutcome,
} from "../domain/preview-lifecycle.js";
import { findPreview, previewHook, recordDelivery } from "../domain/previews.js";
import { DomainError, failedPrecondition, HTTP_STATUS, invalidArgument } from "../errors.js";
import { pinImage } from "../images/pin.js";
import type { ImageResolver } from "../images/resolve.js";
import { image as imageRule } from "../validate/rules.js";
import type { PreviewHookRow } from "../db/schema.js";
import {
  imageFor,
  parseGithub,
  parseGitlab,
  previewName,
  verifyGithub,
  verifyGitlab,
  type Headers,
  type Provider,
  type PullRequestEvent,
  type Verdict,
} from "./providers.js";
import { openHookSecret } from "./status.js";

/** Largest body accepted (pull request events are a few tens of KiB). */
export const MAX_BODY = 2 * 1024 * 1024;
/**
 * A larger body is still read, and dropped, up to this much, so that its sender gets the 413
 * instead of a connection reset (GitHub sends at most 25 MB); past it the connection is cut.
 */
const MAX_DRAIN = 32 * 1024 * 1024;
/** How old (or how far ahead, a clock's skew) a delivery may be by default. */
export const DEFAULT_REPLAY_WINDOW_MS = 10 * 60_000;

export interface WebhookReceiverOptions {
  readonly store: Store;
  readonly deps: PreviewDeps;
  /** Pins a preview's image to its digest before the delivery's transaction (absent: run as named). */
  readonly images?: ImageResolver;
  readonly replayWindowMs?: number;
  /** A preview's environment changed: run its rollout passes. */
  readonly onEnvironmentChanged: (environmentId: string) => Promise<void>;
  /** A preview's status is due (the reporter looks now). */
  readonly onStatusDue: () => void;
  /** A preview's deletion started (purge what has finished). */
  readonly onDeleted: () => void;
  /** Whether a failure is an outage of the database (503: deliver again later) rather than a bug. */
  readonly isOutage?: (err: unknown) => boolean;
  readonly logger?: Logger;
  readonly now?: () => number;
}

/** A pull request's image and the digest it names now (null: it runs as named). */
interface Pinned {
  image: string;
  imageDigest: string | null;
}

/** A delivery refused before or instead of its work: the HTTP status, the error's code and why. */
export class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** The connection cannot be used again (a body left unread). */
    readonly close = false,
  ) {
    super(message);
  }
}

const tooLarge = (close = false): Refusal =>
  new Refusal(
    413,
    "invalid_argument",
    `the body is larger than the limit of ${MAX_BODY / 1024 / 1024} MiB (${MAX_BODY} bytes)`,
    close,
  );

/**
 * The body, up to MAX_BODY. A body declared larger is refused before it is read (node:http then
 * reads and drops the rest, keeping the connection); one that turns out larger is read to its
 * end and dropped, then refused, so either way the sender reads the 413.
 */
export function readBody(req: http.IncomingMessage): Promise<Buffer> {
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > MAX_BODY) return Promise.reject(tooLarge(declared > MAX_DRAIN));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > MAX_DRAIN) {
        reject(tooLarge(true));
        req.destroy();
      } else if (size <= MAX_BODY) chunks.push(c);
    });
    req.on("end", () => (size > MAX_BODY ? reject(tooLarge()) : resolve(Buffer.concat(chunks))));
    req.on("error", reject);
  });
}

export function headersOf(req: http.IncomingMessage): Headers {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") out[k] = v;
  return out;
}

/** Answers a delivery with what `work` resolves to (200, JSON), or its refusal's status and reason. */
export function answerDelivery(
  res: http.ServerResponse,
  work: Promise<object>,
  o: { readonly log: Logger; readonly isOutage?: (err: unknown) => boolean },
): void {
  work.then(
    (answer) => res.writeHead(200, { "content-type": "application/json" }).end(`${JSON.stringify(answer)}\n`),
    (err: unknown) => {
      const r =
        err instanceof Refusal
          ? err
          : err instanceof DomainError
            ? new Refusal(HTTP_STATUS[err.code] ?? 400, err.code, err.message)
            : o.isOutage?.(err)
              ? new Refusal(503, "unavailable", "ctrl's database is unavailable; deliver again later")
              : undefined;
      if (!r) o.log.error({ err: err instanceof Error ? err.message : String(err) }, "webhook failed");
      const status = r?.status ?? 500;
      if (!res.headersSent)
        res
          .writeHead(status, {
            "content-type": "application/json",
            connection: r?.close ? "close" : "keep-alive",
          })
          .end(`${JSON.stringify({ error: r?.message ?? "internal error" })}\n`);
    },
  );
}

/** A delivery as the audit log's call (anonymous until its signature is checked). */
export function deliveryCall(req: http.IncomingMessage, h: Headers, method: string): CallInfo {
  return {
    method,
    requestId: "",
    clientIp: req.socket.remoteAddress ?? "",
    userAgent: (h["user-agent"] ?? "").replace(/[^\x20-\x7e]/g, "?").slice(0, 512),
    idempotencyKey: "",
    actor: () => actorOf(undefined),
  };
}

/** The caller once a delivery's signature holds: the hook, and who the provider says acted. */
export function hookCaller(anonymous: CallInfo, deliveryId: string, hookId: string, name: string) {
  return (sender: string): CallInfo => ({
    ...anonymous,
    requestId: deliveryId,
    actor: () => ({ kind: "webhook", id: hookId, name: `${name}${sender === "" ? "" : ` (${sender})`}` }),
  });
}

/** A signed delivery's body as JSON. */
export function deliveryJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString("utf8")) as unknown;
  } catch {
    throw invalidArgument("body", "is not JSON");
  }
}

/** The event must be about the hook's repository (a secret shared by two hooks signs for both). */
export function checkRepository(named: readonly string[], mine: string): void {
  if (!named.some((r) => r.toLowerCase() === mine.toLowerCase()))
    throw new DomainError(
      "permission_denied",
      `the event is about ${named.join(" / ") || "no repository"}, not ${mine} (this hook's)`,
    );
}

/** Checks a delivery with the hook's secret, as its provider signs. */
export function verifyDelivery(provider: Provider, secret: string, h: Headers, body: Buffer): Verdict {
  return provider === "github" ? verifyGithub(secret, h, body) : verifyGitlab(secret, h, body);
}

/** Refuses a delivery older (or further ahead) than the replay window, or one that holds no time. */
export function checkFresh(at: number | undefined, now: number, windowMs: number): void {
  if (at === undefined) throw invalidArgument("body", "holds no time to check the delivery's age against");
  const age = now - at;
  if (age > windowMs || -age > windowMs)
    throw failedPrecondition(
      `the delivery is ${Math.round(age / 1000)} s old, outside the replay window of ${Math.round(windowMs / 1000)} s`,
    );
}

/**
 * The audit events of refused deliveries: unsigned ones in the installation's chain, folded past
 * a rate per address like any caller without a credential; signed ones in their hook's workspace.
 */
export class HookRefusals {
  readonly #store: Store;
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #limiter = new RefusalLimiter({ perSecond: 5, burst: 50, total: { perSecond: 50, burst: 500 } });

  constructor(store: Store, log: Logger, now: () => number) {
    this.#store = store;
    this.#log = log;
    this.#now = now;
  }

  async anonymous(call: CallInfo, message: string): Promise<void> {
    const a = this.#limiter.admit(call.clientIp, this.#now());
    if (!a.record) return;
    const note = a.folded > 0 ? ` (and ${a.folded} more refused deliveries from this address)` : "";
    await recordRefused(this.#store, call, {
      workspaceId: INSTALLATION_CHAIN,
      targets: [],
      code: "unauthenticated",
      message: `${message}${note}`,
    }).catch((err: unknown) => this.#log.error({ err: String(err) }, "an audit event could not be written"));
  }

  async signed(workspaceId: string, targets: string[], call: CallInfo, err: unknown): Promise<void> {
    const code = err instanceof DomainError ? err.code : err instanceof Refusal ? err.code : "internal";
    const message = err instanceof Error ? err.message : String(err);
    await recordRefused(this.#store, call, { workspaceId, targets, code, message }).catch((e: unknown) =>
      this.#log.error({ err: String(e) }, "an audit event could not be written"),
    );
  }
}

export class WebhookReceiver {
  readonly #o: WebhookReceiverOptions;
  readonly #log: Logger;
  readonly #now: () => number;
  /** Shared with the repositories' push hooks on the same listener. */
  readonly refusals: HookRefusals;

  constructor(o: WebhookReceiverOptions) {
    this.#o = o;
    this.#log = o.logger ?? pino({ level: "silent" });
    this.#now = o.now ?? Date.now;
    this.refusals = new HookRefusals(o.store, this.#log, this.#now);
  }

  /** The node:http request listener. */
  readonly handle = (req: http.IncomingMessage, res: http.ServerResponse): void =>
    answerDelivery(res, this.#handle(req), { log: this.#log, isOutage: this.#o.isOutage });

  async #handle(req: http.IncomingMessage): Promise<object> {
    const m = /^\/hooks\/(pwh_[a-z0-9]{1,60})$/.exec((req.url ?? "").split("?", 1)[0] ?? "");
    if (req.method !== "POST" || !m?.[1]) throw new Refusal(404, "not_found", "POST /hooks/<hook id>");
    const hookId = m[1];
    const body = await readBody(req);
    const h = headersOf(req);
    const info = (provider: string): CallInfo => deliveryCall(req, h, `PreviewWebhook/${provider}`);
    const hook = await previewHook(this.#o.store.db, hookId);
    const secret = hook ? await openHookSecret(this.#o.store, this.#o.deps.keyring, hook, "secret") : undefined;
    const verdict =
      hook === undefined || secret === undefined
        ? { ok: false as const, reason: `no hook ${hookId}` }
        : verifyDelivery(hook.provider as Provider, secret, h, body);
    if (!hook || !verdict.ok) {
      const reason = verdict.ok ? "" : verdict.reason;
      await this.refusals.anonymous(info(hook?.provider ?? "unknown"), `hook ${hookId}: ${reason}`);
      if (!hook) throw new Refusal(404, "not_found", `no hook ${hookId}`);
      throw new Refusal(401, "unauthenticated", reason);
    }
    // Signed by the hook's secret: from here on the caller is the hook.
    const provider = hook.provider as Provider;
    let ev: PullRequestEvent;
    const who = hookCaller(info(provider), verdict.deliveryId, hook.id, `${provider} ${hook.repository}`);
    try {
      const json = deliveryJson(body);
      ev = provider === "github" ? parseGithub(h["x-github-event"], json) : parseGitlab(h["x-gitlab-event"], json);
      if (ev.action === "ignore") return { ignored: ev.ignored ?? "" };
      checkFresh(verdict.signedAt ?? ev.updatedAt, this.#now(), this.#o.replayWindowMs ?? DEFAULT_REPLAY_WINDOW_MS);
      checkRepository(ev.repository, hook.repository);
    } catch (err) {
      await this.#refused(hook, who(""), err);
      throw err;
    }
    const call = who(ev.sender);
    const name = previewName(provider, ev.number);
    const subject = subjectReader(PreviewService.method.createPreview);
    let outcome: PreviewOutcome | undefined;
    try {
      // The image and its digest, asked before the transaction: a registry that cannot say (or
      // an image not pushed yet) refuses the delivery, with no record of it: deliver it again.
      const pinned = ev.action === "close" ? undefined : await this.#pin(hook, ev);
      outcome = await auditedWork(
        call,
        (db) =>
          subject?.(db, { workspace: hook.workspace_id, project: hook.project_id, name }, undefined) ??
          Promise.resolve(undefined),
        () => this.#o.store.write((tx) => this.#apply(tx, hook, verdict.deliveryId, ev, name, pinned)),
      );
    } catch (err) {
      await this.#refused(hook, call, err);
      throw err;
    }
    if (outcome?.environmentId) await this.#o.onEnvironmentChanged(outcome.environmentId);
    if (ev.action === "close") this.#o.onDeleted();
    this.#o.onStatusDue();
    return { preview: name, action: ev.action, state: outcome?.preview.state ?? "none" };
  }

  async #apply(
    tx: Parameters<Parameters<Store["write"]>[0]>[0],
    hook: PreviewHookRow,
    deliveryId: string,
    ev: PullRequestEvent,
    name: string,
    pinned: Pinned | undefined,
  ): Promise<PreviewOutcome | undefined> {
    if (!(await recordDelivery(tx, hook.id, deliveryId)))
      throw new DomainError("already_exists", `delivery ${deliveryId} was accepted before: a replay`);
    const existing = await findPreview(tx.trx, hook.project_id, name);
    if (ev.action === "close") return existing ? { preview: await deletePreviewIn(tx, existing) } : undefined;
    if (!pinned) throw new Error("a pull request's image must be pinned before its transaction");
    const { image, imageDigest } = pinned;
    if (existing) {
      if (existing.state === "deleting")
        throw failedPrecondition(`preview "${name}" is still being deleted; deliver again once it is gone`);
      return updatePreviewIn(tx, existing, { image, imageDigest, headSha: ev.headSha, fork: ev.fork });
    }
    return createPreviewIn(tx, this.#o.deps, {
      workspace: hook.workspace_id,
      project: hook.project_id,
      base: hook.base_environment_id,
      name,
      image,
      imageDigest,
      ttlMs: Number(hook.ttl_ms),
      region: hook.region === "" ? undefined : hook.region,
      withSecrets: Number(hook.with_secrets) === 1,
      pullRequest: {
        provider: hook.provider as Provider,
        hookId: hook.id,
        repository: hook.repository,
        number: ev.number,
        headSha: ev.headSha,
        fork: ev.fork,
      },
    });
  }

  async #pin(hook: PreviewHookRow, ev: PullRequestEvent): Promise<Pinned> {
    const image = imageRule("image_template", imageFor(hook.image_template, ev));
    const { store, images, deps } = this.#o;
    return { image, imageDigest: await pinImage(images, store.db, deps.keyring, hook.workspace_id, "image", image) };
  }

  #refused(hook: PreviewHookRow, call: CallInfo, err: unknown): Promise<void> {
    return this.refusals.signed(
      hook.workspace_id,
      [hook.workspace_id, hook.project_id, hook.base_environment_id, hook.id],
      call,
      err,
    );
  }
}
