// The rate-limit exchange between an environment's sentinel replicas, pure: the message a replica
// sends its peers every sync period (its counts and demand per limiter, ./rate-limit.ts), signed
// with HMAC-SHA256 under the environment's peer secret so neither a tenant's app nor an outside
// client can inject counts; its validation (every field checked, sizes bounded); the set of peers
// heard recently (a peer silent for PEER_TIMEOUT_MS gets no share any more); and the peers'
// addresses read from the EndpointSlices of the sentinel's own Service. The I/O is ./peers.ts.
import { createHmac, timingSafeEqual } from "node:crypto";
import { mapAddress, type AddressMapping } from "../contracts/address-map.js";
import { isRecord, type KubeObject } from "../kube/object.js";
import type { LimitReport } from "./rate-limit.js";

/** How often a replica reports and rebalances (the bound of the scheme is what replicas admit in one). */
export const SYNC_MS = 250;
/** A peer not heard for this long is left out of the split (its counts stay summed until the window ends). */
export const PEER_TIMEOUT_MS = 3 * SYNC_MS;
/** A message older or newer than this (by its sender's clock) is refused: replays stay short-lived. */
export const MAX_SKEW_MS = 5_000;
/** Bounds of one message: its bytes, its limiters, its (limiter, key) entries, a key's and an id's length. */
export const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;
export const MAX_LIMITERS = 256;
export const MAX_ENTRIES = 20_000;
export const MAX_KEY_LENGTH = 256;
export const MAX_ID_LENGTH = 256;
/** The request header carrying the signature: `v1=<hex HMAC-SHA256 of the body>`. */
export const SIGNATURE_HEADER = "x-krane-peer-signature";
export const PEER_PATH = "/v1/limits";

export interface PeerLimiterReport {
  readonly id: string;
  readonly report: LimitReport;
}

export interface PeerMessage {
  readonly environmentId: string;
  /** The sender: one id per sentinel process (a restarted process is a new peer). */
  readonly from: string;
  /** Grows by one per message of this sender; an older or repeated one is dropped. */
  readonly seq: number;
  /** The sender's clock (ms since the epoch) when it was sent. */
  readonly at: number;
  readonly limiters: readonly PeerLimiterReport[];
}

/**
 * The message as sent: at most MAX_ENTRIES (limiter, key) entries, those of most demand first when
 * there are more (a key left out is one its peers do not see counted this period).
 */
export function encodeMessage(m: PeerMessage): string {
  const all: { li: number; key: string; count: number; demand: number }[] = [];
  m.limiters.forEach((l, li) => {
    for (const [key, v] of l.report.keys) all.push({ li, key, count: v.count, demand: v.demand });
  });
  const kept = all.length <= MAX_ENTRIES ? all : [...all].sort((a, b) => b.demand - a.demand).slice(0, MAX_ENTRIES);
  const keys = m.limiters.map((): [string, number, number][] => []);
  for (const e of kept) keys[e.li]?.push([e.key, e.count, e.demand]);
  return JSON.stringify({
    v: 1,
    environmentId: m.environmentId,
    from: m.from,
    seq: m.seq,
    at: m.at,
    limiters: m.limiters.map((l, i) => ({ id: l.id, window: l.report.window, keys: keys[i] ?? [] })),
  });
}

export function sign(secret: string, body: string): string {
  return `v1=${createHmac("sha256", secret).update(body).digest("hex")}`;
}

/** Whether `signature` is `body`'s under `secret` (constant time). */
export function verifySignature(secret: string, body: string, signature: string | undefined): boolean {
  if (signature === undefined) return false;
  const want = Buffer.from(sign(secret, body));
  const got = Buffer.from(signature);
  return got.length === want.length && timingSafeEqual(got, want);
}

const count = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const text = (v: unknown, max: number): v is string => typeof v === "string" && v.length > 0 && v.length <= max;

/**
 * A signed message of this environment, checked field by field: the message, or the first
 * problem found, naming the field.
 */
