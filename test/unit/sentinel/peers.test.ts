// The rate-limit exchange's pure parts (src/sentinel/peer-messages.ts): a signed message of the
// environment round-trips into the counts the limiter receives; a forged, altered, foreign,
// stale or malformed one is refused naming the field; messages stay within their bounds; the set
// of live peers follows messages and timeouts (a silent peer's share returns to the others); the
// peers' addresses come from the Service's EndpointSlices; the settings name a missing secret.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { parseAddressMapping } from "../../../src/contracts/address-map.js";
import { resolveSentinelSettings } from "../../../src/sentinel/config.js";
import {
  encodeMessage,
  MAX_ENTRIES,
  MAX_MESSAGE_BYTES,
  MAX_SKEW_MS,
  parseMessage,
  PEER_TIMEOUT_MS,
  PeerSet,
  peerTargets,
  sign,
  type PeerMessage,
} from "../../../src/sentinel/peer-messages.js";
import { RateLimiter } from "../../../src/sentinel/rate-limit.js";
import type { KubeObject } from "../../../src/kube/object.js";

const SECRET = "s".repeat(40);
const ENV = "env_a";
const NOW = 1_800_000_000_000;
const opts = { secret: SECRET, environmentId: ENV, now: NOW };

function message(over: Partial<PeerMessage> = {}): PeerMessage {
  const a = new RateLimiter(100, 60_000, "a");
  for (let i = 0; i < 7; i++) a.take("client-1", NOW);
  a.take("client-2", NOW);
  return { environmentId: ENV, from: "a", seq: 1, at: NOW, limiters: [{ id: "p:x", report: a.report(NOW) }], ...over };
}

function signed(body: string): [string, string] {
  return [body, sign(SECRET, body)];
}

function refused(body: string, signature: string | undefined, o = opts): string {
  const r = parseMessage(body, signature, o);
  assert.ok("error" in r, `refused: ${body.slice(0, 80)}`);
  return r.error;
}

