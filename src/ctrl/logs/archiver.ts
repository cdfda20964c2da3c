// The log archive, a part on ctrl's Manager: every line `krane logs` can show live is also kept.
// For each environment and region with instances, it keeps one following request open to the
// region's agents through the hub (the same request a `krane logs -f` makes: the agent reads each
// pod's pods/log, new instances join, restarted containers are read from their start), and stores
// what comes back in the log history (history.ts), masked (mask.ts).
//
// No line twice, none lost: the archive keeps a cursor per instance and stream (the time of its
// last line taken: the kubelet's stamps are in order per stream; seam.ts). When it asks again — the agent went
// silent past answerTimeoutMs (restarted, disconnected), a write failed — it reads the cursors back
// from what was stored and asks from the earliest cursor of the instances still running (from the
// start when one of them, or one of its streams, has none), dropping each line not later than its
// stream's cursor; the
// store's key (instance, time) drops what two replicas both relayed.
//
// What the archive does not keep is counted by reason (onDropped; ctrl's
// krane_log_archive_dropped_lines_total{reason}): "flood", lines an agent dropped for want of room
// (its buffer full under a flood), never stored; "bound", the oldest lines of an environment past
// its line bound; "retention", lines past their workspace's retention.
//
// With several ctrl replicas, one archives an environment at a time: the one that holds its lease
// (lease.ts), renewed at every sweep; another takes over once the lease ends (leaseMs) or at once
// when its holder stops (it gives its leases up).
//
// Its upkeep is a DueWork: the key "archive" (every sweep) renews the leases, starts, re-asks and
// ends requests; "prune" (every pruneIntervalMs) deletes lines past their workspace's retention
// and the oldest past an environment's bound, and forgets leases that ended.
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { create } from "@bufbuild/protobuf";
import type { Logger } from "pino";
import { pino } from "pino";
import type { Runnable } from "../../base/lifecycle.js";
import { AgentLogRequestSchema, LogMarkerKind, type PushLogsRequest } from "../../gen/krane/ctrl/v1/logs_pb.js";
import { upkeepWork, type DueWork } from "../../retry/due.js";
import { Result } from "../../retry/queue.js";
import type { Store } from "../db/store.js";
import type { Keyring } from "../secrets/keyring.js";
import { DEFAULT_MAX_LINES_PER_ENVIRONMENT, pruneLogs, storedCursors, storeLines, type StoredLine } from "./history.js";
import type { LogHub } from "./hub.js";
import { ARCHIVE_LEASE_MS, forgetExpiredLeases, leaseEnvironments, releaseLeases } from "./lease.js";
import { EnvironmentSecrets } from "./secrets.js";
import { InstanceCursors, sourceKey, type StreamName } from "./seam.js";
import { streamName } from "./chunks.js";

export interface LogArchiverOptions {
  readonly store: Store;
  readonly hub: LogHub;
  /** Absent: no secrets can be set, so there are none to mask. */
  readonly keyring?: Keyring;
  readonly logger?: Logger;
  /** Between looks at what to archive (ms; default 2 s). */
  readonly sweepIntervalMs?: number;
  /** A region's agents silent this long are asked again (ms; default 10 s; they push every 2 s). */
  readonly answerTimeoutMs?: number;
  /** Between prunes (ms; default 10 min). */
  readonly pruneIntervalMs?: number;
  /** Lines kept per environment at most (default DEFAULT_MAX_LINES_PER_ENVIRONMENT). */
  readonly maxLinesPerEnvironment?: number;
  /** An environment-region without instances for this long stops being archived (ms; default 30 s). */
  readonly lingerMs?: number;
  /** How long this replica's lease on an environment lasts without renewal (ms; default ARCHIVE_LEASE_MS). */
  readonly leaseMs?: number;
  /** Told of a sweep or run that failed. */
  readonly onError?: (err: unknown) => void;
  /** Told of lines stored (metrics). */
  readonly onStored?: (lines: number) => void;
  /** Told of lines not kept, and why (metrics). */
  readonly onDropped?: (reason: DropReason, lines: number) => void;
}

/** Why lines were not kept: an agent's full buffer, an environment's bound, a workspace's retention. */
export type DropReason = "flood" | "bound" | "retention";

interface Target {
  readonly environmentId: string;
  readonly workspaceId: string;
  readonly namespace: string;
  readonly region: string;
}

