// User commands of rollouts: `krane scale`, `krane rollback` and `krane rollout pause | resume | undo |
// restart | history | status | plan | promote | abort` (the last two: progressive strategies) against ctrl's RolloutService (`plan` runs the engine
// locally: rollout-plan.ts). `rollout status` follows the rollout per region until it
// completes (exit 0) or a region exceeds its progress deadline (non-zero), like
// `kubectl rollout status`.
import { Option, type Command } from "commander";
import type { RolloutStatus } from "../gen/krane/ctrl/v1/rollout_pb.js";
import { environmentRef, intArg, workspaceCommand, type ConnectionFlags, type UserContext } from "./command.js";

interface EnvRef {
  workspace: string;
  project: string;
  environment: string;
}

/** "<project>/<env>" (workspace from --workspace or the only one) or "<ws>/<project>/<env>". */
export async function envTarget(x: UserContext, target: string): Promise<EnvRef> {
  const parts = target.split("/");
  if (parts.length === 3 && parts.every((p) => p !== "")) {
    const [workspace = "", project = "", environment = ""] = parts;
    return { workspace, project, environment };
  }
  return await environmentRef(x, target);
}

function print(x: UserContext, status: RolloutStatus | undefined, view: "status" | "history" = "status"): void {
  if (!status) return;
  if (x.json) {
    x.printJson(x.rollout.RolloutStatusSchema, status);
    return;
  }
  const json = x.toJson(x.rollout.RolloutStatusSchema, status);
  process.stdout.write(
    `${view === "history" ? x.view.renderRolloutHistory(json) : x.view.renderRolloutStatus(json)}\n`,
  );
}

export interface FollowOptions {
  intervalMs: number;
  /** 0: no limit. */
  timeoutMs: number;
  /** Progress lines (one per region whenever it changes). */
  log: (line: string) => void;
  signal?: AbortSignal;
}

/**
 * Polls the rollout status until every region is complete (resolves with the final status) or
 * a region exceeded its progress deadline (rejects naming it).
 */
export async function followRollout(
  get: () => Promise<RolloutStatus | undefined>,
  opts: FollowOptions,
): Promise<RolloutStatus> {
  const started = Date.now();
  const last = new Map<string, string>();
  for (;;) {
    const status = await get();
    if (!status) throw new Error("ctrl returned no rollout status");
    const p = status.progressive;
    if (p?.aborted) throw new Error(`rollout aborted (${p.phase}): ${p.reason}`);
    const failed = status.regions.filter((r) => r.deadlineExceeded);
    for (const r of status.regions) {
      const line = r.complete ? "successfully rolled out" : `waiting for rollout to finish: ${r.message}`;
      if (last.get(r.region) !== line) opts.log(`[${r.region}] ${line}`);
      last.set(r.region, line);
    }
    if (failed.length > 0)
      throw new Error(`rollout exceeded its progress deadline in ${failed.map((r) => r.region).join(", ")}`);
    if (status.regions.every((r) => r.complete)) return status;
    if (opts.timeoutMs > 0 && Date.now() - started > opts.timeoutMs)
      throw new Error(`timed out after ${Math.round(opts.timeoutMs / 1000)} s waiting for the rollout`);
    if (opts.signal?.aborted) throw new Error("interrupted");
    await new Promise((r) => setTimeout(r, opts.intervalMs));
  }
}

/** The `rollout` command group on `program`, created on first use. */
export function rolloutCommand(program: Command): Command {
  const existing = program.commands.find((c) => c.name() === "rollout");
  if (existing !== undefined) return existing;
  return program
    .command("rollout")
    .description("Manage rollouts: plan, and (per environment) pause, resume, undo, status, history.");
}

/** `krane rollout plan [--input FILE]`: one pass of the engine, JSON in and out (rollout-plan.ts). */
export function registerRolloutPlanCommand(program: Command): void {
  rolloutCommand(program)
    .command("plan")
    .description("Run one pass of the rollout engine on JSON input and print the result as JSON.")
    .option("--input <file>", "read the input from FILE instead of stdin")
    .action(async (opts: { input?: string }) => {
      const { rolloutPlanCommand } = await import("./rollout-plan.js");
      await rolloutPlanCommand(opts.input);
    });
}

