// Per ctrl process, the live views being watched, kept fresh by the change hints of committed
// writes (../db/notify.ts subscribeChanges: `e:<environment>`, `c:<region>`, or null for
// "anything"). Each watched environment has one Follower, read once per change however many
// streams watch it; the overview is one feed for every stream, which keeps each environment's
// summary with the version it last changed at, so a stream sends only what changed since its
// last message. Nothing here polls the database: a view is read when a hint names it (plus
// once when its first watcher comes).
import type { Cluster } from "../../gen/krane/ctrl/v1/api_pb.js";
import { toBinary } from "@bufbuild/protobuf";
import { BinaryWriter } from "@bufbuild/protobuf/wire";
import {
  EnvironmentViewSchema,
  type EnvironmentSummary,
  type EnvironmentView,
} from "../../gen/krane/ctrl/v1/live_pb.js";
import type { ChangeNotifier, ChangeTopic } from "../db/notify.js";
import { FinalError, Follower, type FollowerOptions } from "./follower.js";

export interface LiveSource {
  /** An environment's whole view; throws FinalError when it is gone. */
  environment(environmentId: string): Promise<EnvironmentView>;
  /** Summaries of these environments (all when absent); a missing one is gone. */
  summaries(ids?: readonly string[]): Promise<EnvironmentSummary[]>;
  clusters(): Promise<Cluster[]>;
}

export interface LiveHubOptions {
  /** Least time between two reads of a view while changes keep coming (ms; default 50). */
  coalesceMs?: number;
  /** Least time between two reads prompted only by clusters' heartbeats (ms; default 5 s). */
  slowMs?: number;
  onError?: (err: unknown) => void;
}

/**
 * A view as streams send it: the message, and (built once, however many streams send it) the
 * response's `view` field already encoded, which binary streams send as it is.
 */
export interface SharedView {
  view: EnvironmentView;
  /** Field 1 of WatchEnvironmentResponse as an unknown field's data: the length, then the bytes. */
  field: Uint8Array;
}

interface EnvironmentFeed {
  follower: Follower<SharedView>;
  regions: Set<string>;
}

/** What a stream of the overview sends next. */
export interface OverviewDelta {
  reset: boolean;
  upserts: EnvironmentSummary[];
  removed: string[];
  clusters: Cluster[] | null;
  version: number;
}

/** Removed environments remembered for streams' deltas; past this, a stream that old is reset. */
const REMOVED_MAX = 10_000;

export class OverviewFeed {
  private readonly rows = new Map<string, { msg: EnvironmentSummary; version: number }>();
  private readonly removed = new Map<string, number>();
  private clusterList: Cluster[] = [];
  private clustersVersion = 0;
  /** A stream whose last version is below this must start again from the whole. */
  private floor = 0;
  private stamp = 0;
  private all = true;
  private clustersDirty = true;
  private readonly ids = new Set<string>();
  readonly follower: Follower<number>;

  constructor(
    private readonly source: LiveSource,
    opts: FollowerOptions,
  ) {
    this.follower = new Follower(() => this.refresh(), opts);
  }

  /** Environments named by a change; `null`: every one. */
  environmentsChanged(ids: readonly string[] | null): void {
    if (ids === null) this.all = true;
    else for (const id of ids) this.ids.add(id);
    this.follower.poke(true);
  }

  clustersChanged(urgent: boolean): void {
    this.clustersDirty = true;
    this.follower.poke(urgent);
  }

  private async refresh(): Promise<number> {
    const all = this.all;
    const ids = [...this.ids];
    const withClusters = this.clustersDirty;
    this.all = false;
    this.ids.clear();
    this.clustersDirty = false;
    try {
      const fresh = all ? await this.source.summaries() : ids.length > 0 ? await this.source.summaries(ids) : [];
      const list = withClusters ? await this.source.clusters() : null;
      const v = ++this.stamp;
      const seen = new Set<string>();
      for (const msg of fresh) {
        seen.add(msg.environmentId);
        this.rows.set(msg.environmentId, { msg, version: v });
        this.removed.delete(msg.environmentId);
      }
      const gone = all ? [...this.rows.keys()].filter((id) => !seen.has(id)) : ids.filter((id) => !seen.has(id));
      for (const id of gone) {
        if (!this.rows.delete(id)) continue;
        this.removed.set(id, v);
      }
      if (this.removed.size > REMOVED_MAX) {
        // Forget the oldest half; streams older than what is forgotten start again.
        const sorted = [...this.removed].sort((a, b) => a[1] - b[1]);
        for (const [id, at] of sorted.slice(0, sorted.length >> 1)) {
          this.removed.delete(id);
          this.floor = Math.max(this.floor, at);
        }
      }
      if (list !== null) {
        this.clusterList = list;
        this.clustersVersion = v;
      }
      return v;
    } catch (err) {
      // Read again what this attempt took.
      if (all) this.all = true;
      for (const id of ids) this.ids.add(id);
      if (withClusters) this.clustersDirty = true;
      throw err;
    }
  }

