// PostgreSQL transactions in as few round trips as their statements allow. Kysely's PostgreSQL
// driver sends BEGIN, each statement and COMMIT as separate queries, each waiting for the
// server's answer: a change of desired state (one statement) cost three round trips, which
// bounded how many changes a second one ctrl could commit. This pool hands Kysely clients that
// keep the driver's order but send less often:
//
//  - BEGIN is held back and goes with the transaction's first statement;
//  - a statement whose answer nobody reads (marked DEFERRABLE: the outbox's put, ./postgres.ts)
//    is held back too and goes with the next statement, or with COMMIT;
//  - a transaction that only changes desired state is therefore one query: BEGIN; the
//    changes; COMMIT.
//
// Held statements go as one multi-statement query of the simple protocol, so their parameters
// are written into the text as literals (the same text pg would send as parameters, quoted as
// untyped literals, which the server resolves by context as it does parameters). The order of
// statements never changes, a later statement of the transaction sees the held writes (they run
// first, in the same query), and the transaction commits exactly when COMMIT returns: what a
// caller is told committed is durable as before. An error in a batch fails the statement that
// sent it (or COMMIT); Kysely then rolls the transaction back as usual. Transactions begun with
// settings (START TRANSACTION ISOLATION LEVEL …) and statements outside transactions pass through
// unchanged.
import type { PostgresCursor, PostgresPool, PostgresPoolClient, PostgresQueryResult } from "kysely";
import pg from "pg";

/** The first characters of a statement whose answer is never read; it may be sent later in its transaction. */
export const DEFERRABLE = "/* krane:deferrable */";

type Result = PostgresQueryResult<unknown>;

// pg's own conversion of a parameter to its text (dates, arrays, JSON, Uint8Array → Buffer): the
// driver exports it as utils.prepareValue, untyped.
const prepareValue = (pg as unknown as { utils: { prepareValue(v: unknown): unknown } }).utils.prepareValue;

/**
 * A parameter as the literal pg would have sent it (its text, untyped); undefined for text with
 * a NUL character, which a query's text cannot carry (as a parameter the server refuses it).
 * The quoting is pg.escapeLiteral's, done with native replaces: escapeLiteral builds its result a
 * character at a time, which for a change's payload (its bytes as hex, twice in the outbox's
 * statement) cost more than the rest of ctrl's work on the change (bench/ctrl/ctrl-inline.ts).
 */
export function literal(value: unknown): string | undefined {
  const v = prepareValue(value);
  if (v === null || v === undefined) return "NULL";
  // bytea's hex text, "\x…": its one backslash makes it an E'' literal, doubled.
  if (Buffer.isBuffer(v)) return ` E'\\\\x${v.toString("hex")}'`;
  const text = String(v);
  if (text.includes("\u0000")) return undefined;
  const quoted = text.replace(QUOTE, "''");
  return text.includes("\\") ? ` E'${quoted.replace(BACKSLASH, "\\\\")}'` : `'${quoted}'`;
}

const QUOTE = /'/g;
const BACKSLASH = /\\/g;
/** The characters where something other than plain text may begin: quotes, comments, "$". */
const SPECIAL = /['"$]|--|\/\*/g;

/**
 * The statement with $1…$n replaced by the literals of `values`; undefined when it cannot be
 * done safely (a placeholder past the values, a value no literal can carry). Quoted strings, quoted identifiers, comments and
 * dollar-quoted bodies are copied untouched.
 */
export function inlineParameters(text: string, values: readonly unknown[]): string | undefined {
  if (values.length === 0) return text;
  let out = "";
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i] as string;
    const next = text[i + 1];
    if (c === "'" || c === '"') {
      // A quoted string (E'…' strings take backslash escapes) or identifier.
      const escapes = c === "'" && i > 0 && /[eE]/.test(text[i - 1] ?? "") && !/\w/.test(text[i - 2] ?? "");
      let j = i + 1;
      for (; j < n; j++) {
        const d = text[j];
        if (escapes && d === "\\") j++;
        else if (d === c) {
          if (text[j + 1] === c) j++;
          else break;
        }
      }
      out += text.slice(i, j + 1);
      i = j + 1;
    } else if (c === "-" && next === "-") {
      const j = text.indexOf("\n", i);
      const end = j < 0 ? n : j;
      out += text.slice(i, end);
      i = end;
    } else if (c === "/" && next === "*") {
      const j = text.indexOf("*/", i + 2);
      const end = j < 0 ? n : j + 2;
      out += text.slice(i, end);
      i = end;
    } else if (c === "$") {
      // After a letter, digit or underscore, "$" belongs to an identifier (a$1), not a placeholder.
      const inWord = /\w/.test(text[i - 1] ?? "");
      const param = inWord ? null : /^\$(\d+)/.exec(text.slice(i, i + 12));
      if (param) {
        const k = Number(param[1]);
        const lit = k < 1 || k > values.length ? undefined : literal(values[k - 1]);
        if (lit === undefined) return undefined;
        out += lit;
        i += param[0].length;
        continue;
      }
      const tag = /^\$[A-Za-z_]*\$/.exec(text.slice(i, i + 64));
      if (tag && !inWord) {
        const j = text.indexOf(tag[0], i + tag[0].length);
        const end = j < 0 ? n : j + tag[0].length;
        out += text.slice(i, end);
        i = end;
      } else {
        out += c;
        i++;
      }
    } else {
      // Plain text, up to the next character where something else may begin.
      SPECIAL.lastIndex = i;
      const m = SPECIAL.exec(text);
      // (Never i itself: each of those characters has its own branch above; at least one is copied.)
      const end = m ? Math.max(m.index, i + 1) : n;
      out += text.slice(i, end);
      i = end;
    }
  }
  return out;
}