interface Archive {
  readonly target: Target;
  cursors: InstanceCursors;
  cancel: (() => void) | undefined;
  /** When it was asked, and when each cluster last pushed (or was handed the request). */
  askedAt: number;
  readonly heard: Map<string, number>;
  /** Writes in order; a failed one makes the archive ask again from what was stored. */
  writing: Promise<void>;
  failed: boolean;
  asking: boolean;
  goneSince: number | undefined;
  /** The revisions and secret values of the deployments whose lines came. */
  readonly secrets: EnvironmentSecrets;
}

const ARCHIVE = "archive";
const PRUNE = "prune";

export class LogArchiver implements Runnable {
  readonly name = "log archive";
  readonly #o: LogArchiverOptions;
  readonly #work: DueWork;
  readonly #log: Logger;
  readonly #archives = new Map<string, Archive>();
  /** This replica, as its leases name it. */
  readonly holder = `${hostname()}/${randomBytes(6).toString("hex")}`;
  #prunedAt = -Infinity;
  #stopped = false;

  constructor(o: LogArchiverOptions) {
    this.#o = o;
    this.#log = o.logger ?? pino({ level: "silent" });
    const failed = (err: unknown): void => {
      if (o.onError) o.onError(err);
      else this.#log.warn({ err: err instanceof Error ? err.message : String(err) }, "log archive upkeep failed");
    };
    this.#work = upkeepWork(
      {
        name: this.name,
        due: () => Promise.resolve(this.#due()),
        reconcile: (key) => this.#run(key),
        sweepIntervalMs: o.sweepIntervalMs ?? 2_000,
        sweepLimit: 2,
        retry: { baseMs: 1_000, capMs: 30_000, minMs: 500 },
      },
      failed,
    );
  }

  start(): void {
    this.#work.start();
  }

  /** One sweep now, resolved once its runs are done (tests). */
  sweep(): Promise<void> {
    return this.#work.sweep();
  }

