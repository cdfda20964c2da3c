// ctrl's build worker: claims queued builds (production first, at most `slots` at once, under a
// lease it renews as the build logs: src/ctrl/domain/builds.ts) and runs each with the BuildKit
// runner (src/builds/buildkit.ts: one buildkitd per project, so caches are per project; no network
// for RUN steps), pushes the image to the build registry, and for a deploy build records the
// digest as the environment's new revision. A pull request's build (row.preview set; its
// environment is the preview's base) creates or updates that preview instead, with the base's part
// of the commit's krane.yaml (../domain/preview-builds.ts), unless its pull request was closed
// while it built.
//
// Where a build runs (`--builds-in`): "ctrl" (the default) here, with the local BuildKit; "cluster"
// (DESIGN §10: work an agent pulls) in builder pods of the environment's first region: the worker
// claims it the same way, readies its source (a repository's commit is fetched here and kept as
// the project's archive), checks its krane.yaml, and hands it to the region as desired state of
// the build kind (`#handOff`); the region's agent (src/agent/builds) builds and pushes it and
// reports its log (renewing the lease) and outcome (../cluster-service/builds.ts), and `complete`
// does what follows a push here (`#deliver`: the pull credential, the deploy), then finishes it.
// A build whose worker or agent dies (ctrl stopped mid-build, the agent gone) goes back to the
// queue when its lease lapses, taken back from its region in the same transaction.
import { rootCertificates } from "node:tls";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { Agent } from "undici";
import type { Runnable } from "../../base/lifecycle.js";
import { BuildFailed, buildImage, startBuildkitd, type Buildkitd } from "../../builds/buildkit.js";
import { sourceProjectFile, type SourceProjectFile, SOURCE_PROJECT_FILE } from "../../builds/project-file.js";
import { pushOciArchive, type PushTarget } from "../../builds/push.js";
import { readTar } from "../../builds/tar.js";
import { fetchCommit, GitFetchFailed, type GitCredential } from "../../builds/git.js";
import { mib, packSourceDir, SourceDirError } from "../../builds/source-dir.js";
import { openRepositorySecret, repositoryById } from "../domain/repositories.js";
import { ensureBuildPullCredential } from "../domain/pull-secrets.js";
import { CTRL_PUSH_SUBJECT, type RegistryTokens } from "./registry-token.js";
import type { Keyring } from "../secrets/keyring.js";
import { refusalLine } from "../../project-file/read.js";
import { CreateDeploymentRequestSchema } from "../../gen/krane/ctrl/v1/api_pb.js";
import { DueWork } from "../../retry/due.js";
import { Result } from "../../retry/queue.js";
import type { BuildRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import {
  buildById,
  claimBuilds,
  finishBuild,
  holdRunningBuild,
  logBuild,
  handBuildTo,
  keepFetchedSource,
  readSource,
  type Outcome,
} from "../domain/builds.js";
import { environmentRegions } from "../domain/environments.js";
import { builtImageName, encodeApplyBuild } from "../payloads/build.js";
import { buildAllowanceOf } from "../domain/quotas.js";
import { createAskedDeployment } from "../domain/deployments.js";
import type { DomainCheckPolicy } from "../domain/domains.js";
import type { ExposureSettings } from "../domain/exposure.js";
import { applyEnvironmentFile, type BuiltImage } from "../domain/project-file.js";
import { deployBuiltPreview } from "../domain/preview-builds.js";
import { DomainError } from "../errors.js";
import { currentRevision } from "../rollout/actions.js";
import { validateCreateDeployment } from "../validate/api.js";

export interface BuildSettings {
  /** The registry built images are pushed to, host:port (what image names start with). */
  readonly registry: string;
  /** Its credentials (Basic); none: it takes anonymous pushes (or tokens). */
  readonly username?: string;
  readonly password?: string;
  /**
   * Token mode (the registry's `auth: token` trusts ctrl's key): pushes carry a token ctrl
   * signs for the one repository, and each building workspace gets a pull identity that its
   * pull Secret carries and ctrl's token endpoint checks (./token-endpoint.ts).
   */
  readonly tokens?: RegistryTokens;
  /** Extra CAs (PEM) its TLS certificate may come from. */
  readonly ca?: readonly string[];
  readonly buildkitd: string;
  readonly buildctl: string;
  /** The OCI layout of the base images (src/cluster/bases.ts). */
  readonly basesLayout: string;
  /** Where each project's BuildKit state (its cache) lives. */
  readonly stateDir: string;
  /** Builds at once (default 1); 0: this ctrl queues builds and runs none (another replica's worker does). */
  readonly slots?: number;
  /** A build's time limit (default 15 min). */
  readonly timeoutMs?: number;
  /** A source archive's bound (default 64 MiB). */
  readonly maxSourceBytes?: number;
  readonly sweepIntervalMs?: number;
  readonly leaseMs?: number;
  /** CA certificates (a PEM file) repositories' HTTPS certificates may come from, beside the system's. */
  readonly gitCaFile?: string;
  /**
   * Where builds run: "ctrl" (default) in this worker with the local BuildKit; "cluster" in
   * builder pods of the environment's first region, handed to its agent as the build kind's
   * desired state (`--builds-in cluster`).
   */
  readonly runIn?: BuildsIn;
  /** A builder pod's CPU (millicores, default 1000) and memory (MiB, default 2048) in cluster mode. */
  readonly cpuMillicores?: number;
  readonly memoryMib?: number;
}

export type BuildsIn = "ctrl" | "cluster";

/** What a region's agent reports at the end of a build it ran. */
export type RemoteOutcome =
  | { readonly state: "succeeded"; readonly imageDigest: string }
  | {
      readonly state: "failed" | "cancelled";
      readonly error: string;
      readonly failedStep?: string;
      readonly failedOutput: readonly string[];
    };

export interface BuildWorkerDeps {
  readonly store: Store;
  /** The environment has a new revision (the rollout driver's). */
  readonly environmentChanged: (environmentId: string) => Promise<void>;
  readonly log: (msg: string, fields?: Record<string, unknown>) => void;
  /** What applying a source's krane.yaml needs (as ProjectFileService has it). */
  readonly projectFile: { readonly settings: ExposureSettings; readonly policy: DomainCheckPolicy };
  /** Opens repositories' fetch credentials. */
  readonly keyring: Keyring | undefined;
}

const FLUSH_MS = 1_000;

export class BuildWorker implements Runnable {
  readonly name = "build worker";
  readonly #s: BuildSettings;
  readonly #d: BuildWorkerDeps;
  readonly #work: DueWork;
  readonly #daemons = new Map<string, Promise<Buildkitd>>();
  readonly #dispatcher: Agent;
  readonly #leaseMs: number;
  /** A build's own time limit (a workspace with fewer build minutes left gets less). */
  readonly #timeoutMs: number;
  /** Remote builds whose outcome is being recorded (`complete`), by id. */
  readonly #completing = new Map<string, Promise<void>>();

  constructor(s: BuildSettings, d: BuildWorkerDeps) {
    this.#s = s;
    this.#d = d;
    this.#leaseMs = s.leaseMs ?? 60_000;
    this.#timeoutMs = s.timeoutMs ?? 15 * 60_000;
    if (s.tokens && !d.keyring)
      throw new Error("build registry tokens: the pull identities are sealed, so ctrl needs its master key");
    const slots = s.slots ?? 1;
    this.#dispatcher = new Agent({ connect: s.ca && s.ca.length > 0 ? { ca: [...rootCertificates, ...s.ca] } : {} });
    this.#work = new DueWork({
      name: "build worker",
      due: () => claimBuilds(d.store, slots, this.#leaseMs),
      reconcile: (id, signal) => this.#run(id, signal),
      sweepIntervalMs: s.sweepIntervalMs ?? 2_000,
      sweepLimit: Math.max(1, slots),
      concurrency: Math.max(1, slots),
      retry: { baseMs: 1_000, capMs: 30_000 },
      sweepAtStart: true,
      onSweepError: (err) => d.log("claiming builds failed; retrying", { err: String(err) }),
    });
  }

  /** The build registry when ctrl issues its tokens (its pull credentials are ctrl's own). */
  get tokenRegistry(): string | undefined {
    return this.#s.tokens ? this.#s.registry : undefined;
  }

  get maxSourceBytes(): number | undefined {
    return this.#s.maxSourceBytes;
  }

  /** A build was queued: look for work now, not at the next sweep. */
  queued(): void {
    void this.#work.sweep();
  }

  start(): void {
    this.#work.start();
  }

  idle(): Promise<void> {
    return this.#work.idle();
  }

  async stop(): Promise<void> {
    await this.#work.stop();
    const daemons = [...this.#daemons.values()];
    this.#daemons.clear();
    await Promise.all(daemons.map((p) => p.then((b) => b.close()).catch(() => {})));
    await this.#dispatcher.close();
  }

  #daemon(projectId: string): Promise<Buildkitd> {
    let d = this.#daemons.get(projectId);
    if (!d) {
      d = startBuildkitd({
        buildkitd: this.#s.buildkitd,
        buildctl: this.#s.buildctl,
        stateDir: join(this.#s.stateDir, projectId),
      });
      d.catch(() => this.#daemons.delete(projectId));
      this.#daemons.set(projectId, d);
    }
    return d;
  }

  #target(): PushTarget {
    const { username, password, tokens } = this.#s;
    const basic =
      username === undefined ? "" : `Basic ${Buffer.from(`${username}:${password ?? ""}`).toString("base64")}`;
    return {
      base: `https://${this.#s.registry}`,
      authorization: tokens ? tokens.bearerFor(CTRL_PUSH_SUBJECT, ["pull", "push"]) : () => Promise.resolve(basic),
      dispatcher: this.#dispatcher,
    };
  }

  /**
   * The built image as the environment's new revision: with the source's krane.yaml part applied
   * in the same transaction when it has one (a refusal names the file's line; nothing deployed),
   * else the current revision's settings with the new image.
   */
  async #deploy(
    row: BuildRow,
    names: { workspace: string; project: string; environment: string },
    file: SourceProjectFile,
    built: BuiltImage,
  ): Promise<{ deployment?: { id: string; revision: number }; environmentId?: string }> {
    const { store } = this.#d;
    if (row.preview !== null) return this.#deployPreview(row, names, file, built);
    if (file.kind === "environment") {
      try {
        const applied = await applyEnvironmentFile(
          store,
          { ref: names, desired: file.desired, prune: false, plannedFrom: null, built },
          this.#d.projectFile.settings,
          this.#d.projectFile.policy,
        );
        // A new image always changes the revision.
        if (applied.revision === null) throw new Error("unreachable: the apply made no revision");
        return applied.revision;
      } catch (err) {
        if (err instanceof DomainError)
          throw new Error(refusalLine(SOURCE_PROJECT_FILE, file.source, names.environment, err.message));
        throw err;
      }
    }
    const ask = validateCreateDeployment(
      create(CreateDeploymentRequestSchema, {
        workspace: row.workspace_id,
        project: row.project_id,
        environment: row.environment_id,
        image: built.image,
        buildId: built.buildId,
        inherit: true,
      }),
    );
    ask.imageDigest = built.imageDigest;
    return createAskedDeployment(store, ask, currentRevision);
  }

  /** A pull request's build: its preview made or updated, with the base's part of the file. */
  async #deployPreview(
    row: BuildRow,
    names: { workspace: string; project: string; environment: string },
    file: SourceProjectFile,
    built: BuiltImage,
  ): Promise<{ deployment?: { id: string; revision: number }; environmentId?: string }> {
    const { store, keyring, projectFile } = this.#d;
    const repo = row.repository_id === null ? undefined : await repositoryById(store.db, row.repository_id);
    if (!repo || row.preview === null) throw new Error("its repository was disconnected");
    const name = row.preview;
    try {
      const done = await store.write(async (tx) => {
        // Its pull request closed meanwhile: no preview comes back.
        if (!(await holdRunningBuild(tx, row.id))) throw new BuildFailed("the build was cancelled", []);
        return deployBuiltPreview(
          tx,
          { keyring, exposure: projectFile.settings, policy: projectFile.policy },
          {
            workspaceId: row.workspace_id,
            projectId: row.project_id,
            baseEnvironmentId: row.environment_id,
            name,
            pullRequest: {
              provider: repo.provider === "gitlab" ? "gitlab" : "github",
              repositoryId: repo.id,
              repository: repo.path,
              number: Number(row.pr_number ?? 0),
              headSha: row.commit_sha ?? "",
              fork: Number(row.pr_fork) === 1,
            },
            built,
            desired: file.kind === "environment" ? file.desired : undefined,
          },
        );
      });
      return done;
    } catch (err) {
      if (err instanceof DomainError && file.kind === "environment")
        throw new Error(refusalLine(SOURCE_PROJECT_FILE, file.source, names.environment, err.message));
      throw err;
    }
  }

  /**
   * A repository build's source: its commit fetched (with the repository's credential, opened in
   * memory only) into a scratch directory and packed as an upload would be, so the build, its
   * krane.yaml and its deploy go the way an uploaded source's do.
   */
  async #fetch(
    row: BuildRow,
    work: string,
    maxBytes: number,
    log: (line: string) => void,
    signal: AbortSignal,
  ): Promise<Buffer> {
    const { store, keyring } = this.#d;
    const commit = row.commit_sha ?? "";
    const repo = row.repository_id === null ? undefined : await repositoryById(store.db, row.repository_id);
    if (!repo) throw new Error("its repository was disconnected");
    const secret = await openRepositorySecret(store.db, keyring, repo, "credential");
    if (repo.credential_kind !== "none" && secret === undefined)
      throw new Error("the repository's credential cannot be opened (this ctrl lacks its master key)");
    const credential: GitCredential | undefined =
      secret === undefined
        ? undefined
        : repo.credential_kind === "token"
          ? { kind: "token", token: secret, username: repo.credential_username }
          : { kind: "deploy_key", privateKey: secret };
    const dir = join(work, "checkout");
    log(`fetching ${commit} (${row.branch ?? ""}) from ${repo.url}`);
    try {
      await fetchCommit({
        url: repo.url,
        commit,
        dir,
        signal,
        ...(credential ? { credential } : {}),
        ...(this.#s.gitCaFile === undefined ? {} : { caFile: this.#s.gitCaFile }),
      });
      const packed = await packSourceDir(dir, { maxBytes, maxArchiveBytes: maxBytes });
      log(`fetched ${commit}: ${packed.files} files, ${mib(packed.bytes)}`);
      return packed.archive;
    } catch (err) {
      if (err instanceof GitFetchFailed || err instanceof SourceDirError) throw new BuildFailed(err.message, []);
      throw err;
    }
  }

  /**
   * After the image is in the registry (pushed here or by a region's agent): the workspace's pull
   * credential, and a deploy build's deploy, unless it was cancelled meanwhile (`stillRunning`).
   */
  async #deliver(
    row: BuildRow,
    names: Names,
    file: SourceProjectFile,
    image: string,
    digest: string,
    log: (line: string) => void,
    stillRunning: () => Promise<boolean>,
  ): Promise<Outcome> {
    const { store, keyring } = this.#d;
    if (
      this.#s.tokens &&
      keyring &&
      (await ensureBuildPullCredential(store, keyring, row.workspace_id, this.#s.registry))
    )
      log(`the workspace's pull credential for ${this.#s.registry} is new; its pull Secret carries it`);
    let deploymentId: string | undefined;
    if (Number(row.deploy) === 1) {
      // A build cancelled while it pushed deploys nothing.
      if (!(await stillRunning())) throw new BuildFailed("the build was cancelled", []);
      const deployed = await this.#deploy(row, names, file, { image, imageDigest: digest, buildId: row.id });
      if (deployed.deployment) {
        deploymentId = deployed.deployment.id;
        log(
          `deployed ${row.preview ?? names.environment} as revision ${deployed.deployment.revision} (${deploymentId})`,
        );
        await this.#d.environmentChanged(deployed.environmentId ?? row.environment_id);
      } else log(`preview ${row.preview ?? ""} is from a fork and waits for approval (krane preview approve)`);
    }
    return { state: "succeeded", image, imageDigest: digest, ...(deploymentId ? { deploymentId } : {}) };
  }

  /** A deploy build's krane.yaml, read from its source (a file the deploy would refuse throws), said in its log. */
  #projectFile(row: BuildRow, names: Names, archive: Buffer, log: (line: string) => void): SourceProjectFile {
    const file: SourceProjectFile =
      Number(row.deploy) === 1
        ? sourceProjectFile(readTar(archive, this.#limits), names.project, names.environment)
        : { kind: "none" };
    if (file.kind === "other") log(file.note);
    if (file.kind === "environment")
      log(
        row.preview === null
          ? `${SOURCE_PROJECT_FILE}: the deploy applies environments.${names.environment} with the new revision`
          : `${SOURCE_PROJECT_FILE}: preview ${row.preview} takes environments.${names.environment}'s deployment and config`,
      );
    return file;
  }

  get #maxSource(): number {
    return this.#s.maxSourceBytes ?? 64 * 1024 * 1024;
  }

  /** The bounds of an unpacked source. */
  get #limits(): { maxBytes: number; maxEntries: number } {
    return { maxBytes: 4 * this.#maxSource, maxEntries: 100_000 };
  }

  /**
   * Cluster mode: the build's source made ready (a repository's commit fetched and kept as the
   * project's archive), its krane.yaml checked, and the build handed to its environment's first
   * region (alphabetically) as desired state of the build kind. Its agent's reports renew its lease
   * and end it (`complete`); an agent that stops reporting lets the lease lapse, and the build goes
   * back to the queue (taken back from the region in the same transaction).
   */
  async #handOff(
    row: BuildRow,
    names: Names,
    allowance: { timeoutMs: number; cappedBy?: string },
    stop: AbortSignal,
  ): Promise<Result> {
    const { store } = this.#d;
    const lines: string[] = [];
    const log = (line: string): void => void lines.push(line);
    const work = await mkdtemp(join(tmpdir(), "krane-build-src-"));
    try {
      let digest = row.source_digest;
      let archive: Buffer | undefined;
      if (row.commit_sha === null) archive = await readSource(store.db, row.project_id, digest);
      else {
        archive = await this.#fetch(row, work, this.#maxSource, log, stop);
        digest = await keepFetchedSource(store, row, archive);
      }
      if (!archive) throw new Error(`the source archive ${row.source_digest} is gone`);
      this.#projectFile(row, names, archive, log);
      const region = (await environmentRegions(store.db, row.environment_id))[0]?.region;
      if (region === undefined) throw new BuildFailed("its environment runs in no region, so no cluster builds it", []);
      const payload = encodeApplyBuild({
        buildId: row.id,
        workspaceId: row.workspace_id,
        projectId: row.project_id,
        environmentId: row.environment_id,
        sourceDigest: digest,
        dockerfile: row.dockerfile,
        registry: this.#s.registry,
        repository: `${names.workspace}/${names.project}`,
        registryCa: this.#s.ca ?? [],
        cpuMillicores: this.#s.cpuMillicores ?? 1000,
        memoryMib: this.#s.memoryMib ?? 2048,
        timeoutMs: allowance.timeoutMs,
        ...(allowance.cappedBy === undefined ? {} : { timeLimitReason: allowance.cappedBy }),
        maxSourceBytes: this.#limits.maxBytes,
      });
      if (await handBuildTo(store, row.id, region, row.environment_id, payload))
        log(`handed to the builder pods of region ${region}`);
      await logBuild(store, row.id, lines, this.#leaseMs);
    } catch (err) {
      if (stop.aborted) return Result.done; // ctrl stopping: the lease lapses, it runs again
      const outcome = failure(err, false, log);
      await logBuild(store, row.id, lines, this.#leaseMs).catch(() => {});
      await finishBuild(store, row.id, outcome);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
    return Result.done;
  }

  /** The Authorization a region's agent pushes a build's image with (GetBuildPushAuthorization). */
  async pushAuthorization(row: BuildRow): Promise<string> {
    const names = await this.#names(row);
    if (!names) throw new Error("its environment is gone");
    return this.#target().authorization(`${names.workspace}/${names.project}`);
  }

  /** How long a build's lease lasts from its last log lines (its agent's last report). */
  get leaseMs(): number {
    return this.#leaseMs;
  }

  /**
   * A region's agent ended a build it ran: a failure is recorded; a pushed image is delivered as
   * after this worker's own builds (the pull credential, the deploy), then recorded. One at a time
   * per build in this process: an agent's retry of a report still being handled waits its turn
   * and finds the build finished.
   */
  async complete(row: BuildRow, outcome: RemoteOutcome): Promise<void> {
    const previous = this.#completing.get(row.id) ?? Promise.resolve();
    const done = previous.then(() => this.#complete(row.id, outcome));
    const settled = done.catch(() => {});
    this.#completing.set(row.id, settled);
    try {
      await done;
    } finally {
      if (this.#completing.get(row.id) === settled) this.#completing.delete(row.id);
    }
  }

  async #complete(id: string, outcome: RemoteOutcome): Promise<void> {
    const { store } = this.#d;
    const row = await buildById(store.db, id);
    if (row?.state !== "running") return;
    const lines: string[] = [];
    const log = (line: string): void => void lines.push(line);
    let result: Outcome;
    if (outcome.state !== "succeeded") {
      log(`build failed: ${outcome.error}`);
      result = {
        state: outcome.state,
        error: outcome.error,
        ...(outcome.failedStep === undefined ? {} : { failedStep: outcome.failedStep }),
        failedOutput: outcome.failedOutput.slice(-30),
      };
    } else {
      try {
        const names = await this.#names(row);
        if (!names) throw new Error("its environment is gone");
        const archive = await readSource(store.db, row.project_id, row.source_digest);
        if (!archive) throw new Error(`the source archive ${row.source_digest} is gone`);
        const repository = `${names.workspace}/${names.project}`;
        log(`pushed ${this.#s.registry}/${repository}@${outcome.imageDigest}`);
        const file = this.#projectFile(row, names, archive, () => {});
        const image = builtImageName(this.#s.registry, repository, id);
        result = await this.#deliver(row, names, file, image, outcome.imageDigest, log, async () => {
          return (await logBuild(store, id, lines.splice(0), this.#leaseMs)) === "running";
        });
      } catch (err) {
        result = failure(err, false, log);
      }
    }
    await logBuild(store, id, lines, this.#leaseMs).catch(() => {});
    await finishBuild(store, id, result);
  }

  #names(row: BuildRow): Promise<Names | undefined> {
    return this.#d.store.db
      .selectFrom("environments as e")
      .innerJoin("projects as p", "p.id", "e.project_id")
      .innerJoin("workspaces as w", "w.id", "e.workspace_id")
      .select(["w.slug as workspace", "p.slug as project", "e.slug as environment"])
      .where("e.id", "=", row.environment_id)
      .executeTakeFirst();
  }

  async #run(id: string, stop: AbortSignal): Promise<Result> {
    const { store } = this.#d;
    const row = await buildById(store.db, id);
    if (row?.state !== "running") return Result.done;
    const names = await this.#names(row);
    if (!names) {
      await finishBuild(store, id, { state: "failed", error: "its environment is gone" });
      return Result.done;
    }
    // The workspace's build minutes: none left fails the build saying so; fewer than its time
    // limit cap it, and a build that reaches them fails naming the quota.
    const allowance = await buildAllowanceOf(store.db, row.workspace_id, this.#timeoutMs, Date.now(), id);
    if (!allowance.ok) {
      await finishBuild(store, id, { state: "failed", error: allowance.message });
      return Result.done;
    }
    if (this.#s.runIn === "cluster") return this.#handOff(row, names, allowance, stop);
    const abort = new AbortController();
    const onStop = (): void => abort.abort();
    stop.addEventListener("abort", onStop, { once: true });
    let pending: string[] = [];
    const flush = async (): Promise<void> => {
      const lines = pending;
      pending = [];
      const state = await logBuild(store, id, lines, this.#leaseMs);
      if (state !== "running") abort.abort();
    };
    const timer = setInterval(() => void flush().catch(() => {}), FLUSH_MS);
    const log = (line: string): void => void pending.push(line);
    const work = await mkdtemp(join(tmpdir(), "krane-build-out-"));
    let outcome: Outcome;
    try {
      const archive =
        row.commit_sha === null
          ? await readSource(store.db, row.project_id, row.source_digest)
          : await this.#fetch(row, work, this.#maxSource, log, abort.signal);
      if (!archive) throw new Error(`the source archive ${row.source_digest} is gone`);
      // A deploy reads the source's krane.yaml first: a file it would refuse fails the build before it runs.
      const file = this.#projectFile(row, names, archive, log);
      const daemon = await this.#daemon(row.project_id);
      const repository = `${names.workspace}/${names.project}`;
      const image = builtImageName(this.#s.registry, repository, id);
      const output = join(work, "image.oci.tar");
      const built = await buildImage({
        buildctl: this.#s.buildctl,
        socket: daemon.socket,
        archive,
        limits: this.#limits,
        ...(row.dockerfile === null ? {} : { dockerfile: row.dockerfile }),
        basesLayout: this.#s.basesLayout,
        imageName: image,
        output,
        log,
        timeoutMs: allowance.timeoutMs,
        ...(allowance.cappedBy === undefined ? {} : { timeLimitReason: allowance.cappedBy }),
        signal: abort.signal,
      });
      log(`pushing ${image}`);
      const digest = await pushOciArchive(this.#target(), output, repository, id);
      if (digest !== built.digest) log(`the registry holds the manifest as ${digest} (BuildKit said ${built.digest})`);
      log(`pushed ${this.#s.registry}/${repository}@${digest}`);
      outcome = await this.#deliver(row, names, file, image, digest, log, async () => {
        await flush();
        return !abort.signal.aborted;
      });
    } catch (err) {
      outcome = failure(err, abort.signal.aborted, log);
    } finally {
      clearInterval(timer);
      stop.removeEventListener("abort", onStop);
      await rm(work, { recursive: true, force: true });
    }
    if (stop.aborted && outcome.state === "cancelled") return Result.done; // ctrl stopping: the lease lapses, it runs again
    await flush().catch(() => {});
    await finishBuild(store, id, outcome);
    return Result.done;
  }
}

type Names = { workspace: string; project: string; environment: string };

/** A build's failure as its outcome (cancelled when it was aborted), said in its log. */
function failure(err: unknown, aborted: boolean, log: (line: string) => void): Outcome {
  const message = err instanceof Error ? err.message : String(err);
  log(`build failed: ${message}`);
  return err instanceof BuildFailed
    ? {
        state: aborted ? "cancelled" : "failed",
        error: message,
        ...(err.step === undefined ? {} : { failedStep: err.step }),
        failedOutput: err.lastLines.slice(-30),
      }
    : { state: "failed", error: message };
}