describe("messages", () => {
  it("a signed message round-trips, and the receiver counts what the sender admitted", () => {
    const [body, sig] = signed(encodeMessage(message()));
    const r = parseMessage(body, sig, opts);
    assert.ok("message" in r);
    assert.equal(r.message.from, "a");
    const l = r.message.limiters[0];
    assert.equal(l?.id, "p:x");
    assert.deepEqual(l?.report.keys.get("client-1"), { count: 7, demand: 7 });
    const b = new RateLimiter(10, 60_000, "b");
    b.receive("a", l?.report ?? { window: 0, keys: new Map() }, NOW);
    b.take("client-2", NOW);
    // a admitted 1 of client-2's 10: b sees 10 - 1 - 1 left.
    assert.equal(b.take("client-2", NOW).remaining, 7);
  });

  it("refuses a forged or altered message, one of another environment or secret, and a replay from far in time", () => {
    const body = encodeMessage(message());
    assert.match(refused(body, undefined), /x-krane-peer-signature/);
    assert.match(refused(body, "v1=" + "0".repeat(64)), /x-krane-peer-signature/);
    assert.match(refused(body, sign("another secret of enough length!!", body)), /x-krane-peer-signature/);
    const altered = body.replace('"client-1",7', '"client-1",0');
    assert.notEqual(altered, body);
    assert.match(refused(altered, sign(SECRET, body)), /x-krane-peer-signature/);
    assert.match(refused(...signed(encodeMessage(message({ environmentId: "env_b" })))), /^environmentId/);
    assert.match(refused(...signed(encodeMessage(message({ at: NOW - MAX_SKEW_MS - 1 })))), /^at /);
    assert.match(refused(...signed(encodeMessage(message({ at: NOW + MAX_SKEW_MS + 1 })))), /^at /);
  });

  it("names the field of a malformed message, signed or not", () => {
    const base = JSON.parse(encodeMessage(message())) as Record<string, unknown>;
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ ...base, v: 2 }, /^v /],
      [{ ...base, from: "" }, /^from /],
      [{ ...base, from: "x".repeat(300) }, /^from /],
      [{ ...base, seq: -1 }, /^seq /],
      [{ ...base, seq: 1.5 }, /^seq /],
      [{ ...base, limiters: {} }, /^limiters /],
      [{ ...base, limiters: [{ id: "", window: 1, keys: [] }] }, /^limiters\[0\]\.id/],
      [{ ...base, limiters: [{ id: "p", window: -1, keys: [] }] }, /^limiters\[0\]\.window/],
      [{ ...base, limiters: [{ id: "p", window: 1, keys: [["k", 1]] }] }, /^limiters\[0\]\.keys\[0\]/],
      [{ ...base, limiters: [{ id: "p", window: 1, keys: [["k", -1, 0]] }] }, /^limiters\[0\]\.keys\[0\]/],
      [{ ...base, limiters: [{ id: "p", window: 1, keys: [["k".repeat(300), 1, 1]] }] }, /^limiters\[0\]\.keys\[0\]/],
      [
        {
          ...base,
          limiters: [{ id: "p", window: 1, keys: Array.from({ length: MAX_ENTRIES + 1 }, (_, i) => [`${i}`, 1, 1]) }],
        },
        /keys in all/,
      ],
    ];
    for (const [m, re] of cases) assert.match(refused(...signed(JSON.stringify(m))), re);
    assert.match(refused(...signed("not json")), /not JSON/);
    assert.match(refused(...signed("[]")), /not an object/);
    const huge = "x".repeat(MAX_MESSAGE_BYTES + 1);
    assert.match(refused(huge, sign(SECRET, huge)), /bytes/);
  });

  it("keeps the keys of most demand when there are more than a message holds, and stays within its bytes", () => {
    const l = new RateLimiter(1_000_000, 60_000, "a", 200_000);
    for (let i = 0; i < MAX_ENTRIES + 500; i++) l.take(`client-${"x".repeat(100)}-${i}`, NOW);
    for (let i = 0; i < 3; i++) l.take("busy", NOW);
    const body = encodeMessage(message({ limiters: [{ id: "p:x", report: l.report(NOW) }] }));
    assert.ok(Buffer.byteLength(body) <= MAX_MESSAGE_BYTES);
    const r = parseMessage(body, sign(SECRET, body), opts);
    assert.ok("message" in r);
    const keys = r.message.limiters[0]?.report.keys;
    assert.equal(keys?.size, MAX_ENTRIES);
    assert.deepEqual(keys?.get("busy"), { count: 3, demand: 3 });
  });

  it("any message encoded from limiters is accepted as sent (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.string({ maxLength: 40 }), fc.nat(50), fc.nat(50)), { maxLength: 30 }),
        fc.nat(1_000_000),
        (entries, seq) => {
          const keys = new Map(entries.map(([k, c, d]) => [k, { count: c, demand: d }]));
          const m = message({ seq, limiters: [{ id: "p:y", report: { window: 3, keys } }] });
          const body = encodeMessage(m);
          const r = parseMessage(body, sign(SECRET, body), opts);
          assert.ok("message" in r);
          assert.equal(r.message.seq, seq);
          assert.deepEqual([...(r.message.limiters[0]?.report.keys ?? [])], [...keys]);
        },
      ),
    );
  });
});

