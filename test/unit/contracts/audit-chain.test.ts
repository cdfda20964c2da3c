// The audit log's hash chain (src/contracts/audit.ts): an intact chain verifies, and any one
// edit, deletion, swap or insertion is found and names the event — property-tested over random
// chains and tamperings; retention's anchor; the NDJSON form round-trips to the same hash.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  auditHash,
  auditRecordFromJson,
  auditRecordToJson,
  ChainVerifier,
  GENESIS_HASH,
  type AuditRecord,
  type ChainHead,
} from "../../../src/contracts/audit.js";

function chain(n: number, ws = "ws_a", from = 1, prev = GENESIS_HASH): AuditRecord[] {
  const out: AuditRecord[] = [];
  for (let i = 0; i < n; i++) {
    const seq = from + i;
    const r: Omit<AuditRecord, "hash"> = {
      id: `aud_${String(seq).padStart(20, "0")}`,
      workspaceId: ws,
      seq,
      at: 1_700_000_000_000 + seq,
      actorKind: "user",
      actorId: "tok_x",
      actorName: "admin",
      method: "ProjectService/CreateProject",
      targets: [ws, `prj_${seq}`],
      requestId: `req_${seq}`,
      clientIp: "127.0.0.1",
      userAgent: "t",
      idempotencyKey: "",
      code: "ok",
      message: "",
      changes: [{ field: "project.slug", op: "added", after: `p${seq}` }],
      prevHash: prev,
    };
    const h = auditHash(r);
    out.push({ ...r, hash: h });
    prev = h;
  }
  return out;
}

function headOf(events: AuditRecord[], ws = "ws_a"): ChainHead {
  const last = events[events.length - 1];
  return {
    workspaceId: ws,
    seq: last?.seq ?? 0,
    hash: last?.hash ?? GENESIS_HASH,
    prunedThroughSeq: 0,
    prunedThroughHash: GENESIS_HASH,
  };
}

function verify(events: AuditRecord[], head: ChainHead): string[] {
  const v = new ChainVerifier(head);
  for (const e of events) v.add(e);
  return v.finish().map((p) => p.problem);
}