/** The answer of a statement not sent yet (Kysely reads no affected rows from a SELECT). */
const NOTHING_SENT: Result = { command: "SELECT", rowCount: 0, rows: [] };

function result(r: pg.QueryResult): Result {
  return { command: r.command as Result["command"], rowCount: r.rowCount ?? 0, rows: r.rows as unknown[] };
}

/** A pooled client that batches its transaction's statements (see the top of this file). */
export class BatchingClient implements PostgresPoolClient {
  /** BEGIN and the deferred statements not sent yet, as text. */
  #pending: string[] = [];
  /** In a transaction begun with a plain BEGIN, sent or not. */
  #inTransaction = false;

  constructor(readonly client: pg.PoolClient) {}

  query<R>(sql: string, parameters: readonly unknown[]): Promise<PostgresQueryResult<R>>;
  query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>;
  query<R>(
    q: string | PostgresCursor<R>,
    values: readonly unknown[] = [],
  ): Promise<PostgresQueryResult<R>> | PostgresCursor<R> {
    if (typeof q !== "string") {
      if (this.#pending.length > 0) throw new Error("a cursor cannot follow statements not yet sent");
      return this.client.query(q as unknown as pg.Submittable) as unknown as PostgresCursor<R>;
    }
    return this.#query(q, values) as Promise<PostgresQueryResult<R>>;
  }

  async #query(text: string, values: readonly unknown[]): Promise<Result> {
    const verb = text.length <= 8 ? text.toLowerCase() : "";
    if (!this.#inTransaction) {
      if (verb === "begin") {
        this.#inTransaction = true;
        this.#pending = ["BEGIN"];
        return NOTHING_SENT;
      }
      return this.#send(text, values);
    }
    if (verb === "commit") {
      this.#inTransaction = false;
      const pending = this.#pending;
      this.#pending = [];
      // Nothing was ever sent: there is no transaction to commit.
      if (pending.length === 1 && pending[0] === "BEGIN") return NOTHING_SENT;
      return this.#batch([...pending, "COMMIT"]);
    }
    if (verb === "rollback") {
      this.#inTransaction = false;
      const begun = this.#pending[0] !== "BEGIN";
      this.#pending = [];
      return begun ? this.#send("ROLLBACK", []) : NOTHING_SENT;
    }
    const inlined = this.#pending.length > 0 || text.startsWith(DEFERRABLE) ? inlineParameters(text, values) : text;
    if (text.startsWith(DEFERRABLE) && inlined !== undefined) {
      this.#pending.push(inlined);
      return NOTHING_SENT;
    }
    if (this.#pending.length === 0) return this.#send(text, values);
    const pending = this.#pending;
    this.#pending = [];
    if (inlined === undefined) {
      await this.#batch(pending);
      return this.#send(text, values);
    }
    return this.#batch([...pending, inlined]);
  }

  async #send(text: string, values: readonly unknown[]): Promise<Result> {
    return result(await this.client.query(text, values as unknown[]));
  }

  /** Statements in one query; the answer of the last. */
  async #batch(statements: string[]): Promise<Result> {
    const r = (await this.client.query(statements.join(";\n"))) as pg.QueryResult | pg.QueryResult[];
    const last = Array.isArray(r) ? r[r.length - 1] : r;
    return last ? result(last) : NOTHING_SENT;
  }

  release(): void {
    // A transaction still open here is a bug of the caller; the connection must not be reused.
    const broken = this.#inTransaction;
    this.#pending = [];
    this.#inTransaction = false;
    this.client.release(broken ? new Error("released inside a transaction") : undefined);
  }
}

/** The pool Kysely is given: pg's pool, each client wrapped once. */
export class BatchingPool implements PostgresPool {
  readonly #wrapped = new WeakMap<pg.PoolClient, BatchingClient>();

  constructor(readonly pool: pg.Pool) {}

  async connect(): Promise<BatchingClient> {
    const c = await this.pool.connect();
    let w = this.#wrapped.get(c);
    if (!w) this.#wrapped.set(c, (w = new BatchingClient(c)));
    return w;
  }

  end(): Promise<void> {
    return this.pool.end();
  }
}
