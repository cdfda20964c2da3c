// Recognises failures of ctrl's database (PostgreSQL or SQLite) among the errors that reach the
// RPC edge, so they are answered `unavailable` (or `resource_exhausted`) instead of `internal`:
// a client or a retry policy can then tell an outage from a bug. Pure: it reads the error's
// shape (Node system error codes, PostgreSQL SQLSTATEs, SQLite result codes, and the few
// messages node-postgres raises without a code) and nothing else.
//
// `applied` says what the caller may assume: "no" when the failure happened before or instead
// of the change (no connection, the transaction was rolled back), "unknown" when the connection
// died while a statement ran: a COMMIT could have been the statement.
import { Code } from "@connectrpc/connect";
import { NO_WRITE_SLOT } from "../db/store.js";

export type Dependency = "database";

export interface DependencyFailure {
  readonly dependency: Dependency;
  readonly code: Code.Unavailable | Code.ResourceExhausted;
  /** What went wrong, in a few words, with no address, name or credential in it. */
  readonly reason: string;
  readonly applied: "no" | "unknown";
}

/** Node's network errors: the database cannot be reached, or the connection broke. */
const NETWORK = new Map<string, { reason: string; applied: "no" | "unknown" }>(
  Object.entries({
    ECONNREFUSED: { reason: "connection refused", applied: "no" },
    EHOSTUNREACH: { reason: "host unreachable", applied: "no" },
    ENETUNREACH: { reason: "network unreachable", applied: "no" },
    ENOTFOUND: { reason: "host not found", applied: "no" },
    EAI_AGAIN: { reason: "host name lookup failed", applied: "no" },
    ETIMEDOUT: { reason: "connection timed out", applied: "unknown" },
    ECONNRESET: { reason: "connection reset", applied: "unknown" },
    ECONNABORTED: { reason: "connection aborted", applied: "unknown" },
    EPIPE: { reason: "connection closed", applied: "unknown" },
  }),
);

/** PostgreSQL SQLSTATEs (https://www.postgresql.org/docs/current/errcodes-appendix.html). */
function fromSqlState(state: string): Omit<DependencyFailure, "dependency"> | undefined {
  const unavailable = (reason: string, applied: "no" | "unknown"): Omit<DependencyFailure, "dependency"> => ({
    code: Code.Unavailable,
    reason,
    applied,
  });
  switch (state) {
    case "57P01":
      return unavailable("the server is shutting down", "unknown");
    case "57P02":
      return unavailable("the server crashed", "unknown");
    case "57P03":
      return unavailable("the server is not accepting connections yet", "no");
    case "57014":
      return unavailable("a statement timed out", "no");
    case "55P03":
      return unavailable("a lock timed out", "no");
    case "40001":
      return unavailable("conflicting concurrent changes (serialization failure), retries exhausted", "no");
    case "40P01":
      return unavailable("conflicting concurrent changes (deadlock), retries exhausted", "no");
    case "25P03":
      return unavailable("an idle transaction timed out", "unknown");
    case "53300":
      return { code: Code.ResourceExhausted, reason: "too many connections", applied: "no" };
    case "53100":
      return { code: Code.ResourceExhausted, reason: "disk full", applied: "no" };
    case "53200":
      return { code: Code.ResourceExhausted, reason: "out of memory", applied: "no" };
    case "58030":
      return unavailable("I/O error", "unknown");
  }
  if (state.startsWith("08"))
    return unavailable("connection failure", state === "08001" || state === "08004" ? "no" : "unknown");
  return undefined;
}

