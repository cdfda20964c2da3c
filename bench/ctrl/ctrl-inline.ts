// The CPU a change costs ctrl to write its statements into one query on PostgreSQL
// (src/ctrl/db/pg-batching.ts): the outbox's statement, whose payload (the change's bytes as
// hex) appears twice, inlined as literals and joined with BEGIN, an update and COMMIT; and the
// payload's literal alone, made by krane and by pg's own escapeLiteral. Part of `npm run bench --
// ctrl`; alone: `npx tsx bench/ctrl/ctrl-inline.ts`. The statement is a copy of the shape of
// PgOutbox.put's (src/ctrl/db/postgres.ts), with a payload of each size.
import { pathToFileURL } from "node:url";
import pg from "pg";
import { inlineParameters, literal } from "../../src/ctrl/db/pg-batching.js";

const STATEMENT = `/* krane:deferrable */
      WITH put AS (
        INSERT INTO desired_objects (region, kind, object_id, payload, replicas, environment_id)
        VALUES ($1, $2, $3, $4, $5::integer, $6::text)
        ON CONFLICT (region, kind, object_id) DO UPDATE SET payload = excluded.payload, replicas = excluded.replicas,
          environment_id = coalesce(excluded.environment_id, desired_objects.environment_id)
      )
      INSERT INTO outbox_staging (kind, region, seq, head, object_id, op, payload, created_at)
      VALUES ($7, $8, $9, $10, $11, 'apply', $12, $13::bigint)`;

/** Microseconds per call of `f`, the median of 5 rounds of `n` calls. */
function perCall(n: number, f: () => number): number {
  const rounds: number[] = [];
  let sink = 0;
  for (let r = 0; r < 5; r++) {
    const t = performance.now();
    for (let i = 0; i < n; i++) sink += f();
    rounds.push(((performance.now() - t) / n) * 1000);
  }
  if (sink === -1) console.log(sink);
  return rounds.sort((a, b) => a - b)[2] ?? NaN;
}

export function benchCtrlInline(): void {
  for (const size of [300, 1200, 4800]) {
    const bytes = Buffer.from(Array.from({ length: size }, (_, i) => (i * 37) % 256));
    const values = ["eu-west", "deployments", "dep_0123456789abcdefghij", bytes, 3, "env_0123456789abcdefghij"];
    const all = [...values, "deployments", "eu-west", 5, false, "dep_0123456789abcdefghij", bytes, Date.now()];
    const change = perCall(5_000, () => {
      const q = ["BEGIN", inlineParameters(STATEMENT, all) ?? "", "UPDATE deployments SET x = 1", "COMMIT"].join(";\n");
      return q.charCodeAt(q.length >> 1);
    });
    const krane = perCall(5_000, () => (literal(bytes) ?? "").length);
    const escapeLiteral = perCall(5_000, () => pg.escapeLiteral(`\\x${bytes.toString("hex")}`).length);
    console.log(
      `ctrl inline: payload ${String(size).padStart(5)} B: a change's query ${change.toFixed(1)} µs; the payload's literal: krane ${krane.toFixed(1)} µs, pg.escapeLiteral ${escapeLiteral.toFixed(1)} µs (${(escapeLiteral / krane).toFixed(1)}×)`,
    );
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) benchCtrlInline();
