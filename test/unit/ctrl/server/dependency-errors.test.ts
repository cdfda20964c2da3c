// Classification of database failures at ctrl's edge (dependency-errors.ts, errors.ts) and the
// once-per-transition outage log (outage.ts). Real errors where they are cheap to provoke: a
// refused TCP connection through node-postgres, a locked SQLite file through better-sqlite3.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import pg from "pg";
import SQLite from "better-sqlite3";
import { pino } from "pino";
import { Code, ConnectError } from "@connectrpc/connect";
import { classifyDependencyError, dependencyMessage } from "../../../../src/ctrl/server/dependency-errors.js";
import { toConnectError, type ErrorSinks } from "../../../../src/ctrl/server/errors.js";
import { OutageWatch } from "../../../../src/ctrl/server/outage.js";
import { DomainError } from "../../../../src/ctrl/errors.js";
import { NO_WRITE_SLOT, WRITE_WAIT_MS } from "../../../../src/ctrl/db/store.js";

function coded(code: string, message = "x"): Error {
  return Object.assign(new Error(message), { code });
}

async function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

test("a refused connection through node-postgres is the database being unavailable, and nothing was applied", async () => {
  const client = new pg.Client({ connectionString: `postgres://krane@127.0.0.1:${await closedPort()}/krane` });
  const err = await client.connect().then(
    () => undefined,
    (e: unknown) => e,
  );
  const f = classifyDependencyError(err);
  assert.deepEqual(f, { dependency: "database", code: Code.Unavailable, reason: "connection refused", applied: "no" });
});

