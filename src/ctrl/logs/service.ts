// LogService (public: StreamLogs) and LogChannelService (agents: their standing channel and their
// pushes). A StreamLogs call asks each region's agents through the hub, merges what comes back by
// time (merge.ts), and sends it in batches; a reader that does not keep up makes the merge drop
// lines (with a marker), never an agent wait. A region may have several clusters: the call waits
// for every cluster the hub says was asked (and every one that answers), so a read does not end
// when one cluster finished before another answered; one that stays silent past the answer
// timeout ends with a marker naming it (following: a cluster that answered and then went silent
// ends the stream `unavailable`, and the reader resumes).
import { randomBytes } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import {
  AgentLogRequestSchema,
  LogChannelMessageSchema,
  LogChannelService,
  LogEntrySchema,
  LogMarkerKind,
  LogService,
  StreamLogsResponseSchema,
  type LogEntry,
  type PushLogsRequest,
  type StreamLogsResponse,
} from "../../gen/krane/ctrl/v1/logs_pb.js";
import { msToNs } from "../../contracts/logs.js";
import { agentPrincipal, agentRegion } from "../auth/principal.js";
import type { Store } from "../db/store.js";
import { validateLogQuery, validateLogRetentionDays, type LogQuery } from "../validate/logs.js";
import type { LogHub } from "./hub.js";
import { LogMerger } from "./merge.js";
import { entriesOfChunks, streamName } from "./chunks.js";
import { logTarget, revisionsOf } from "./target.js";
import { readHistory } from "./history-read.js";
import { DAY_MS, logRetention, setLogRetention } from "./history.js";
import { findWorkspace } from "../domain/tenancy.js";
import { workspaceRef } from "../validate/api.js";
import { grepOf } from "./grep.js";
import { sourceKey, type InstanceCursors } from "./seam.js";
import { EnvironmentSecrets } from "./secrets.js";
import type { Keyring } from "../secrets/keyring.js";

export interface LogServiceOptions {
  /** A region whose agents say nothing for this long is given up (ms; default 10 s). */
  readonly answerTimeoutMs?: number;
  /** Following, how long a line waits for earlier lines of other instances (ms; default 100). */
  readonly holdMs?: number;
  /**
   * Following, a line written since the call started that is already this old when it reaches
   * ctrl is not held (ms; default 250): it is late for every reader, and holding adds to it.
   */
  readonly maxAgeMs?: number;
  /** Entries a call holds at most before it drops (default 50,000). */
  readonly capacity?: number;
  /** The channel's keepalive to agents (ms; default 5 s). */
  readonly keepaliveMs?: number;
}

export interface LogServiceDeps extends LogServiceOptions {
  readonly store: Store;
  readonly hub: LogHub;
  /** Opens the secret values masked in every line sent (absent: no secrets can be set). */
  readonly keyring?: Keyring;
  /** Aborted when ctrl drains: open streams end (readers resume elsewhere). */
  readonly stop: AbortSignal;
}

const BATCH = 1_000;

interface ClusterState {
  /** Answered at least once. */
  answered: boolean;
  /** Finished its part (its last push, or given up). */
  done: boolean;
  /** When it last pushed, or was asked. */
  lastHeard: number;
  /** Told the reader it did not answer (once). */
  warned: boolean;
}

interface RegionState {
  readonly region: string;
  /** The requests out for the region (several while its agent has not answered: each re-ask). */
  readonly asks: Map<string, () => void>;
  askedAt: number;
  answered: boolean;
  /** Told the reader that no agent answered (once). */
  warned: boolean;
  /** The clusters asked (by id) or that answered. */
  readonly clusters: Map<string, ClusterState>;
  ended: boolean;
}

function cancelAll(st: RegionState): void {
  for (const cancel of st.asks.values()) cancel();
  st.asks.clear();
}

interface Held {
  readonly ns: bigint;
  readonly source: string;
  readonly entry: LogEntry;
}

function marker(region: string, kind: LogMarkerKind, message: string): LogEntry {
  return create(LogEntrySchema, {
    timeUnixNano: msToNs(Date.now()),
    region,
    entry: { case: "marker", value: { kind, message, dropped: 0n } },
  });
}