export function registerRolloutCommands(program: Command): void {
  workspaceCommand(
    program
      .command("scale <target>")
      .description("set an environment's replicas (<project>/<env> or <ws>/<project>/<env>)")
      .requiredOption("--replicas <n>", "replicas per region", intArg("--replicas"))
      .option("--region <region>", "only this region (default: every region)"),
    async (x, target: string, f: ConnectionFlags & { replicas: number; region?: string }) => {
      const res = await x.ctrl
        .client(x.rollout.RolloutService)
        .scale({ ...(await envTarget(x, target)), replicas: f.replicas, region: f.region ?? "" });
      print(x, res.status);
    },
  );

  workspaceCommand(
    program
      .command("rollback <target>")
      .description(
        "back to the previous revision, pinned there: a traffic switch within the warm window (no pod created), else a rolling update",
      )
      .option("--instant", "only a traffic switch: fail, changing nothing, unless every region keeps the revision warm")
      .option("--unpin", "lift the pin a rollback left: the newest revision rolls out"),
    async (x, target: string, f: ConnectionFlags & { instant?: boolean; unpin?: boolean }) => {
      const res = await x.ctrl
        .client(x.rollout.RolloutService)
        .rollback({ ...(await envTarget(x, target)), instant: f.instant === true, unpin: f.unpin === true });
      if (x.json) {
        x.printJson(x.rollout.RollbackResponseSchema, res);
        return;
      }
      const line = f.unpin
        ? res.unpinned
          ? "unpinned: the newest revision rolls out"
          : "not pinned: nothing to do"
        : res.instant
          ? `rolled back to revision ${res.revision}: traffic switched to its warm pods; pinned until \`krane rollback --unpin ${target}\``
          : `rolling back to revision ${res.revision} (nothing warm in ${res.rollingRegions.join(", ")}: new pods); pinned until \`krane rollback --unpin ${target}\``;
      process.stdout.write(`${line}\n`);
      print(x, res.status);
    },
  );

  registerRolloutPlanCommand(program);
  const rollout = rolloutCommand(program);
  const simple = (name: "pause" | "resume" | "history", description: string): void => {
    workspaceCommand(rollout.command(`${name} <target>`).description(description), async (x, target: string) => {
      const client = x.ctrl.client(x.rollout.RolloutService);
      const ref = await envTarget(x, target);
      const res =
        name === "pause"
          ? await client.pause(ref)
          : name === "resume"
            ? await client.resume(ref)
            : await client.history(ref);
      print(x, res.status, name === "history" ? "history" : "status");
    });
  };
  const command = (name: "promote" | "abort", description: string): void => {
    workspaceCommand(rollout.command(`${name} <target>`).description(description), async (x, target: string) => {
      const client = x.ctrl.client(x.rollout.RolloutService);
      const ref = await envTarget(x, target);
      print(x, (name === "promote" ? await client.promote(ref) : await client.abort(ref)).status);
    });
  };
  command(
    "promote",
    "progressive rollouts: go to the next step (skip a pause or analysis, pass a wave gate, switch blue-green; after an abort, retry)",
  );
  command(
    "abort",
    "progressive rollouts: 100 % of traffic back to the stable revision and the new one scaled down (blue-green: roll back within the scale-down window)",
  );
  simple("pause", "pause an environment's rollouts (sizes hold; new deployments wait)");
  simple("resume", "resume an environment's rollouts");
  simple("history", "an environment's revisions per region");

  workspaceCommand(
    rollout
      .command("undo <target>")
      .description("roll back to the previous revision, or to --to-revision (the region's revision number)")
      .option("--to-revision <n>", "revision number (see `krane rollout history`)", intArg("--to-revision")),
    async (x, target: string, f: ConnectionFlags & { toRevision?: number }) => {
      const res = await x.ctrl.client(x.rollout.RolloutService).undo({
        ...(await envTarget(x, target)),
        toRevision: f.toRevision === undefined ? undefined : BigInt(f.toRevision),
      });
      print(x, res.status);
    },
  );

  workspaceCommand(
    rollout
      .command("restart <target>")
      .description("replace every pod by rolling out a fresh copy of the current revision"),
    async (x, target: string) => {
      const res = await x.ctrl.client(x.rollout.RolloutService).restart(await envTarget(x, target));
      if (!x.json) process.stdout.write(`restarted as ${res.deploymentId}\n`);
      print(x, res.status);
    },
  );

  workspaceCommand(
    rollout
      .command("status <target>")
      .description(
        "follow the rollout per region until it completes (exit 0) or exceeds its progress deadline (exit 1)",
      )
      .option("--no-watch", "print the status once instead of following it")
      .addOption(
        new Option("--timeout <seconds>", "give up after this long (0: never)")
          .argParser(intArg("--timeout"))
          .default(0),
      )
      .addOption(
        new Option("--interval-ms <ms>", "poll interval").argParser(intArg("--interval-ms")).default(250).hideHelp(),
      ),
    async (x, target: string, f: ConnectionFlags & { watch: boolean; timeout: number; intervalMs: number }) => {
      const client = x.ctrl.client(x.rollout.RolloutService);
      const ref = await envTarget(x, target);
      if (!f.watch) {
        const { status } = await client.getRolloutStatus(ref);
        print(x, status);
        if (status?.progressive?.aborted) process.exitCode = 1;
        return;
      }
      const final = await followRollout(async () => (await client.getRolloutStatus(ref)).status, {
        intervalMs: Math.max(50, f.intervalMs),
        timeoutMs: f.timeout * 1000,
        log: (line) => (x.json ? process.stderr : process.stdout).write(`${line}\n`),
      });
      if (x.json) x.printJson(x.rollout.RolloutStatusSchema, final);
    },
  );
}
