// `krane status <project/env>`: an environment's deployments with their instances per region,
// each instance's last event, its sentinels, the clusters of its regions and its rollout, as a
// table (status-view.ts) or as JSON (the StatusService answer plus "rollout" and
// "lastInstanceEvents").
//
// The table form (status-table.ts) reads with the light JSON client (json-call.ts), which starts
// in a fraction of the time the Connect client takes; it is the form people run by hand and in
// watch loops. `-o json` goes through the Connect client, whose JSON has every field, defaults
// included, as every other command's `-o json` has.
import type { Command } from "commander";
import { environmentRef, splitTarget, userAction, withConnection, type ConnectionFlags } from "./command.js";

export function registerStatusCommand(program: Command): void {
  const json = userAction(async (x, target: string) => {
    const ref = await environmentRef(x, target);
    const { InstanceEventService, InstanceEventSchema } = await import("../gen/krane/ctrl/v1/events_pb.js");
    const [res, { status: rollout }, { events: lastEvents }] = await Promise.all([
      x.ctrl.client(x.api.StatusService).getEnvironmentStatus(ref),
      x.ctrl.client(x.rollout.RolloutService).getRolloutStatus(ref),
      x.ctrl.client(InstanceEventService).listInstanceEvents({ ...ref, latest: true }),
    ]);
    // The environment's status, plus its rollout per region under "rollout".
    // Each current instance's newest event under "lastInstanceEvents".
    const out = {
      ...(x.toJson(x.api.GetEnvironmentStatusResponseSchema, res, { alwaysEmitImplicit: true }) as object),
      lastInstanceEvents: lastEvents.map((e) => x.toJson(InstanceEventSchema, e, { alwaysEmitImplicit: true })),
    };
    const withRollout = rollout
      ? { ...out, rollout: x.toJson(x.rollout.RolloutStatusSchema, rollout, { alwaysEmitImplicit: true }) }
      : out;
    process.stdout.write(`${JSON.stringify(withRollout, null, 2)}\n`);
  });
  withConnection(
    program
      .command("status <project/env>")
      .description("deployments, instances per region, sentinels and clusters of an environment"),
    { workspace: true },
  ).action(async (target: string, flags: ConnectionFlags, cmd: Command) => {
    if (flags.output === "json") return json(target, flags, cmd);
    const { statusTable } = await import("./status-table.js");
    await statusTable(splitTarget(target), flags);
  });
}