describe("audit hash chain", () => {
  it("an intact chain verifies, empty or not", () => {
    assert.deepEqual(verify([], headOf([])), []);
    const c = chain(50);
    assert.deepEqual(verify(c, headOf(c)), []);
  });

  it("finds any one edit, deletion, swap or insertion, and names the event", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 40 }),
        fc.nat(),
        fc.nat(),
        fc.constantFrom("edit", "delete", "swap", "insert", "renumber"),
        (n, a, b, how) => {
          const c = chain(n);
          const head = headOf(c);
          const i = a % n;
          const tampered = c.map((e) => ({ ...e }));
          let names: string;
          switch (how) {
            case "edit": {
              const e = tampered[i] as AuditRecord;
              e.actorName = `${e.actorName}!`;
              names = `${e.id} (#${e.seq})`;
              break;
            }
            case "delete": {
              const [gone] = tampered.splice(i, 1);
              names = `#${gone?.seq}`;
              break;
            }
            case "swap": {
              const j = (i + 1 + (b % (n - 1))) % n;
              const [x, y] = [tampered[i] as AuditRecord, tampered[j] as AuditRecord];
              tampered[i] = y;
              tampered[j] = x;
              names = `${tampered[Math.min(i, j)]?.id}`;
              break;
            }
            case "insert": {
              const forged = { ...(c[i] as AuditRecord), id: "aud_forged", message: "nothing to see" };
              forged.hash = auditHash(forged);
              tampered.splice(i + 1, 0, forged);
              names = "aud_forged";
              break;
            }
            case "renumber": {
              const e = tampered[i] as AuditRecord;
              e.seq += 1000;
              names = e.id;
              break;
            }
          }
          const problems = verify(tampered, head);
          assert.ok(problems.length > 0, `${how} at ${i} of ${n} went unnoticed`);
          assert.ok(
            problems.some((p) => p.includes(names)),
            `${how} at ${i}: ${problems.join(" | ")} should name ${names}`,
          );
        },
      ),
      { numRuns: 300 },
    );
  });

  it("names missing events at the end against the head, and a replaced newest event", () => {
    const c = chain(10);
    const head = headOf(c);
    assert.match(verify(c.slice(0, 7), head).join(), /events #8–#10 are missing at the end/);
    const replaced = [...c.slice(0, 9), { ...(c[9] as AuditRecord), message: "x" }];
    (replaced[9] as AuditRecord).hash = auditHash(replaced[9] as AuditRecord);
    assert.match(verify(replaced, head).join(), /aud_0+10 \(#10\) is not the event the chain's head names/);
  });

  it("starts after retention's anchor, and finds the anchor broken", () => {
    const all = chain(20);
    const kept = all.slice(12);
    const anchor = all[11] as AuditRecord;
    const head = { ...headOf(all), prunedThroughSeq: 12, prunedThroughHash: anchor.hash };
    assert.deepEqual(verify(kept, head), []);
    assert.match(verify(kept.slice(1), head).join(), /events #13–#13 are missing before/);
    assert.match(
      verify(kept, { ...head, prunedThroughHash: GENESIS_HASH }).join(),
      /does not link to the start of the chain/,
    );
  });

  it("an event as an NDJSON line hashes the same after a round trip", () => {
    fc.assert(
      fc.property(
        fc.string(),
        fc.string(),
        fc.jsonValue(),
        // A user token's scope (the installation's or a workspace's), or none (another actor).
        fc.option(fc.oneof(fc.constant("installation"), fc.string({ minLength: 1 })), { nil: undefined }),
        // A workspace token's owner, or none.
        fc.option(fc.string({ minLength: 1 }), { nil: undefined }),
        (msg, ua, value, scope, owner) => {
          const [e] = chain(1);
          assert.ok(e);
          const { hash: _, ...unhashed } = e;
          const r: Omit<AuditRecord, "hash"> = {
            ...unhashed,
            message: msg,
            userAgent: ua,
            changes: [{ field: "x", op: "set" as const, before: null, after: value as never }],
            ...(scope === undefined ? {} : { actorScope: scope }),
            ...(owner === undefined ? {} : { actorOwner: owner }),
          };
          // Hashed as ctrl does, from the values in memory; checked from the line a client reads.
          const hashed = { ...r, hash: auditHash(r) };
          const back = auditRecordFromJson(JSON.parse(JSON.stringify(auditRecordToJson(hashed))));
          assert.equal(auditHash(back), hashed.hash);
          // Every field comes back, so nothing the hash covers is left out of the line. JSON has no
          // negative zero (-0 is written 0, and hashes as 0 above): compared as a line carries it.
          const written = JSON.parse(JSON.stringify(value)) as unknown;
          assert.deepEqual(back, { ...hashed, changes: [{ ...hashed.changes[0], after: written }] });
        },
      ),
    );
  });

  it("an NDJSON line with its scope removed or changed no longer matches its hash", () => {
    const [e] = chain(1);
    assert.ok(e);
    const { hash: _, ...unhashed } = e;
    const r = { ...unhashed, actorScope: "installation" };
    const line = auditRecordToJson({ ...r, hash: auditHash(r) });
    assert.deepEqual(line.actor, { kind: "user", id: "tok_x", name: "admin", scope: "installation" });
    const read = (actor: Record<string, string>): AuditRecord => auditRecordFromJson({ ...line, actor });
    assert.equal(auditHash(read({ kind: "user", id: "tok_x", name: "admin", scope: "installation" })), line.hash);
    assert.notEqual(auditHash(read({ kind: "user", id: "tok_x", name: "admin" })), line.hash);
    assert.notEqual(auditHash(read({ kind: "user", id: "tok_x", name: "admin", scope: "ws_other" })), line.hash);
    assert.throws(
      () => auditRecordFromJson({ ...line, actor: { ...(line.actor as object), scope: 1 } }),
      /actor\.scope/,
    );
  });

  it("a workspace token's owner is in the line and in what the hash covers", () => {
    const [e] = chain(1);
    assert.ok(e);
    const { hash: _, ...unhashed } = e;
    const r = { ...unhashed, actorScope: "ws_1", actorOwner: "service account ci" };
    const line = auditRecordToJson({ ...r, hash: auditHash(r) });
    assert.deepEqual(line.actor, {
      kind: "user",
      id: "tok_x",
      name: "admin",
      scope: "ws_1",
      owner: "service account ci",
    });
    const read = (actor: Record<string, string>): AuditRecord => auditRecordFromJson({ ...line, actor });
    assert.equal(auditHash(read(line.actor as Record<string, string>)), line.hash);
    // Dropped or changed, the event no longer verifies.
    assert.notEqual(auditHash(read({ kind: "user", id: "tok_x", name: "admin", scope: "ws_1" })), line.hash);
    assert.notEqual(
      auditHash(read({ kind: "user", id: "tok_x", name: "admin", scope: "ws_1", owner: "service account root" })),
      line.hash,
    );
    // And an event without one hashes as it did before owners existed.
    const { actorOwner: _o, ...older } = r;
    assert.equal(auditHash(older), auditHash({ ...unhashed, actorScope: "ws_1" }));
  });
});