describe("the set of peers", () => {
  it("takes newer messages only, and drops a peer silent for the timeout", () => {
    const p = new PeerSet();
    assert.equal(p.heard("b", 5, 0), true);
    assert.equal(p.heard("b", 5, 10), false, "a replay");
    assert.equal(p.heard("b", 4, 10), false, "an older one");
    assert.equal(p.heard("c", 1, 100), true);
    assert.deepEqual(p.live(100), ["b", "c"]);
    assert.deepEqual(p.live(PEER_TIMEOUT_MS + 1), ["c"], "b silent for the timeout");
    assert.deepEqual(p.live(PEER_TIMEOUT_MS + 101), []);
    // Still remembered for a while: a replay of b's old message changes nothing.
    assert.equal(p.heard("b", 5, PEER_TIMEOUT_MS + 200), false);
    assert.equal(p.heard("b", 6, PEER_TIMEOUT_MS + 200), true, "b back");
    assert.deepEqual(p.live(PEER_TIMEOUT_MS + 200), ["b"]);
  });

  it("a dead peer's share returns to the live ones after the timeout, its counts stay summed", () => {
    const a = new RateLimiter(100, 60_000, "a");
    const peers = new PeerSet();
    const b = new RateLimiter(100, 60_000, "b");
    for (let i = 0; i < 30; i++) b.take("k", 0);
    a.take("k", 0);
    a.receive("b", b.report(0), 10);
    peers.heard("b", 1, 10);
    a.rebalance(20, peers.live(20));
    // Shared by demand with b: a gets a small part of the 69 left.
    let before = 0;
    while (a.take("k", 30).admitted) before++;
    assert.ok(before < 69 / 2, `a admitted ${before} while b was live`);
    // b goes silent: after the timeout a may use everything left, never what b admitted.
    a.rebalance(20 + PEER_TIMEOUT_MS + 1, peers.live(20 + PEER_TIMEOUT_MS + 1));
    let after = 0;
    while (a.take("k", 30 + PEER_TIMEOUT_MS + 1).admitted) after++;
    assert.equal(1 + before + after + 30, 100);
  });
});

describe("peer addresses", () => {
  const slice = (addressType: string, ports: unknown[], ips: string[]): KubeObject => ({
    metadata: { name: "s" },
    addressType,
    ports,
    endpoints: ips.map((ip, i) => ({ addresses: [ip], conditions: { ready: i % 2 === 0 } })),
  });

  it("every endpoint of the Service's slices, ready or not, at the port named peers, mapped as routing is", () => {
    const map = parseAddressMapping("10.7.0.0/16=127.7.0.0/16");
    const slices = [
      slice(
        "IPv4",
        [
          { name: "http", port: 8040 },
          { name: "peers", port: 8042 },
        ],
        ["10.7.0.3", "10.7.0.2", "192.0.2.1"],
      ),
      slice("IPv4", [{ name: "peers", port: 8042 }], ["10.7.0.2"]),
      slice("IPv4", [{ name: "http", port: 8040 }], ["10.7.0.9"]),
      slice("IPv6", [{ name: "peers", port: 8042 }], ["fd00::1"]),
      slice("FQDN", [{ name: "peers", port: 8042 }], ["example.com"]),
      slice("IPv4", [{ name: "peers", port: 70_000 }], ["10.7.0.5"]),
    ];
    assert.deepEqual(peerTargets(slices, "peers", map), [
      "127.7.0.2:8042",
      "127.7.0.3:8042",
      "192.0.2.1:8042",
      "[fd00::1]:8042",
    ]);
    assert.deepEqual(peerTargets([], "peers", map), []);
  });
});

describe("settings", () => {
  const env = { KRANE_ENVIRONMENT_ID: "e", KRANE_REGION: "r" };
  it("the exchange is off without a Service, and with one a secret (if any) of at least 32 characters and its own port", () => {
    const off = resolveSentinelSettings({}, env).settings;
    assert.equal(off?.peerService, undefined);
    assert.equal(off?.peerPort, 8043);
    const on = resolveSentinelSettings(
      {},
      { ...env, KRANE_SENTINEL_PEER_SERVICE: "shop-prod", KRANE_SENTINEL_PEER_SECRET: SECRET },
    ).settings;
    assert.equal(on?.peerService, "shop-prod");
    assert.equal(on?.peerSecret, SECRET);
    const noSecret = resolveSentinelSettings({}, { ...env, KRANE_SENTINEL_PEER_SERVICE: "shop-prod" }).settings;
    assert.deepEqual([noSecret?.peerService, noSecret?.peerSecret], ["shop-prod", undefined], "runs alone, warned");
    const bad = resolveSentinelSettings(
      { peerService: "Shop_Prod", peerPort: "8041" },
      { ...env, KRANE_SENTINEL_PEER_SECRET: "short" },
    );
    assert.equal(bad.settings, undefined);
    for (const field of ["peerService", "peerSecret", "peerPort"])
      assert.ok(
        bad.problems.some((p) => p.startsWith(field)),
        `${field} in ${bad.problems.join(" | ")}`,
      );
  });
});
