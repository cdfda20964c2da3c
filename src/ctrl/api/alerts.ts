// AlertService: an environment's alert rules (add, list with their state, remove). The
// evaluation is ../alerts/runner.ts's.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { AlertRuleSchema, type AlertService } from "../../gen/krane/ctrl/v1/alerts_pb.js";
import type { AlertRuleRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { addAlertRule, listAlertRules, removeAlertRule } from "../domain/alerts.js";
import { validateAddAlertRule, validateAlertRuleRef } from "../validate/alerts.js";
import { validateEnvironmentRef } from "../validate/api.js";

export function alertRuleMsg(r: AlertRuleRow) {
  return create(AlertRuleSchema, {
    name: r.name,
    metric: r.metric,
    op: r.op,
    threshold: Number(r.threshold),
    forSeconds: Number(r.for_ms) / 1000,
    windowSeconds: Number(r.window_ms) / 1000,
    state: r.phase,
    sinceUnixMs: BigInt(r.since_ms),
    ...(r.last_value === null ? {} : { lastValue: Number(r.last_value) }),
    evaluatedUntilUnixMs: BigInt(r.next_minute_ms),
    createdAtUnixMs: BigInt(r.created_at),
  });
}

export function alertServiceImpl(d: { store: Store }): ServiceImpl<typeof AlertService> {
  return {
    async addAlertRule(req) {
      return { rule: alertRuleMsg(await addAlertRule(d.store, validateAddAlertRule(req))) };
    },
    async listAlertRules(req) {
      return { rules: (await listAlertRules(d.store.db, validateEnvironmentRef(req))).map(alertRuleMsg) };
    },
    async removeAlertRule(req) {
      const { ref, name } = validateAlertRuleRef(req);
      await removeAlertRule(d.store, ref, name);
      return {};
    },
  };
}