test("a locked SQLite file is unavailable, not a bug", () => {
  const dir = mkdtempSync(join(tmpdir(), "krane-sqlite-"));
  try {
    const holder = new SQLite(join(dir, "db"));
    holder.exec("CREATE TABLE t (x INTEGER)");
    holder.exec("BEGIN EXCLUSIVE");
    const other = new SQLite(join(dir, "db"), { timeout: 0 });
    const err = (() => {
      try {
        other.exec("INSERT INTO t VALUES (1)");
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    holder.exec("ROLLBACK");
    holder.close();
    other.close();
    assert.deepEqual(classifyDependencyError(err), {
      dependency: "database",
      code: Code.Unavailable,
      reason: "the database file is locked",
      applied: "no",
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the table: SQLSTATEs, network codes, driver messages, wrapped and aggregated errors", () => {
  const cases: [unknown, Code | undefined, "no" | "unknown" | undefined][] = [
    [coded("57P01", "terminating connection due to administrator command"), Code.Unavailable, "unknown"],
    [coded("57P03", "the database system is starting up"), Code.Unavailable, "no"],
    [coded("08006"), Code.Unavailable, "unknown"],
    [coded("08001"), Code.Unavailable, "no"],
    [coded("40001"), Code.Unavailable, "no"],
    [coded("40P01"), Code.Unavailable, "no"],
    [coded("57014", "canceling statement due to statement timeout"), Code.Unavailable, "no"],
    [coded("55P03"), Code.Unavailable, "no"],
    [coded("53300", "sorry, too many clients already"), Code.ResourceExhausted, "no"],
    [coded("53100"), Code.ResourceExhausted, "no"],
    [coded("ECONNRESET"), Code.Unavailable, "unknown"],
    [coded("ETIMEDOUT"), Code.Unavailable, "unknown"],
    [coded("SQLITE_BUSY_SNAPSHOT"), Code.Unavailable, "no"],
    [coded("SQLITE_FULL"), Code.ResourceExhausted, "no"],
    [coded("SQLITE_IOERR_WRITE"), Code.Unavailable, "unknown"],
    [new Error("Connection terminated unexpectedly"), Code.Unavailable, "unknown"],
    [new Error("Connection terminated due to connection timeout"), Code.Unavailable, "no"],
    [new Error("timeout exceeded when trying to connect"), Code.ResourceExhausted, "no"],
    [new Error(`${NO_WRITE_SLOT} within ${WRITE_WAIT_MS} ms`), Code.ResourceExhausted, "no"],
    [
      Object.assign(new AggregateError([coded("ECONNREFUSED"), coded("ECONNREFUSED")], "connect failed")),
      Code.Unavailable,
      "no",
    ],
    [new Error("query failed", { cause: coded("57P01") }), Code.Unavailable, "unknown"],
    // Not outages: domain-level SQLSTATEs, SQLite corruption, plain bugs.
    [coded("23505", "duplicate key value violates unique constraint"), undefined, undefined],
    [coded("42P01", 'relation "x" does not exist'), undefined, undefined],
    [coded("SQLITE_CORRUPT"), undefined, undefined],
    [coded("SQLITE_CONSTRAINT_UNIQUE"), undefined, undefined],
    [new TypeError("Cannot read properties of undefined (reading 'id')"), undefined, undefined],
    ["a string", undefined, undefined],
    [null, undefined, undefined],
  ];
  for (const [err, code, applied] of cases) {
    const f = classifyDependencyError(err);
    assert.equal(
      f?.code,
      code,
      String(err instanceof Error ? `${(err as { code?: string }).code ?? ""} ${err.message}` : err),
    );
    assert.equal(f?.applied, applied);
  }
});

test("errors that name no outage are never classified as one (arbitrary codes and messages)", () => {
  const known =
    /^(08|57P0|57014|55P03|40001|40P01|25P03|53[123]00|58030)|^E(CONNREFUSED|HOSTUNREACH|NETUNREACH|NOTFOUND|AI_AGAIN|TIMEDOUT|CONNRESET|CONNABORTED|PIPE)$|^SQLITE_(BUSY|LOCKED|FULL|IOERR|CANTOPEN|READONLY)/;
  fc.assert(
    fc.property(fc.string(), fc.string(), (code, message) => {
      fc.pre(
        !known.test(code) &&
          !/Connection terminated|not queryable|timeout exceeded|Query read timeout|after calling end|not open|already been destroyed/.test(
            message,
          ),
      );
      assert.equal(classifyDependencyError(coded(code, message)), undefined);
    }),
  );
});

test("the answer names the database and what the caller may assume; secrets and addresses stay out", () => {
  const sinks: ErrorSinks & { deps: unknown[]; bugs: unknown[] } = {
    databaseKind: "PostgreSQL",
    deps: [],
    bugs: [],
    dependency(f) {
      this.deps.push(f);
    },
    unexpected(err) {
      this.bugs.push(err);
    },
  };
  const refused = Object.assign(new Error("connect ECONNREFUSED 10.1.2.3:5432"), {
    code: "ECONNREFUSED",
    address: "10.1.2.3",
    port: 5432,
  });
  const ce = toConnectError(refused, sinks);
  assert.equal(ce.code, Code.Unavailable);
  assert.match(
    ce.rawMessage,
    /^ctrl's database \(PostgreSQL\) is unavailable: connection refused; the request was not applied/,
  );
  assert.ok(!ce.rawMessage.includes("10.1.2.3"));
  const lost = toConnectError(coded("57P01"), sinks);
  assert.match(lost.rawMessage, /not applied unless it completed just before the failure/);
  assert.equal(toConnectError(coded("53300"), sinks).code, Code.ResourceExhausted);
  assert.match(
    dependencyMessage(
      { dependency: "database", code: Code.ResourceExhausted, reason: "disk full", applied: "no" },
      "SQLite",
    ),
    /SQLite\) is out of capacity: disk full/,
  );
  assert.equal(sinks.deps.length, 3);
  assert.equal(sinks.bugs.length, 0);
  // Domain errors and bugs keep their paths.
  assert.equal(toConnectError(new DomainError("not_found", "workspace x not found"), sinks).code, Code.NotFound);
  const bug = toConnectError(new TypeError("boom"), sinks);
  assert.equal(bug.code, Code.Internal);
  assert.equal(bug.rawMessage, "internal error");
  assert.equal(sinks.bugs.length, 1);
  const given = new ConnectError("already mapped", Code.Aborted);
  assert.equal(toConnectError(given, sinks), given);
});

test("an outage is logged once when it starts and once when it ends, however many calls fail", async () => {
  const lines: { msg: string; failures?: number; reason?: string }[] = [];
  const log = pino({ level: "info" }, { write: (s: string) => lines.push(JSON.parse(s) as { msg: string }) });
  let answers = false;
  let probes = 0;
  const watch = new OutageWatch({
    dependency: "database",
    intervalMs: 5,
    log,
    probe: async () => {
      probes++;
      if (!answers) throw new Error("still down");
    },
  });
  const f = {
    dependency: "database" as const,
    code: Code.Unavailable as const,
    reason: "connection refused",
    applied: "no" as const,
  };
  for (let i = 0; i < 100; i++) watch.failed(f);
  assert.equal(watch.down, true);
  const probing = Date.now() + 5000;
  while (probes < 3 && Date.now() < probing) await new Promise((r) => setTimeout(r, 5));
  assert.ok(probes >= 3, "it probes while down");
  assert.equal(lines.length, 1);
  answers = true;
  const deadline = Date.now() + 2000;
  while (watch.down && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  assert.equal(watch.down, false);
  assert.deepEqual(
    lines.map((l) => [l.msg, l.reason ?? l.failures]),
    [
      ["database unavailable: calls that need it answer unavailable until it is back", "connection refused"],
      ["database available again", 100],
    ],
  );
  // The next outage is a new transition.
  watch.failed(f);
  assert.equal(lines.length, 3);
  watch.close();
});
