// A preview's URL and state on its pull request, through the provider's commit-status API, and
// the reporter that keeps them current.
//
// GitHub: POST {api}/repos/{owner}/{repo}/statuses/{sha} with {state, target_url, description,
// context}, state pending | success | failure | error, `Authorization: Bearer <token>`.
// GitLab: POST {api}/projects/{id or url-encoded path}/statuses/{sha} with {state, target_url,
// description, name}, state pending | running | success | failed | canceled, `PRIVATE-TOKEN`.
// Both answer 201 with the status.
//
// The reporter is a reconciler on a WorkQueue keyed by preview id, like custom domain checks: a
// sweep claims the previews whose status is due (moving their next look ahead by a lease, so ctrl
// replicas do not report the same one at once) and queues them; a run reads the preview's state
// — waiting for approval, deploying (no instance of its newest revision running yet), ready (one
// running: success, with its URL) — posts it when it differs from what was posted last for that
// commit, and looks again in a few seconds while it is deploying. A failed post retries with the
// key's backoff (STATUS_RETRY); the lease brings it back after a crash.
import { pino, type Logger } from "pino";
import type { BackoffPolicy } from "../../retry/backoff.js";
import type { Runnable } from "../../base/lifecycle.js";
import { DueWork } from "../../retry/due.js";
import { Result } from "../../retry/queue.js";
import type { Store } from "../db/store.js";
import { existingDataKey, openWith } from "../domain/data-keys.js";
import { endpointUrl, type ExposureSettings } from "../domain/exposure.js";
import { claimDueStatuses, hookSecretAad, previewById, previewHook, recordStatusReport } from "../domain/previews.js";
import type { PreviewHookRow, PreviewRow } from "../db/schema.js";
import type { Keyring } from "../secrets/keyring.js";
import type { Provider } from "./providers.js";

/** Backoff of a status that could not be posted. */
export const STATUS_RETRY: BackoffPolicy = { baseMs: 500, capMs: 30_000, minMs: 200 };

/** The context (GitHub) or name (GitLab) krane's statuses carry. */
export const STATUS_CONTEXT = "krane/preview";

export interface CommitStatus {
  state: "pending" | "success" | "failure" | "error";
  description: string;
  targetUrl: string;
}

export const DEFAULT_STATUS_API: Record<Provider, string> = {
  github: "https://api.github.com",
  gitlab: "https://gitlab.com/api/v4",
};

const GITLAB_STATE: Record<CommitStatus["state"], string> = {
  pending: "running",
  success: "success",
  failure: "failed",
  error: "failed",
};

/** Posts one commit status; throws with the provider's answer when it is not 2xx. */
export async function postCommitStatus(
  o: {
    provider: Provider;
    apiUrl: string;
    token: string;
    repository: string;
    sha: string;
    timeoutMs?: number;
    /** The status's context (GitHub) or name (GitLab); default STATUS_CONTEXT. */
    context?: string;
  },
  s: CommitStatus,
): Promise<void> {
  const context = o.context ?? STATUS_CONTEXT;
  const api = o.apiUrl.replace(/\/+$/, "");
  const description = s.description.slice(0, 140);
  const req: { url: string; headers: Record<string, string>; body: Record<string, string> } =
    o.provider === "github"
      ? {
          url: `${api}/repos/${o.repository.split("/").map(encodeURIComponent).join("/")}/statuses/${o.sha}`,
          headers: {
            authorization: `Bearer ${o.token}`,
            accept: "application/vnd.github+json",
            "x-github-api-version": "2022-11-28",
          },
          body: { state: s.state, target_url: s.targetUrl, description, context },
        }
      : {
          url: `${api}/projects/${encodeURIComponent(o.repository)}/statuses/${o.sha}`,
          headers: { "private-token": o.token },
          body: {
            state: GITLAB_STATE[s.state],
            target_url: s.targetUrl,
            description,
            name: context,
          },
        };
  const res = await fetch(req.url, {
    method: "POST",
    headers: { ...req.headers, "content-type": "application/json", "user-agent": "krane" },
    body: JSON.stringify(req.body),
    signal: AbortSignal.timeout(o.timeoutMs ?? 10_000),
  });
  const text = await res.text().catch(() => "");
  if (res.status < 200 || res.status >= 300)
    throw new Error(`${o.provider} commit status API answered ${res.status}: ${text.slice(0, 200)}`);
}

/** A hook's sealed secret or status token, opened in memory (undefined: none, or no key). */
export async function openHookSecret(
  store: Store,
  keyring: Keyring | undefined,
  hook: PreviewHookRow,
  what: "secret" | "status-token",
): Promise<string | undefined> {
  const sealed = what === "secret" ? hook.secret_sealed : hook.status_token_sealed;
  if (!keyring || sealed === null) return undefined;
  const key = await existingDataKey(store.db, keyring, hook.base_environment_id);
  if (!key) return undefined;
  return openWith(key, sealed, hookSecretAad(hook.id, what)).toString("utf8");
}

