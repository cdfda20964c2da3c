// Alert rules (table alert_rules, migration 0042): an environment's rules and each rule's
// evaluation state; the only writer of that table. A run (evaluateRule) reads the rule's minutes
// of the metrics history that have closed since it last ran, folds them (../history/alerts.ts) and, in
// one transaction, stores the new state and writes the firing or resolution to the notification
// outbox (../domain/notifications.ts notify), moving the rule's next minute on only if no other
// run did since it was read (compare-and-set): a crash before the commit leaves both undone, a
// second ctrl replica evaluating the same minutes writes nothing, so each transition is
// notified exactly once.
import type { Kysely } from "kysely";
import type { WriteTx } from "../db/outbox.js";
import type { AlertRuleRow, Database } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { noteWriteSubject } from "../db/write-hook.js";
import type { AlertRuleInput } from "../validate/alerts.js";
import type { EnvironmentRef } from "../validate/types.js";
import { newId } from "./ids.js";
import { notify } from "./notifications.js";
import { findEnvironment } from "./tenancy.js";
import { alreadyExists, failedPrecondition, notFound } from "../errors.js";
import { readPoints } from "../history/store.js";
import { MINUTE_MS, addInto, emptySums, startOf, type MetricSums } from "../history/sums.js";
import {
  ALERT_METRICS,
  evaluate,
  type AlertCondition,
  type AlertMetric,
  type AlertOp,
  type AlertPhase,
  type AlertState,
  type AlertTransition,
} from "../history/alerts.js";

type Reader = Kysely<Database>;

/** Rules per environment. */
export const MAX_RULES_PER_ENVIRONMENT = 50;
/**
 * Minutes further back than this are not read when a rule catches up (after ctrl was down): they
 * fold as missing, so an episode long over is not notified late.
 */
export const MAX_CATCH_UP_MS = 60 * MINUTE_MS;

export function conditionOf(r: AlertRuleRow): AlertCondition {
  return {
    metric: r.metric as AlertMetric,
    op: r.op as AlertOp,
    threshold: r.threshold,
    forMs: Number(r.for_ms),
    windowMs: Number(r.window_ms),
  };
}

export function stateOf(r: AlertRuleRow): AlertState {
  return {
    phase: r.phase as AlertPhase,
    sinceMs: Number(r.since_ms),
    gapRun: Number(r.gap_run),
    lastHeld: Number(r.last_held) === 1,
    lastValue: r.last_value === null ? null : Number(r.last_value),
  };
}

/**
 * Adds a rule. It starts `for` back from the current minute, so a condition that already holds
 * fires as soon as the minutes are in rather than `for` later.
 */
export async function addAlertRule(store: Store, input: AlertRuleInput): Promise<AlertRuleRow> {
  return store.write(async (tx) => {
    const { environment } = await findEnvironment(tx.trx, input.ref);
    const rules = await tx.trx
      .selectFrom("alert_rules")
      .select("name")
      .where("environment_id", "=", environment.id)
      .execute();
    if (rules.some((r) => r.name === input.name))
      throw alreadyExists(`alert rule "${input.name}" in environment "${environment.slug}"`);
    if (rules.length >= MAX_RULES_PER_ENVIRONMENT)
      throw failedPrecondition(
        `environment "${environment.slug}" has ${MAX_RULES_PER_ENVIRONMENT} alert rules already`,
      );
    const row: AlertRuleRow = {
      id: newId("alr"),
      workspace_id: environment.workspace_id,
      environment_id: environment.id,
      name: input.name,
      metric: input.metric,
      op: input.op,
      threshold: input.threshold,
      for_ms: input.forMs,
      window_ms: input.windowMs,
      phase: "inactive",
      since_ms: 0,
      gap_run: 0,
      last_held: 0,
      last_value: null,
      next_minute_ms: startOf(tx.now, MINUTE_MS) - input.forMs,
      created_at: tx.now,
    };
    await tx.trx.insertInto("alert_rules").values(row).execute();
    await noteWriteSubject(tx, row.id);
    return row;
  });
}

/** An environment's rules, by name. */
export async function listAlertRules(db: Reader, ref: EnvironmentRef): Promise<AlertRuleRow[]> {
  const { environment } = await findEnvironment(db, ref);
  return db
    .selectFrom("alert_rules")
    .selectAll()
    .where("environment_id", "=", environment.id)
    .orderBy("name")
    .execute();
}

export async function removeAlertRule(store: Store, ref: EnvironmentRef, name: string): Promise<void> {
  await store.write(async (tx) => {
    const { environment } = await findEnvironment(tx.trx, ref);
    const res = await tx.trx
      .deleteFrom("alert_rules")
      .where("environment_id", "=", environment.id)
      .where("name", "=", name)
      .executeTakeFirst();
    if (Number(res.numDeletedRows) === 0) throw notFound(`alert rule "${name}" in environment "${environment.slug}"`);
  });
}