export function logServiceImpl(d: LogServiceDeps): ServiceImpl<typeof LogService> {
  const answerTimeoutMs = d.answerTimeoutMs ?? 10_000;
  const capacity = d.capacity ?? 50_000;
  const names = new Map<string, string>();
  /** A cluster's name for a marker (its id when unknown). */
  const clusterName = async (id: string): Promise<string> => {
    let name = names.get(id);
    if (name === undefined) {
      const row = await d.store.db.selectFrom("clusters").select("name").where("id", "=", id).executeTakeFirst();
      name = row?.name ?? id;
      names.set(id, name);
    }
    return name;
  };
  const retention = async (workspaceId: string) => {
    const r = await logRetention(d.store.db, workspaceId);
    return { days: Math.round(r.ms / DAY_MS), own: r.own };
  };
  return {
    async getLogRetention(req) {
      const ws = await findWorkspace(d.store.db, workspaceRef("workspace", req.workspace));
      return { retention: await retention(ws.id) };
    },
    async setLogRetention(req) {
      const ws = await findWorkspace(d.store.db, workspaceRef("workspace", req.workspace));
      const days = validateLogRetentionDays(req.days);
      await d.store.write(async (tx) => {
        await setLogRetention(tx.trx, ws.id, days === undefined ? undefined : days * DAY_MS, d.store.clock());
      });
      return { retention: await retention(ws.id) };
    },
    streamLogs(req, ctx): AsyncGenerator<StreamLogsResponse> {
      return stream(validateLogQuery(req, Date.now()), ctx, false);
    },
    streamRequests(req, ctx): AsyncGenerator<StreamLogsResponse> {
      const q = validateLogQuery(
        { ...req, follow: true, sinceUnixMs: 0n, revision: 0n, instance: "", previous: false },
        Date.now(),
      );
      return stream(q, ctx, true);
    },
  };
  /** A StreamLogs call, or (`requests`) a StreamRequests call: the same asking, merging and ending. */
  async function* stream(q: LogQuery, ctx: HandlerContext, requests: boolean): AsyncGenerator<StreamLogsResponse> {
    const target = await logTarget(d.store.db, q);
    // A regex runs on a worker of its own, ended with the call (grep.ts).
    const grep = q.grep ? grepOf(q.grep) : undefined;
    // Every line sent is masked before --grep sees it, kept or live (secrets.ts).
    const secrets = new EnvironmentSecrets(d.store.db, d.keyring, target.environmentId);
    try {
      /** With history: each instance's last kept line when the call began (the seam). */
      let seam: InstanceCursors | undefined;
      let liveSinceMs = q.since ?? 0;
      if (q.history) {
        const h = await readHistory(d.store.db, target, q, grep, secrets);
        seam = h.seam;
        liveSinceMs = Number(h.liveSinceNs / 1_000_000n);
        for await (const page of h.pages)
          for (let i = 0; i < page.length; i += BATCH)
            yield create(StreamLogsResponseSchema, { entries: page.slice(i, i + BATCH) });
        if (target.instanceGone) return;
      }
      const merger = new LogMerger<Held>({
        holdMs: d.holdMs ?? 100,
        maxAgeMs: d.maxAgeMs ?? 250,
        liveFromMs: Date.now(),
        capacity,
      });
      const sinceNs = msToNs(q.since ?? 0);
      let wake: (() => void) | undefined;
      const regions: RegionState[] = [];
      const late: LogEntry[] = [];
      /** Deployments the lines named that were not known when the call started (a rollout since). */
      const unknown = new Set<string>();
      const looked = new Set<string>();
      const signal = AbortSignal.any([ctx.signal, d.stop]);
      /**
       * The masking and --grep's matching of live lines, in arrival order, and its failure (a
       * regex past its deadline, secret values that could not be opened: nothing goes out unmasked).
       */
      let grepping: Promise<void> = Promise.resolve();
      let grepFailed: unknown;
      const hold = (held: Held[], now: number): void => {
        if (held.length === 0) return;
        grepping = grepping
          .then(async () => {
            const lines: { entry: LogEntry; text: string }[] = [];
            for (const h of held)
              if (h.entry.entry.case === "line") lines.push({ entry: h.entry, text: h.entry.entry.value });
            if (lines.length > 0) {
              await secrets.learn(lines.map((l) => l.entry.deploymentId));
              for (const l of lines) {
                l.text = secrets.mask(l.text);
                l.entry.entry = { case: "line", value: l.text };
              }
            }
            const keep = grep && lines.length > 0 ? await grep.keep(lines.map((l) => l.text)) : undefined;
            let i = 0;
            for (const h of held) if (h.entry.entry.case !== "line" || !keep || keep[i++]) merger.add(h, now);
          })
          .catch((err: unknown) => {
            grepFailed ??= err;
          })
          .finally(() => wake?.());
      };
      try {
        const ask = (st: RegionState): void => {
          const agentReq = create(AgentLogRequestSchema, {
            requestId: `log_${randomBytes(12).toString("hex")}`,
            k8sNamespace: target.namespace,
            environmentId: target.environmentId,
            deploymentIds: target.deploymentIds,
            instance: q.instance ?? "",
            follow: q.follow,
            sinceUnixMs: BigInt(liveSinceMs),
            tailLines: q.tail,
            previous: q.previous,
            chunks: true,
            requests,
          });
          st.askedAt = Date.now();
          const id = agentReq.requestId;
          const onAsked = (clusterIds: readonly string[]): void => {
            if (st.ended) return;
            const now = Date.now();
            for (const c of clusterIds)
              if (!st.clusters.has(c))
                st.clusters.set(c, { answered: false, done: false, lastHeard: now, warned: false });
          };
          const onPush = (clusterId: string, push: PushLogsRequest): void => {
            if (st.ended) return;
            if (!st.answered)
              // The first request the agent answers is the one: an agent slow to start may answer
              // an earlier ask after a later one went out.
              for (const [other, cancel] of st.asks)
                if (other !== id) {
                  cancel();
                  st.asks.delete(other);
                }
            const now = Date.now();
            st.answered = true;
            const c = st.clusters.get(clusterId);
            if (c) {
              c.answered = true;
              c.lastHeard = now;
              c.done ||= push.done;
            } else st.clusters.set(clusterId, { answered: true, done: push.done, lastHeard: now, warned: false });
            const held: Held[] = [];
            for (const e of push.entries) {
              // The API server reads from whole seconds: earlier lines of that second go here.
              if (e.entry.case === "line" && e.timeUnixNano < sinceNs) continue;
              // --stream: only lines known to be of it.
              if (e.entry.case === "line" && q.stream !== undefined && streamName(e.stream) !== q.stream) continue;
              // With history: kept lines were sent already; --grep: only the lines it matches.
              if (
                e.entry.case === "line" &&
                seam &&
                !seam.isNew(sourceKey(st.region, e.instance), e.timeUnixNano, streamName(e.stream))
              )
                continue;
              // What the agent says of region and revision is not taken: ctrl knows them.
              e.region = st.region;
              e.revision = BigInt(target.revisions.get(e.deploymentId) ?? 0);
              if (e.revision === 0n && e.deploymentId !== "") unknown.add(e.deploymentId);
              held.push({ ns: e.timeUnixNano, source: `${st.region}/${e.instance}`, entry: e });
            }
            hold(held, now);
            if (push.error !== "")
              late.push(
                marker(
                  st.region,
                  LogMarkerKind.ERROR,
                  `region ${st.region}: the agent could not read logs: ${push.error}`,
                ),
              );
            if ([...st.clusters.values()].every((x) => x.done)) st.ended = true;
            wake?.();
          };
          st.asks.set(id, d.hub.request(st.region, agentReq, onPush, onAsked));
        };
        for (const region of target.regions) {
          const st: RegionState = {
            region,
            asks: new Map(),
            askedAt: 0,
            answered: false,
            clusters: new Map(),
            ended: false,
            warned: false,
          };
          regions.push(st);
          ask(st);
        }
        if (regions.length === 0) return;
        let nextWait = 0;
        for (;;) {
          if (nextWait > 0) {
            await new Promise<void>((resolve) => {
              const done = (): void => {
                clearTimeout(t);
                signal.removeEventListener("abort", done);
                wake = undefined;
                resolve();
              };
              const t = setTimeout(done, nextWait);
              signal.addEventListener("abort", done, { once: true });
              wake = done;
            });
          }
          if (ctx.signal.aborted) return;
          if (d.stop.aborted) throw new ConnectError("ctrl is shutting down; resume elsewhere", Code.Unavailable);
          if (grepFailed !== undefined) throw grepFailed;
          const now = Date.now();
          const within = `${Math.round(answerTimeoutMs / 1000)} s`;
          for (const st of regions) {
            if (st.ended) continue;
            for (const [id, c] of st.clusters) {
              if (c.done || now - c.lastHeard <= answerTimeoutMs) continue;
              const name = await clusterName(id);
              if (q.follow) {
                if (c.answered)
                  throw new ConnectError(
                    `the agent of cluster ${name} in region ${st.region} stopped answering (restarted or disconnected); resume from the last line`,
                    Code.Unavailable,
                  );
                if (!c.warned)
                  late.push(
                    marker(
                      st.region,
                      LogMarkerKind.ERROR,
                      `region ${st.region}: cluster ${name} did not answer within ${within} (see krane region clusters); its lines are missing until it does`,
                    ),
                  );
                c.warned = true;
                continue;
              }
              c.done = true;
              late.push(
                marker(
                  st.region,
                  LogMarkerKind.ERROR,
                  c.answered
                    ? `region ${st.region}: cluster ${name} stopped answering; lines may be missing`
                    : `region ${st.region}: cluster ${name} did not answer within ${within}; its lines are missing`,
                ),
              );
            }
            if (st.clusters.size > 0 && [...st.clusters.values()].every((c) => c.done)) {
              st.ended = true;
              cancelAll(st);
              continue;
            }
            if (!st.answered && st.clusters.size === 0 && now - st.askedAt > answerTimeoutMs) {
              if (!st.warned)
                late.push(
                  marker(
                    st.region,
                    LogMarkerKind.ERROR,
                    `region ${st.region}: no agent answered within ${within} (is the region's agent connected? see krane region clusters)${q.follow ? "; asking again" : ""}`,
                  ),
                );
              st.warned = true;
              // Following, the region is asked again until its agent answers (it may be reconnecting).
              if (q.follow) ask(st);
              else {
                st.ended = true;
                cancelAll(st);
              }
            }
          }
          if (unknown.size > 0) {
            const ids = [...unknown].filter((id) => !looked.has(id));
            unknown.clear();
            for (const id of ids) looked.add(id);
            for (const [id, revision] of await revisionsOf(d.store.db, target.environmentId, ids))
              target.revisions.set(id, revision);
          }
          const allEnded = regions.every((r) => r.ended);
          // Ended: the lines still being matched are part of what it sends.
          if (allEnded) {
            await grepping;
            if (grepFailed !== undefined) throw grepFailed;
          }
          let out: LogEntry[] = late.splice(0);
          for (const drop of merger.drops())
            out.push(
              create(LogEntrySchema, {
                timeUnixNano: drop.first.entry.timeUnixNano,
                region: drop.first.entry.region,
                instance: drop.first.entry.instance,
                revision: drop.first.entry.revision,
                deploymentId: drop.first.entry.deploymentId,
                entry: {
                  case: "marker",
                  value: {
                    kind: LogMarkerKind.DROPPED,
                    dropped: BigInt(drop.n),
                    message: "the reader did not keep up",
                  },
                },
              }),
            );
          if (q.follow) out = out.concat(merger.take(now).map((h) => h.entry));
          else if (allEnded) out = out.concat(merger.take(now, true).map((h) => h.entry));
          else if (merger.size >= capacity * 0.8)
            out = out.concat(merger.takeOldest(Math.floor(capacity / 2)).map((h) => h.entry));
          for (const e of out)
            if (e.revision === 0n && e.deploymentId !== "")
              e.revision = BigInt(target.revisions.get(e.deploymentId) ?? 0);
          for (let i = 0; i < out.length; i += BATCH)
            yield create(StreamLogsResponseSchema, { entries: out.slice(i, i + BATCH) });
          // Following, regions whose agents finished (nothing to follow there) keep the stream open.
          if (allEnded && merger.size === 0 && !q.follow) return;
          const due = merger.nextDue();
          nextWait = q.follow ? Math.max(10, Math.min(due === undefined ? 250 : due - Date.now(), 250)) : 100;
        }
      } finally {
        for (const st of regions) cancelAll(st);
      }
    } finally {
      grep?.close();
    }
  }
}