  /**
   * What a stream that has seen `after` (0: nothing) sends next, once there is something: the
   * whole when it is new or too far behind, else what changed. `visible` says which environments
   * the stream's caller may read. Undefined when `signal` aborts first.
   */
  async next(
    after: number,
    visible: (s: EnvironmentSummary) => boolean,
    signal: AbortSignal,
  ): Promise<OverviewDelta | undefined> {
    const got = await this.follower.next(after, signal);
    if (got === undefined) return undefined;
    const version = got.value;
    if (after === 0 || after < this.floor) {
      return {
        reset: true,
        upserts: [...this.rows.values()].map((r) => r.msg).filter(visible),
        removed: [],
        clusters: this.clusterList,
        version,
      };
    }
    const upserts: EnvironmentSummary[] = [];
    for (const r of this.rows.values()) if (r.version > after && visible(r.msg)) upserts.push(r.msg);
    const removed: string[] = [];
    for (const [id, at] of this.removed) if (at > after) removed.push(id);
    return {
      reset: false,
      upserts,
      removed,
      clusters: this.clustersVersion > after ? this.clusterList : null,
      version,
    };
  }

  close(): void {
    this.follower.close();
  }
}

export class LiveHub {
  private readonly environments = new Map<string, EnvironmentFeed>();
  private overview: OverviewFeed | null = null;
  private overviewReaders = 0;
  private readonly unsubscribe: () => void;
  private readonly opts: FollowerOptions;

  constructor(
    private readonly source: LiveSource,
    notifier: ChangeNotifier,
    options: LiveHubOptions = {},
  ) {
    this.opts = { coalesceMs: options.coalesceMs ?? 50, slowMs: options.slowMs ?? 5_000, onError: options.onError };
    this.unsubscribe = notifier.subscribeChanges((topics) => this.onChanges(topics));
  }

  private onChanges(topics: readonly ChangeTopic[] | null): void {
    if (topics === null) {
      for (const f of this.environments.values()) f.follower.poke(true);
      this.overview?.environmentsChanged(null);
      this.overview?.clustersChanged(true);
      return;
    }
    const envs: string[] = [];
    let clusters = false;
    for (const t of topics) {
      if (t.startsWith("e:")) {
        const id = t.slice(2);
        envs.push(id);
        this.environments.get(id)?.follower.poke(true);
      } else if (t.startsWith("c:")) {
        clusters = true;
        const region = t.slice(2);
        for (const f of this.environments.values()) if (f.regions.has(region)) f.follower.poke(false);
      }
    }
    if (envs.length > 0) this.overview?.environmentsChanged(envs);
    if (clusters) this.overview?.clustersChanged(false);
  }

  /** Joins an environment's feed; call `release` when the stream ends. */
  watchEnvironment(environmentId: string): { follower: Follower<SharedView>; release: () => void } {
    let feed = this.environments.get(environmentId);
    if (!feed) {
      const regions = new Set<string>();
      const follower = new Follower(async () => {
        const view = await this.source.environment(environmentId);
        regions.clear();
        for (const r of view.status?.environment?.regions ?? []) regions.add(r.region);
        return { view, field: new BinaryWriter().bytes(toBinary(EnvironmentViewSchema, view)).finish() };
      }, this.opts);
      feed = { follower, regions };
      this.environments.set(environmentId, feed);
    }
    const f = feed;
    f.follower.readers++;
    let released = false;
    return {
      follower: f.follower,
      release: () => {
        if (released) return;
        released = true;
        f.follower.readers--;
        if (f.follower.readers === 0 && this.environments.get(environmentId) === f) {
          this.environments.delete(environmentId);
          f.follower.close();
        }
      },
    };
  }

  /** Joins the overview's feed; call `release` when the stream ends. */
  watchOverview(): { feed: OverviewFeed; release: () => void } {
    if (!this.overview) this.overview = new OverviewFeed(this.source, this.opts);
    const feed = this.overview;
    this.overviewReaders++;
    let released = false;
    return {
      feed,
      release: () => {
        if (released) return;
        released = true;
        this.overviewReaders--;
        if (this.overviewReaders === 0 && this.overview === feed) {
          this.overview = null;
          feed.close();
        }
      },
    };
  }

  /** Views being followed (tests, metrics). */
  get size(): { environments: number; overview: boolean } {
    return { environments: this.environments.size, overview: this.overview !== null };
  }

  close(): void {
    this.unsubscribe();
    for (const f of this.environments.values()) f.follower.close();
    this.environments.clear();
    this.overview?.close();
    this.overview = null;
  }
}

export { FinalError };