export function parseMessage(
  body: string,
  signature: string | undefined,
  o: { secret: string; environmentId: string; now: number },
): { message: PeerMessage } | { error: string } {
  if (Buffer.byteLength(body) > MAX_MESSAGE_BYTES) return { error: `the message is over ${MAX_MESSAGE_BYTES} bytes` };
  if (!verifySignature(o.secret, body, signature)) return { error: `${SIGNATURE_HEADER} is missing or wrong` };
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch {
    return { error: "the message is not JSON" };
  }
  if (!isRecord(raw)) return { error: "the message is not an object" };
  if (raw.v !== 1) return { error: "v must be 1" };
  if (raw.environmentId !== o.environmentId) return { error: "environmentId is not this sentinel's environment" };
  if (!text(raw.from, MAX_ID_LENGTH)) return { error: `from must be a string of 1–${MAX_ID_LENGTH} characters` };
  if (!count(raw.seq)) return { error: "seq must be a non-negative integer" };
  if (!count(raw.at)) return { error: "at must be a non-negative integer" };
  if (Math.abs(raw.at - o.now) > MAX_SKEW_MS) return { error: `at is more than ${MAX_SKEW_MS} ms from this clock` };
  if (!Array.isArray(raw.limiters) || raw.limiters.length > MAX_LIMITERS)
    return { error: `limiters must be a list of at most ${MAX_LIMITERS}` };
  const limiters: PeerLimiterReport[] = [];
  let entries = 0;
  for (const [i, l] of raw.limiters.entries()) {
    const at = `limiters[${i}]`;
    if (!isRecord(l)) return { error: `${at} is not an object` };
    if (!text(l.id, MAX_ID_LENGTH)) return { error: `${at}.id must be a string of 1–${MAX_ID_LENGTH} characters` };
    if (!count(l.window)) return { error: `${at}.window must be a non-negative integer` };
    if (!Array.isArray(l.keys)) return { error: `${at}.keys must be a list` };
    entries += l.keys.length;
    if (entries > MAX_ENTRIES) return { error: `more than ${MAX_ENTRIES} keys in all` };
    const keys = new Map<string, { count: number; demand: number }>();
    for (const [j, e] of l.keys.entries()) {
      if (!Array.isArray(e) || e.length !== 3 || typeof e[0] !== "string" || e[0].length > MAX_KEY_LENGTH)
        return { error: `${at}.keys[${j}] must be [key (at most ${MAX_KEY_LENGTH} characters), count, demand]` };
      const [key, c, d] = e as [string, unknown, unknown];
      if (!count(c) || !count(d)) return { error: `${at}.keys[${j}]: count and demand must be non-negative integers` };
      keys.set(key, { count: c, demand: d });
    }
    limiters.push({ id: l.id, report: { window: l.window, keys } });
  }
  return { message: { environmentId: o.environmentId, from: raw.from, seq: raw.seq, at: raw.at, limiters } };
}

/** The peers heard from: by id, the last sequence number and when (this clock) it arrived. */
export class PeerSet {
  readonly #heard = new Map<string, { seq: number; at: number }>();

  /** Records a valid message; false (nothing recorded) for one not newer than the last of its sender. */
  heard(from: string, seq: number, now: number): boolean {
    const prev = this.#heard.get(from);
    if (prev && seq <= prev.seq) return false;
    this.#heard.set(from, { seq, at: now });
    return true;
  }

  /** Peers heard within PEER_TIMEOUT_MS; those silent for longer are forgotten. */
  live(now: number): string[] {
    const out: string[] = [];
    for (const [id, h] of this.#heard) {
      if (now - h.at <= PEER_TIMEOUT_MS) out.push(id);
      // Kept a while past the timeout so a replayed old message of a silent peer stays refused.
      else if (now - h.at > MAX_SKEW_MS + PEER_TIMEOUT_MS) this.#heard.delete(id);
    }
    return out.sort();
  }
}

/**
 * Where to send: `host:port` of every endpoint on the Service's EndpointSlices (starting,
 * ready or terminating alike: each may admit requests), at the slices' port named `portName`,
 * addresses mapped as the routing table's are (the local cluster). Sorted, without repeats.
 */
export function peerTargets(slices: readonly KubeObject[], portName: string, map?: AddressMapping): string[] {
  const out = new Set<string>();
  for (const s of slices) {
    const ports = Array.isArray(s.ports) ? s.ports.filter(isRecord) : [];
    const port = ports.find((p) => p.name === portName)?.port;
    if (typeof port !== "number" || !Number.isInteger(port) || port <= 0 || port > 65_535) continue;
    if (s.addressType !== "IPv4" && s.addressType !== "IPv6") continue;
    for (const e of Array.isArray(s.endpoints) ? s.endpoints.filter(isRecord) : []) {
      const addresses = Array.isArray(e.addresses) ? e.addresses : [];
      const a = addresses[0];
      if (typeof a !== "string" || a === "") continue;
      out.add(s.addressType === "IPv6" ? `[${a}]:${port}` : `${mapAddress(a, map)}:${port}`);
    }
  }
  return [...out].sort();
}