export function logChannelServiceImpl(d: LogServiceDeps): ServiceImpl<typeof LogChannelService> {
  const keepaliveMs = d.keepaliveMs ?? 5_000;
  return {
    async *openLogChannel(req, ctx) {
      const region = agentRegion(ctx, req.region);
      const ch = d.hub.channel(region, agentPrincipal(ctx).clusterId);
      const signal = AbortSignal.any([ctx.signal, d.stop]);
      try {
        yield create(LogChannelMessageSchema, { message: { case: "keepaliveIntervalMs", value: keepaliveMs } });
        while (!signal.aborted && !ch.closed) {
          const m = await ch.next(keepaliveMs, signal);
          if (signal.aborted) return;
          yield m ?? create(LogChannelMessageSchema, { message: { case: "keepaliveIntervalMs", value: keepaliveMs } });
        }
      } finally {
        ch.close();
      }
    },
    async pushLogs(req, ctx) {
      const region = agentRegion(ctx, req.region);
      const { clusterId } = agentPrincipal(ctx);
      if (req.chunks.length > 0) {
        const lines = entriesOfChunks(req.chunks);
        req.entries = req.entries.length === 0 ? lines : req.entries.concat(lines);
        req.chunks = [];
      }
      return { cancelled: !d.hub.push(region, clusterId, req) };
    },
  };
}
