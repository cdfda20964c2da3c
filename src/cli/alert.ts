// `krane alert add | list | remove <project/env>`: an environment's alert rules against ctrl's
// AlertService. A rule fires (and later resolves) through the workspace's notification channels
// (`krane notify`), as the events alert.firing and alert.resolved.
import type { Command } from "commander";
import type { AlertRule } from "../gen/krane/ctrl/v1/alerts_pb.js";
import { parseDuration } from "./calls.js";
import { environmentRef, when, workspaceCommand, type ConnectionFlags, type UserContext } from "./command.js";

async function service(x: UserContext) {
  const m = await import("../gen/krane/ctrl/v1/alerts_pb.js");
  return { m, client: x.ctrl.client(m.AlertService) };
}

interface AddFlags extends ConnectionFlags {
  metric: string;
  above?: string;
  below?: string;
  for?: string;
  window: string;
}

/** The comparison and bound of `--above` / `--below` (exactly one). */
export function bound(f: { above?: string; below?: string }): { op: ">" | "<"; threshold: number } {
  if ((f.above === undefined) === (f.below === undefined)) throw new Error("give one of --above and --below");
  const [op, flag, v] =
    f.above !== undefined ? ([">", "--above", f.above] as const) : (["<", "--below", f.below ?? ""] as const);
  if (!/^\d+(\.\d+)?$/.test(v)) throw new Error(`${flag}: expected a number, got "${v}"`);
  return { op, threshold: Number(v) };
}

/**
 * `--window` and `--for` in seconds. `--for` is 5m by default, 1m with a window longer than a
 * minute: "restarts > 3 in 10m" fires on the minute the window's count passes the bound.
 */
export function timing(f: { window: string; for?: string }): { windowSeconds: number; forSeconds: number } {
  const windowMs = parseDuration(f.window);
  const forMs = parseDuration(f.for ?? (windowMs > 60_000 ? "1m" : "5m"));
  return { windowSeconds: Math.round(windowMs / 1000), forSeconds: Math.round(forMs / 1000) };
}

/** "restarts > 3 in 10m", or "error_rate > 2" for a one-minute window. */
export function conditionText(r: Pick<AlertRule, "metric" | "op" | "threshold" | "windowSeconds">): string {
  const over = r.windowSeconds > 60 ? ` in ${r.windowSeconds / 60}m` : "";
  return `${r.metric} ${r.op} ${r.threshold}${over}`;
}

export function ruleRow(r: AlertRule): string[] {
  return [
    r.name,
    conditionText(r),
    `${r.forSeconds / 60}m`,
    r.state,
    r.lastValue === undefined ? "-" : String(Math.round(r.lastValue * 100) / 100),
    when(r.sinceUnixMs),
  ];
}

export function registerAlertCommands(program: Command): void {
  const alert = program
    .command("alert")
    .description("an environment's alert rules on its metrics (they notify through `krane notify` channels)");
  workspaceCommand(
    alert
      .command("add <project/env> <name>")
      .description("add a rule: fires once the metric stays above (or below) the bound for the duration")
      .requiredOption(
        "--metric <metric>",
        "error_rate (%), p50_ms, p95_ms, p99_ms, request_rate (per second) or restarts (a count)",
      )
      .option("--above <n>", "fire while the metric is above this")
      .option("--below <n>", "fire while the metric is below this")
      .option("--window <duration>", "the metric over this many minutes, ending with each (1m to 60m)", "1m")
      .option("--for <duration>", "how long it must hold: 1m to 60m (default 5m; 1m with a --window)"),
    async (x, target: string, name: string, f: AddFlags) => {
      const { m, client } = await service(x);
      const { op, threshold } = bound(f);
      const { rule } = await client.addAlertRule({
        ...(await environmentRef(x, target)),
        name,
        metric: f.metric,
        op,
        threshold,
        ...timing(f),
      });
      if (!rule) return;
      if (x.json) x.printJson(m.AlertRuleSchema, rule);
      else process.stdout.write(`added alert rule ${rule.name}: ${conditionText(rule)} for ${rule.forSeconds / 60}m\n`);
    },
  );
  workspaceCommand(
    alert.command("list <project/env>").description("the environment's rules and their state"),
    async (x, target: string) => {
      const { m, client } = await service(x);
      const res = await client.listAlertRules(await environmentRef(x, target));
      if (x.json) x.printJson(m.ListAlertRulesResponseSchema, res);
      else if (res.rules.length === 0) process.stdout.write("no alert rules (krane alert add)\n");
      else x.printTable(["NAME", "CONDITION", "FOR", "STATE", "LAST VALUE", "SINCE"], res.rules.map(ruleRow));
    },
  );
  workspaceCommand(
    alert.command("remove <project/env> <name>").description("remove a rule"),
    async (x, target: string, name: string) => {
      const { client } = await service(x);
      await client.removeAlertRule({ ...(await environmentRef(x, target)), name });
      if (!x.json) process.stdout.write(`removed alert rule ${name}\n`);
    },
  );
}