export interface StatusReporterOptions {
  readonly store: Store;
  readonly keyring: Keyring | undefined;
  readonly exposure: ExposureSettings;
  /** How often due statuses are looked for (ms; default 1 s). */
  readonly sweepIntervalMs?: number;
  /** How soon a deploying preview is looked at again (ms; default 2 s). */
  readonly recheckMs?: number;
  readonly leaseMs?: number;
  readonly logger?: Logger;
}

/** The URL of an environment's most visible endpoint ("" when it has none). */
export async function environmentUrl(store: Store, environmentId: string, exposure: ExposureSettings): Promise<string> {
  const endpoint = await store.db
    .selectFrom("endpoints")
    .select(["hostname", "path_prefix"])
    .where("environment_id", "=", environmentId)
    .orderBy("visibility", "desc")
    .executeTakeFirst();
  return endpoint ? endpointUrl(exposure, endpoint.hostname, endpoint.path_prefix) : "";
}

/** What the preview's pull request should show now (undefined: nothing to report). */
async function statusOf(
  store: Store,
  p: PreviewRow,
  exposure: ExposureSettings,
): Promise<{ status: CommitStatus; settled: boolean } | undefined> {
  if (p.state === "deleting") return undefined;
  if (p.state === "awaiting_approval")
    return {
      status: {
        state: "pending",
        description: `waiting for approval (a fork): krane preview approve <project>/${p.name}`,
        targetUrl: "",
      },
      settled: true,
    };
  if (p.environment_id === null) return undefined;
  const url = await environmentUrl(store, p.environment_id, exposure);
  const newest = await store.db
    .selectFrom("deployments")
    .select("id")
    .where("environment_id", "=", p.environment_id)
    .where("image", "=", p.image)
    .orderBy("revision", "desc")
    .executeTakeFirst();
  const running = newest
    ? await store.db
        .selectFrom("instances")
        .select("k8s_name")
        .where("deployment_id", "=", newest.id)
        .where("status", "=", "running")
        .executeTakeFirst()
    : undefined;
  return running
    ? { status: { state: "success", description: `preview ready: ${url}`, targetUrl: url }, settled: true }
    : {
        status: { state: "pending", description: `deploying ${p.head_sha.slice(0, 7)}`, targetUrl: url },
        settled: false,
      };
}

/**
 * A commit-status reporter: a sweep every `sweepIntervalMs` (default 1 s) claims what is due, and
 * each id is reported (`report`) with STATUS_RETRY's backoff when a post fails.
 */
export abstract class CommitStatusReporter implements Runnable {
  readonly #work: DueWork;

  constructor(
    readonly name: string,
    claim: (limit: number) => Promise<string[]>,
    sweepIntervalMs: number | undefined,
    logger: Logger | undefined,
  ) {
    const log = logger ?? pino({ level: "silent" });
    this.#work = new DueWork({
      name,
      due: claim,
      reconcile: (id) => this.report(id),
      sweepIntervalMs: sweepIntervalMs ?? 1000,
      sweepLimit: 200,
      concurrency: 8,
      retry: STATUS_RETRY,
      onSweepError: (err) =>
        log.warn({ err: err instanceof Error ? err.message : String(err) }, `${name} sweep failed`),
      onResult: (id, r) => {
        if (r.type === "retry")
          log.warn(
            { id, err: r.error instanceof Error ? r.error.message : String(r.error) },
            `${name} not reported; retrying`,
          );
      },
    });
  }

  /** Posts what `id`'s commit should show now. */
  protected abstract report(id: string): Promise<Result>;

  start(): void {
    this.#work.start();
  }

  /** Queues what is due now (also: right after a change made one due). */
  sweep(): Promise<void> {
    return this.#work.sweep();
  }

  idle(): Promise<void> {
    return this.#work.idle();
  }

  stop(): Promise<void> {
    return this.#work.stop();
  }
}

export class StatusReporter extends CommitStatusReporter {
  readonly #o: StatusReporterOptions;

  constructor(o: StatusReporterOptions) {
    super(
      "preview status",
      (limit) => claimDueStatuses(o.store, limit, o.leaseMs ?? 30_000),
      o.sweepIntervalMs,
      o.logger,
    );
    this.#o = o;
  }

  protected async report(id: string): Promise<Result> {
    const store = this.#o.store;
    const p = await previewById(store.db, id);
    if (!p) return Result.done;
    const hook = p.hook_id === null ? undefined : await previewHook(store.db, p.hook_id);
    const token = hook ? await openHookSecret(store, this.#o.keyring, hook, "status-token") : undefined;
    const now = await statusOf(store, p, this.#o.exposure);
    if (!hook || token === undefined || now === undefined) {
      await recordStatusReport(store, id, null, null, Number(p.updated_at));
      return Result.done;
    }
    const next = now.settled ? null : Date.now() + (this.#o.recheckMs ?? 2000);
    const reported = JSON.stringify({ sha: p.head_sha, ...now.status });
    if (reported !== p.status_reported)
      await postCommitStatus(
        {
          provider: hook.provider as Provider,
          apiUrl: hook.status_api_url,
          token,
          repository: p.repository,
          sha: p.head_sha,
        },
        now.status,
      );
    await recordStatusReport(store, id, reported, next, Number(p.updated_at));
    return Result.done;
  }
}
