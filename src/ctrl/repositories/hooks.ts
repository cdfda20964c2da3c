// A repository's push hook: POST /hooks/repositories/<repository id> on ctrl's webhook port,
// beside the preview hooks (../previews/webhooks.ts, whose body bound, signature check, replay
// window and refusal records it shares). A delivery is checked as a preview hook's is — signed by
// the repository's webhook secret (else 401), about this repository (else 403), within the
// replay window (else 409; a GitLab push sent with the plain secret token, whose body holds no
// time, is dated by its receipt: ./push.ts pushDeliveryTime) — then read as a push (../repositories/push.ts): a push to a branch
// the map names queues a build of exactly the pushed commit for that branch's environment, in one
// transaction with the record of the delivery id (a replay is refused, 409; a failure leaves no
// record and can be delivered again); the queue cancels that environment's older open builds. A
// push that builds nothing (another event, a tag, a deleted branch, a branch the map does not
// name) is answered 200 with the reason, nothing queued: the provider marks a non-2xx delivery as
// failed, and a push to an unmapped branch is not the sender's mistake.
//
// A pull request (merge request) event, checked the same way, is read by ./pull-requests.ts: an
// opened, reopened or pushed-to pull request queues a build of its head commit for its preview
// (the build's environment is the preview's base; the queue cancels that pull request's older
// builds); a closed or merged one cancels its open builds and deletes its preview — each in one
// transaction with the record of the delivery. The build worker makes the preview from the build.
import type * as http from "node:http";
import type { Logger } from "pino";
import { pino } from "pino";
import { isProductionEnvironment } from "../../builds/queue.js";
import { BuildService } from "../../gen/krane/ctrl/v1/build_pb.js";
import { PreviewService } from "../../gen/krane/ctrl/v1/preview_pb.js";
import { auditedWork } from "../audit/recorder.js";
import { subjectReader } from "../audit/views.js";
import type { RepositoryRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { cancelPreviewBuildsIn, queueBuildIn } from "../domain/builds.js";
import { deletePreviewIn } from "../domain/preview-lifecycle.js";
import { findPreview, recordDelivery } from "../domain/previews.js";
import { branchesOf, openRepositorySecret, repositoryById } from "../domain/repositories.js";
import { DomainError, failedPrecondition } from "../errors.js";
import {
  answerDelivery,
  checkFresh,
  checkRepository,
  deliveryCall,
  deliveryJson,
  hookCaller,
  DEFAULT_REPLAY_WINDOW_MS,
  headersOf,
  readBody,
  Refusal,
  verifyDelivery,
  type HookRefusals,
} from "../previews/webhooks.js";
import { parseGithub, parseGitlab, type Provider, type PullRequestEvent } from "../previews/providers.js";
import type { Keyring } from "../secrets/keyring.js";
import { isPullRequestEvent, pullRequestPlan, type PullRequestPlan } from "./pull-requests.js";
import { parseGithubPush, parseGitlabPush, pushDeliveryTime, type PushEvent } from "./push.js";

type Tx = Parameters<Parameters<Store["write"]>[0]>[0];

export const REPOSITORY_HOOK = /^\/hooks\/repositories\/(rep_[a-z0-9]{1,60})$/;

export interface PushReceiverOptions {
  readonly store: Store;
  readonly keyring: Keyring | undefined;
  readonly refusals: HookRefusals;
  /** This ctrl's build worker, told when a build is queued (absent: pushes are refused, saying so). */
  readonly builds: { readonly queued: () => void } | undefined;
  /** A preview's deletion started (purge what has finished). */
  readonly onDeleted?: () => void;
  readonly replayWindowMs?: number;
  readonly isOutage?: (err: unknown) => boolean;
  readonly logger?: Logger;
  readonly now?: () => number;
}

export interface PushAnswer {
  readonly ignored?: string;
  readonly build?: string;
  readonly environment?: string;
  readonly commit?: string;
  readonly cancelled?: readonly string[];
  /** A pull request's preview. */
  readonly preview?: string;
  readonly action?: string;
}

export class PushReceiver {
  readonly #o: PushReceiverOptions;
  readonly #log: Logger;
  readonly #now: () => number;

  constructor(o: PushReceiverOptions) {
    this.#o = o;
    this.#log = o.logger ?? pino({ level: "silent" });
    this.#now = o.now ?? Date.now;
  }

  readonly handle = (req: http.IncomingMessage, res: http.ServerResponse): void =>
    answerDelivery(res, this.#handle(req), { log: this.#log, isOutage: this.#o.isOutage });

  async #handle(req: http.IncomingMessage): Promise<PushAnswer> {
    const m = REPOSITORY_HOOK.exec((req.url ?? "").split("?", 1)[0] ?? "");
    if (req.method !== "POST" || !m?.[1]) throw new Refusal(404, "not_found", "POST /hooks/repositories/<id>");
    const id = m[1];
    const body = await readBody(req);
    const h = headersOf(req);
    const { store, refusals } = this.#o;
    const repo = await repositoryById(store.db, id);
    const secret = repo ? await openRepositorySecret(store.db, this.#o.keyring, repo, "webhook-secret") : undefined;
    const provider = (repo?.provider ?? "unknown") as Provider;
    const verdict =
      repo === undefined || secret === undefined
        ? { ok: false as const, reason: `no repository hook ${id}` }
        : verifyDelivery(provider, secret, h, body);
    const anonymous = deliveryCall(req, h, `RepositoryWebhook/${provider}`);
    if (!repo || !verdict.ok) {
      const reason = verdict.ok ? "" : verdict.reason;
      await refusals.anonymous(anonymous, `repository hook ${id}: ${reason}`);
      if (!repo) throw new Refusal(404, "not_found", `no repository hook ${id}`);
      throw new Refusal(401, "unauthenticated", reason);
    }
    // Signed with the repository's secret: from here on the caller is the hook.
    const who = hookCaller(anonymous, verdict.deliveryId, repo.id, `${provider} ${repo.path}`);
    const targets = [repo.workspace_id, repo.project_id, repo.id];
    const event = provider === "github" ? h["x-github-event"] : h["x-gitlab-event"];
    if (isPullRequestEvent(provider, event))
      return this.#pullRequest(repo, provider, event, body, verdict, (sender) => who(sender), targets);
    let ev: PushEvent;
    let environment: string | undefined;
    try {
      const json = deliveryJson(body);
      ev =
        provider === "github" ? parseGithubPush(h["x-github-event"], json) : parseGitlabPush(h["x-gitlab-event"], json);
      if (ev.action === "ignore") return { ignored: ev.ignored ?? "" };
      const now = this.#now();
      checkFresh(pushDeliveryTime(verdict, ev, now), now, this.#o.replayWindowMs ?? DEFAULT_REPLAY_WINDOW_MS);
      checkRepository(ev.repository, repo.path);
      environment = branchesOf(repo)[ev.branch];
      if (environment !== undefined && !this.#o.builds)
        throw failedPrecondition(
          "this ctrl does not build (krane ctrl serve --build-registry …): the push is not built",
        );
    } catch (err) {
      await refusals.signed(repo.workspace_id, targets, who(""), err);
      throw err;
    }
    if (environment === undefined)
      return { ignored: `branch "${ev.branch}" is mapped to no environment (krane repo update)` };
    const call = who(ev.sender);
    const subject = subjectReader(BuildService.method.startBuild);
    try {
      const env = environment;
      const queued = await auditedWork(
        call,
        (db, created) => subject?.(db, { workspace: repo.workspace_id }, created) ?? Promise.resolve(undefined),
        () => store.write((tx) => this.#queue(tx, repo, verdict.deliveryId, ev, env)),
      );
      this.#o.builds?.queued();
      return {
        build: queued.build.id,
        environment: env,
        commit: ev.commit,
        cancelled: queued.cancelled,
      };
    } catch (err) {
      await refusals.signed(repo.workspace_id, targets, call, err);
      throw err;
    }
  }

  async #pullRequest(
    repo: RepositoryRow,
    provider: Provider,
    event: string | undefined,
    body: Buffer,
    verdict: { deliveryId: string; signedAt?: number },
    who: (sender: string) => ReturnType<ReturnType<typeof hookCaller>>,
    targets: string[],
  ): Promise<PushAnswer> {
    const { store, refusals } = this.#o;
    let ev: PullRequestEvent;
    let plan: PullRequestPlan;
    try {
      const json = deliveryJson(body);
      ev = provider === "github" ? parseGithub(event, json) : parseGitlab(event, json);
      if (ev.action === "ignore") return { ignored: ev.ignored ?? "" };
      checkFresh(verdict.signedAt ?? ev.updatedAt, this.#now(), this.#o.replayWindowMs ?? DEFAULT_REPLAY_WINDOW_MS);
      checkRepository(ev.repository, repo.path);
      plan = pullRequestPlan(repo, provider, ev);
      if (plan.action === "build" && !this.#o.builds)
        throw failedPrecondition(
          "this ctrl does not build (krane ctrl serve --build-registry …): the pull request is not built",
        );
    } catch (err) {
      await refusals.signed(repo.workspace_id, targets, who(""), err);
      throw err;
    }
    if (plan.action === "ignore") return { ignored: plan.ignored };
    const call = who(ev.sender);
    const p = plan;
    const method = p.action === "build" ? BuildService.method.startBuild : PreviewService.method.deletePreview;
    const subject = subjectReader(method);
    const fields = { workspace: repo.workspace_id, project: repo.project_id, name: p.preview };
    try {
      const done = await auditedWork(
        call,
        (db, created) => subject?.(db, fields, created) ?? Promise.resolve(undefined),
        () =>
          store.write(async (tx) => {
            if (!(await recordDelivery(tx, repo.id, verdict.deliveryId)))
              throw new DomainError("already_exists", `delivery ${verdict.deliveryId} was accepted before: a replay`);
            return p.action === "build" ? this.#queuePreview(tx, repo, ev, p) : this.#close(tx, repo, p);
          }),
      );
      if (p.action === "build") this.#o.builds?.queued();
      else this.#o.onDeleted?.();
      return done;
    } catch (err) {
      await refusals.signed(repo.workspace_id, targets, call, err);
      throw err;
    }
  }

  async #queuePreview(
    tx: Tx,
    repo: RepositoryRow,
    ev: PullRequestEvent,
    p: { readonly preview: string; readonly base: string },
  ) {
    const base = await this.#environment(tx, repo, p.base);
    if (!base)
      throw failedPrecondition(
        `pull requests' previews are made from environment "${p.base}", which is gone (krane repo update --previews)`,
      );
    const queued = await queueBuildIn(tx, {
      workspaceId: repo.workspace_id,
      projectId: repo.project_id,
      environmentId: base.id,
      production: false,
      sourceDigest: "",
      dockerfile: undefined,
      deploy: true,
      git: { repositoryId: repo.id, branch: ev.headRef, commit: ev.headSha },
      preview: { name: p.preview, number: ev.number, fork: ev.fork },
    });
    return {
      build: queued.build.id,
      preview: p.preview,
      action: "build",
      commit: ev.headSha,
      cancelled: queued.cancelled,
    } satisfies PushAnswer;
  }

  async #close(tx: Tx, repo: RepositoryRow, p: { readonly preview: string }): Promise<PushAnswer> {
    const cancelled = await cancelPreviewBuildsIn(tx, repo.project_id, p.preview, "its pull request was closed");
    const existing = await findPreview(tx.trx, repo.project_id, p.preview);
    if (existing) await deletePreviewIn(tx, existing);
    return { preview: p.preview, action: existing ? "delete" : "none", cancelled };
  }

  #environment(tx: Tx, repo: RepositoryRow, slug: string) {
    return tx.trx
      .selectFrom("environments")
      .select(["id", "slug"])
      .where("project_id", "=", repo.project_id)
      .where("slug", "=", slug)
      .where("deleting_at", "is", null)
      .executeTakeFirst();
  }

  async #queue(
    tx: Tx,
    repo: RepositoryRow,
    deliveryId: string,
    ev: PushEvent,
    environment: string,
  ): Promise<{ build: { id: string }; cancelled: string[] }> {
    if (!(await recordDelivery(tx, repo.id, deliveryId)))
      throw new DomainError("already_exists", `delivery ${deliveryId} was accepted before: a replay`);
    const env = await tx.trx
      .selectFrom("environments")
      .select(["id", "slug", "deleting_at"])
      .where("project_id", "=", repo.project_id)
      .where("slug", "=", environment)
      .executeTakeFirst();
    if (!env || env.deleting_at !== null)
      throw failedPrecondition(
        `branch "${ev.branch}" is mapped to environment "${environment}", which is gone (krane repo update)`,
      );
    return queueBuildIn(tx, {
      workspaceId: repo.workspace_id,
      projectId: repo.project_id,
      environmentId: env.id,
      production: isProductionEnvironment(env.slug),
      sourceDigest: "",
      dockerfile: undefined,
      deploy: true,
      git: { repositoryId: repo.id, branch: ev.branch, commit: ev.commit },
    });
  }
}
