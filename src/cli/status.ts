// `krane status <project/env>`: an environment's deployments with their instances per region,
// each instance's last event, its sentinels, the clusters of its regions and its rollout, as a
// table (status-view.ts) or as JSON (the StatusService answer plus "rollout" and
// "lastInstanceEvents").
import type { Command } from "commander";
import { splitTarget, userAction, withConnection } from "./command.js";

export function registerStatusCommand(program: Command): void {
  withConnection(
    program
      .command("status <project/env>")
      .description("deployments, instances per region, sentinels and clusters of an environment"),
    { workspace: true },
  ).action(
    userAction(async (x, target: string) => {
      const ref = { workspace: await x.ctrl.workspace(), ...splitTarget(target) };
      const { InstanceEventService, InstanceEventSchema } = await import("../gen/krane/ctrl/v1/events_pb.js");
      const [res, { status: rollout }, { events: lastEvents }] = await Promise.all([
        x.ctrl.client(x.api.StatusService).getEnvironmentStatus(ref),
        x.ctrl.client(x.rollout.RolloutService).getRolloutStatus(ref),
        x.ctrl.client(InstanceEventService).listInstanceEvents({ ...ref, latest: true }),
      ]);
      if (x.json) {
        // The environment's status, plus its rollout per region under "rollout".
        // Each current instance's newest event under "lastInstanceEvents".
        const json = {
          ...(x.toJson(x.api.GetEnvironmentStatusResponseSchema, res, { alwaysEmitImplicit: true }) as object),
          lastInstanceEvents: lastEvents.map((e) => x.toJson(InstanceEventSchema, e, { alwaysEmitImplicit: true })),
        };
        const withRollout = rollout
          ? { ...json, rollout: x.toJson(x.rollout.RolloutStatusSchema, rollout, { alwaysEmitImplicit: true }) }
          : json;
        process.stdout.write(`${JSON.stringify(withRollout, null, 2)}\n`);
        return;
      }
      process.stdout.write(`${x.view.renderEnvironmentStatus(res, Date.now(), rollout, lastEvents)}\n`);
    }),
  );
}