/** Deletes an environment's rules (the end of its deletion). */
export async function purgeAlertRules(tx: WriteTx, environmentId: string): Promise<void> {
  await tx.trx.deleteFrom("alert_rules").where("environment_id", "=", environmentId).execute();
}

/** The first minute not closed yet at `nowMs`: a minute is evaluated `settleMs` after its end. */
export function closedUntil(nowMs: number, settleMs: number): number {
  return startOf(nowMs - settleMs, MINUTE_MS);
}

/** Rules with a closed minute to evaluate, at most `limit`, the most behind first. */
export async function dueAlertRules(db: Reader, nowMs: number, settleMs: number, limit: number): Promise<string[]> {
  const rows = await db
    .selectFrom("alert_rules")
    .select("id")
    .where("next_minute_ms", "<", closedUntil(nowMs, settleMs))
    .orderBy("next_minute_ms")
    .limit(limit)
    .execute();
  return rows.map((r) => r.id);
}

/** An environment's minutes from `fromMs` to before `untilMs`, every revision and region added up. */
async function environmentMinutes(
  db: Reader,
  environmentId: string,
  fromMs: number,
  untilMs: number,
): Promise<Map<number, MetricSums>> {
  const out = new Map<number, MetricSums>();
  for (const p of await readPoints(db, { environmentId, stepMs: MINUTE_MS, fromMs })) {
    if (p.atMs >= untilMs) continue;
    let acc = out.get(p.atMs);
    if (!acc) out.set(p.atMs, (acc = emptySums()));
    addInto(acc, p.sums);
  }
  return out;
}

function format(v: number | null): string {
  return v === null ? "no value" : String(Math.round(v * 100) / 100);
}

function minutes(ms: number): string {
  return `${Math.round(ms / MINUTE_MS)} min`;
}

async function notifyTransition(tx: WriteTx, r: AlertRuleRow, t: AlertTransition): Promise<void> {
  const c = conditionOf(r);
  const over = c.windowMs > MINUTE_MS ? ` in ${minutes(c.windowMs)}` : "";
  const expr = `${c.metric} ${c.op} ${c.threshold}${over} for ${minutes(c.forMs)}`;
  const firing = t.kind === "firing";
  await notify(tx, {
    type: firing ? "alert.firing" : "alert.resolved",
    severity: firing ? "critical" : "success",
    environmentId: r.environment_id,
    summary: `alert ${r.name} ${firing ? "firing" : "resolved"}`,
    text: firing
      ? `${ALERT_METRICS[c.metric]} was ${format(t.value)} (rule: ${expr}) for ${minutes(t.toMs - t.fromMs)}.`
      : `${ALERT_METRICS[c.metric]} is ${format(t.value)} again (rule: ${expr}); it held for ${minutes(t.toMs - t.fromMs - MINUTE_MS)}.`,
    details: {
      rule: r.name,
      metric: c.metric,
      op: c.op,
      threshold: c.threshold,
      for_seconds: c.forMs / 1000,
      value_window_seconds: c.windowMs / 1000,
      value: t.value,
      window_start: new Date(t.fromMs).toISOString(),
      window_end: new Date(t.toMs).toISOString(),
    },
  });
}

/**
 * Evaluates a rule's closed minutes; returns the transitions notified (none when another run got
 * there first, or the rule is gone).
 */
export async function evaluateAlertRule(store: Store, id: string, settleMs: number): Promise<AlertTransition[]> {
  return store.write(async (tx) => {
    const r = await tx.trx.selectFrom("alert_rules").selectAll().where("id", "=", id).executeTakeFirst();
    if (!r) return [];
    const from = Number(r.next_minute_ms);
    const until = closedUntil(tx.now, settleMs);
    if (until <= from) return [];
    const c = conditionOf(r);
    // A windowed rule's first minute needs the window's minutes before it.
    const readFrom = Math.max(from, until - MAX_CATCH_UP_MS) - (c.windowMs - MINUTE_MS);
    const points = await environmentMinutes(tx.trx, r.environment_id, readFrom, until);
    const { state, transitions } = evaluate(c, stateOf(r), from, until, points);
    const res = await tx.trx
      .updateTable("alert_rules")
      .set({
        phase: state.phase,
        since_ms: state.sinceMs,
        gap_run: state.gapRun,
        last_held: state.lastHeld ? 1 : 0,
        last_value: state.lastValue,
        next_minute_ms: until,
      })
      .where("id", "=", id)
      .where("next_minute_ms", "=", from)
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) !== 1) return [];
    for (const t of transitions) await notifyTransition(tx, r, t);
    return transitions;
  });
}
