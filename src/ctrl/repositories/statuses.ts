// The reporter of repository builds' commit statuses: each change of a repository build's state
// makes its status due in the change's transaction (../domain/builds.ts: an outbox, so a crash
// between the change and the post loses nothing); a sweep claims the due builds (moving their next
// look ahead by a lease, so ctrl replicas do not post the same one at once) and posts what the
// commit should show now (./status.ts) under the environment's context, when it differs from what
// was posted last. A failed post retries with backoff; the lease brings it back after a crash. A
// pull request's build reports under its preview's name, its URL the preview's.
import type { Logger } from "pino";
import { Result } from "../../retry/queue.js";
import type { Store } from "../db/store.js";
import { buildById, claimDueBuildStatuses, recordBuildStatus } from "../domain/builds.js";
import { findPreview } from "../domain/previews.js";
import type { ExposureSettings } from "../domain/exposure.js";
import { openRepositorySecret, repositoryById } from "../domain/repositories.js";
import type { Keyring } from "../secrets/keyring.js";
import { CommitStatusReporter, environmentUrl, postCommitStatus } from "../previews/status.js";
import type { Provider } from "../previews/providers.js";
import { buildCommitStatus, buildStatusContext } from "./status.js";

export interface BuildStatusReporterOptions {
  readonly store: Store;
  readonly keyring: Keyring | undefined;
  readonly exposure: ExposureSettings;
  /** How often due statuses are looked for (ms; default 1 s). */
  readonly sweepIntervalMs?: number;
  readonly leaseMs?: number;
  readonly logger?: Logger;
}

export class BuildStatusReporter extends CommitStatusReporter {
  readonly #o: BuildStatusReporterOptions;

  constructor(o: BuildStatusReporterOptions) {
    super(
      "build status",
      (limit) => claimDueBuildStatuses(o.store, limit, o.leaseMs ?? 30_000),
      o.sweepIntervalMs,
      o.logger,
    );
    this.#o = o;
  }

  protected async report(id: string): Promise<Result> {
    const store = this.#o.store;
    const b = await buildById(store.db, id);
    if (!b) return Result.done;
    const repo = b.repository_id === null ? undefined : await repositoryById(store.db, b.repository_id);
    const token = repo ? await openRepositorySecret(store.db, this.#o.keyring, repo, "status-token") : undefined;
    const env = await store.db
      .selectFrom("environments")
      .select("slug")
      .where("id", "=", b.environment_id)
      .executeTakeFirst();
    if (!repo || token === undefined || b.commit_sha === null || !env) {
      // Nothing to post to (disconnected, no status token): none is due any more.
      await recordBuildStatus(store, id, null, b.state);
      return Result.done;
    }
    // A pull request's build: its preview's name and environment.
    const target = b.preview ?? env.slug;
    const preview = b.preview === null ? undefined : await findPreview(store.db, b.project_id, b.preview);
    const envId = b.preview === null ? b.environment_id : preview?.environment_id;
    const status = buildCommitStatus({
      state: b.state,
      environment: target,
      deploy: b.deploy === 1,
      error: b.error ?? "",
      url: b.state === "succeeded" && envId ? await environmentUrl(store, envId, this.#o.exposure) : "",
      logUrl: "",
    });
    const reported = JSON.stringify(status);
    if (reported !== b.status_reported)
      await postCommitStatus(
        {
          provider: repo.provider as Provider,
          apiUrl: repo.status_api_url,
          token,
          repository: repo.path,
          sha: b.commit_sha,
          context: buildStatusContext(target),
        },
        status,
      );
    await recordBuildStatus(store, id, reported, b.state);
    return Result.done;
  }
}