  /** Resolves once every line received so far is written (tests). */
  async flushed(): Promise<void> {
    await Promise.all([...this.#archives.values()].map((a) => a.writing));
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#work.stop();
    for (const a of this.#archives.values()) a.cancel?.();
    await this.flushed();
    // Another replica takes these environments at its next sweep, from what was stored.
    await releaseLeases(this.#o.store.db, this.holder).catch((err: unknown) => this.#o.onError?.(err));
  }

  #due(): string[] {
    const keys = [ARCHIVE];
    if (this.#o.store.clock() - this.#prunedAt >= (this.#o.pruneIntervalMs ?? 600_000)) keys.push(PRUNE);
    return keys;
  }

  async #run(key: string): Promise<Result> {
    const { store } = this.#o;
    if (key === PRUNE) {
      const r = await pruneLogs(
        store.db,
        store.clock(),
        this.#o.maxLinesPerEnvironment ?? DEFAULT_MAX_LINES_PER_ENVIRONMENT,
      );
      await forgetExpiredLeases(store.db, store.clock());
      this.#prunedAt = store.clock();
      if (r.expired > 0) this.#o.onDropped?.("retention", r.expired);
      if (r.overflow > 0) this.#o.onDropped?.("bound", r.overflow);
      if (r.overflow > 0)
        this.#log.warn({ lines: r.overflow }, "log history: environments past their bound lost their oldest lines");
      return Result.done;
    }
    await this.#archive();
    return Result.done;
  }

  /** The environment-regions with instances now. */
  async #targets(): Promise<Target[]> {
    const rows = await this.#o.store.db
      .selectFrom("instances")
      .innerJoin("deployments", "deployments.id", "instances.deployment_id")
      .innerJoin("workspaces", "workspaces.id", "deployments.workspace_id")
      .select([
        "deployments.environment_id as environmentId",
        "workspaces.id as workspaceId",
        "workspaces.k8s_namespace as namespace",
        "instances.region as region",
      ])
      .distinct()
      .execute();
    return rows;
  }

  async #archive(): Promise<void> {
    if (this.#stopped) return;
    const now = this.#o.store.clock();
    const timeout = this.#o.answerTimeoutMs ?? 10_000;
    const seen = new Set<string>();
    const targets = await this.#targets();
    // This replica archives the environments whose lease it holds (those it archives still
    // lingering included); the archives of the others end at once.
    const held = await leaseEnvironments(
      this.#o.store,
      this.holder,
      [...targets.map((t) => t.environmentId), ...[...this.#archives.values()].map((a) => a.target.environmentId)],
      this.#o.leaseMs ?? ARCHIVE_LEASE_MS,
    );
    if (this.#stopped) return;
    for (const [key, a] of this.#archives)
      if (!held.has(a.target.environmentId)) {
        a.cancel?.();
        this.#archives.delete(key);
      }
    for (const t of targets) {
      if (!held.has(t.environmentId)) continue;
      const key = `${t.environmentId}|${t.region}`;
      seen.add(key);
      let a = this.#archives.get(key);
      if (!a) {
        a = {
          target: t,
          cursors: new InstanceCursors(),
          cancel: undefined,
          askedAt: 0,
          heard: new Map(),
          writing: Promise.resolve(),
          failed: false,
          asking: false,
          goneSince: undefined,
          secrets: new EnvironmentSecrets(this.#o.store.db, this.#o.keyring, t.environmentId),
        };
        this.#archives.set(key, a);
      }
      a.goneSince = undefined;
    }
    for (const [key, a] of this.#archives) {
      if (!seen.has(key)) {
        a.goneSince ??= now;
        if (now - a.goneSince > (this.#o.lingerMs ?? 30_000)) {
          a.cancel?.();
          this.#archives.delete(key);
          continue;
        }
      }
      if (a.asking) continue;
      const silent =
        a.heard.size === 0 ? now - a.askedAt > timeout : [...a.heard.values()].some((at) => now - at > timeout);
      if (a.cancel === undefined || a.failed || silent) await this.#ask(a);
    }
  }

  /** Asks the region's agents (again) from what was stored. */
  async #ask(a: Archive): Promise<void> {
    a.asking = true;
    try {
      a.cancel?.();
      a.cancel = undefined;
      // What is being written is part of what was stored.
      await a.writing.catch(() => undefined);
      const t = a.target;
      const db = this.#o.store.db;
      a.cursors = await storedCursors(db, t.environmentId, t.region);
      const running = await db
        .selectFrom("instances")
        .innerJoin("deployments", "deployments.id", "instances.deployment_id")
        .select("instances.k8s_name")
        .where("deployments.environment_id", "=", t.environmentId)
        .where("instances.region", "=", t.region)
        .execute();
      const sinceNs = a.cursors.liveSince(
        running.map((r) => sourceKey(t.region, r.k8s_name)),
        0n,
      );
      const req = create(AgentLogRequestSchema, {
        requestId: `arc_${randomBytes(12).toString("hex")}`,
        k8sNamespace: t.namespace,
        environmentId: t.environmentId,
        follow: true,
        sinceUnixMs: sinceNs / 1_000_000n,
        chunks: true,
      });
      a.failed = false;
      a.heard.clear();
      a.askedAt = this.#o.store.clock();
      if (this.#stopped) return;
      a.cancel = this.#o.hub.request(
        t.region,
        req,
        (clusterId, push) => this.#onPush(a, clusterId, push),
        (clusterIds) => {
          for (const c of clusterIds) if (!a.heard.has(c)) a.heard.set(c, this.#o.store.clock());
        },
      );
    } finally {
      a.asking = false;
    }
  }

  #onPush(a: Archive, clusterId: string, push: PushLogsRequest): void {
    a.heard.set(clusterId, this.#o.store.clock());
    // A request the agent ended (it failed as a whole) is asked again at the next sweep.
    if (push.done) a.heard.set(clusterId, -Infinity);
    const region = a.target.region;
    const lines: { ns: bigint; instance: string; deploymentId: string; stream: StreamName; text: string }[] = [];
    let dropped = 0;
    for (const e of push.entries) {
      if (e.entry.case === "marker") {
        if (e.entry.value.kind === LogMarkerKind.DROPPED) dropped += Number(e.entry.value.dropped);
        continue;
      }
      if (e.entry.case !== "line") continue;
      const stream = streamName(e.stream);
      if (!a.cursors.admit(sourceKey(region, e.instance), e.timeUnixNano, stream)) continue;
      lines.push({
        ns: e.timeUnixNano,
        instance: e.instance,
        deploymentId: e.deploymentId,
        stream,
        text: e.entry.value,
      });
    }
    if (dropped > 0) this.#o.onDropped?.("flood", dropped);
    if (lines.length === 0) return;
    a.writing = a.writing
      .then(async () => {
        if (a.failed) return;
        await a.secrets.learn(lines.map((l) => l.deploymentId));
        const rows: StoredLine[] = lines.map((l) => ({
          environmentId: a.target.environmentId,
          workspaceId: a.target.workspaceId,
          region,
          instance: l.instance,
          ns: l.ns,
          deploymentId: l.deploymentId,
          revision: a.secrets.revision(l.deploymentId),
          stream: l.stream,
          line: a.secrets.mask(l.text),
        }));
        this.#o.onStored?.(await storeLines(this.#o.store.db, rows));
      })
      .catch((err: unknown) => {
        // The cursors moved past lines not stored: asked again from what was.
        a.failed = true;
        this.#o.onError?.(err);
      });
  }
}
