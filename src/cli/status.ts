// `krane status <project/env>`: an environment's deployments with their instances per region,
// its sentinels, the clusters of its regions and its rollout, as a table (status-view.ts) or as
// JSON (the StatusService answer plus "rollout").
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
      const [res, { status: rollout }] = await Promise.all([
        x.ctrl.client(x.api.StatusService).getEnvironmentStatus(ref),
        x.ctrl.client(x.rollout.RolloutService).getRolloutStatus(ref),
      ]);
      if (x.json) {
        // The environment's status, plus its rollout per region under "rollout".
        const json = {
          ...(x.toJson(x.api.GetEnvironmentStatusResponseSchema, res, { alwaysEmitImplicit: true }) as object),
        };
        const withRollout = rollout
          ? { ...json, rollout: x.toJson(x.rollout.RolloutStatusSchema, rollout, { alwaysEmitImplicit: true }) }
          : json;
        process.stdout.write(`${JSON.stringify(withRollout, null, 2)}\n`);
        return;
      }
      process.stdout.write(`${x.view.renderEnvironmentStatus(res, Date.now(), rollout)}\n`);
    }),
  );
}