/** SQLite result codes (better-sqlite3 puts them on `code`, extended ones included). */
function fromSqlite(code: string): Omit<DependencyFailure, "dependency"> | undefined {
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"))
    return { code: Code.Unavailable, reason: "the database file is locked", applied: "no" };
  if (code === "SQLITE_FULL") return { code: Code.ResourceExhausted, reason: "disk full", applied: "no" };
  if (code.startsWith("SQLITE_IOERR")) return { code: Code.Unavailable, reason: "I/O error", applied: "unknown" };
  if (code.startsWith("SQLITE_CANTOPEN"))
    return { code: Code.Unavailable, reason: "the database file cannot be opened", applied: "no" };
  if (code.startsWith("SQLITE_READONLY"))
    return { code: Code.Unavailable, reason: "the database file is read-only", applied: "no" };
  return undefined;
}

/** node-postgres and pg-pool errors that carry no code. */
const MESSAGES: [RegExp, Omit<DependencyFailure, "dependency">][] = [
  [
    new RegExp(`^${NO_WRITE_SLOT} within`),
    { code: Code.ResourceExhausted, reason: "every write slot of ctrl is busy", applied: "no" },
  ],
  [
    /^timeout exceeded when trying to connect$/,
    { code: Code.ResourceExhausted, reason: "no free connection in ctrl's pool", applied: "no" },
  ],
  [
    /^Connection terminated due to connection timeout$/,
    { code: Code.Unavailable, reason: "connection timed out", applied: "no" },
  ],
  [/^Connection terminated/, { code: Code.Unavailable, reason: "connection lost", applied: "unknown" }],
  [/is not queryable$/, { code: Code.Unavailable, reason: "connection lost", applied: "no" }],
  [/^Query read timeout$/, { code: Code.Unavailable, reason: "a query timed out", applied: "unknown" }],
  [
    /^Cannot use a pool after calling end on the pool$/,
    { code: Code.Unavailable, reason: "ctrl is shutting down", applied: "no" },
  ],
  [/^The database connection is not open$/, { code: Code.Unavailable, reason: "ctrl is shutting down", applied: "no" }],
  [/^driver has already been destroyed$/, { code: Code.Unavailable, reason: "ctrl is shutting down", applied: "no" }],
];

function fields(err: unknown): { code?: unknown; message?: unknown; errors?: unknown; cause?: unknown } | undefined {
  return typeof err === "object" && err !== null
    ? (err as { code?: unknown; message?: unknown; errors?: unknown; cause?: unknown })
    : undefined;
}

/** The database failure `err` is, or undefined when it is something else (a bug, a domain error). */
export function classifyDependencyError(err: unknown, depth = 0): DependencyFailure | undefined {
  const e = fields(err);
  if (!e || depth > 4) return undefined;
  const found = ((): Omit<DependencyFailure, "dependency"> | undefined => {
    if (typeof e.code === "string") {
      const net = NETWORK.get(e.code);
      if (net) return { code: Code.Unavailable, ...net };
      if (/^[0-9A-Z]{5}$/.test(e.code)) return fromSqlState(e.code);
      if (e.code.startsWith("SQLITE_")) return fromSqlite(e.code);
    }
    if (typeof e.message === "string") return MESSAGES.find(([re]) => re.test(e.message as string))?.[1];
    return undefined;
  })();
  if (found) return { dependency: "database", ...found };
  // Several addresses tried (AggregateError), or an error wrapping the driver's.
  if (Array.isArray(e.errors)) {
    for (const inner of e.errors as unknown[]) {
      const f = classifyDependencyError(inner, depth + 1);
      if (f) return f;
    }
  }
  return e.cause !== undefined ? classifyDependencyError(e.cause, depth + 1) : undefined;
}

/** What the caller is told: the dependency, what happened, and whether the request took effect. */
export function dependencyMessage(f: DependencyFailure, databaseKind: string): string {
  const state = f.code === Code.ResourceExhausted ? "out of capacity" : "unavailable";
  const what = `ctrl's database (${databaseKind}) is ${state}: ${f.reason}`;
  return f.applied === "no"
    ? `${what}; the request was not applied, try again later`
    : `${what}; the request was not applied unless it completed just before the failure: check before repeating a change`;
}
