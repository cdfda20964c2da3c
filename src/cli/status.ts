// `krane status <project/env>`: an environment's deployments with their instances per region,
// each instance's last event, its sentinels, the clusters of its regions and its rollout, as a
// table (status-view.ts) or as JSON (the StatusService answer plus "rollout" and
// "lastInstanceEvents").
//
// The table is read with the light JSON client (json-call.ts), which starts in a fraction of the
// time the Connect client takes; it is the form people run by hand and in watch loops. `-o json`
// goes through the Connect client, whose JSON has every field, defaults included, as every
// other command's `-o json` has.
import type { Command } from "commander";
import { EXIT_UNAVAILABLE } from "./exit-codes.js";
import { splitTarget, userAction, withConnection, type ConnectionFlags } from "./command.js";
import type {
  GetEnvironmentStatusRequestJson,
  GetEnvironmentStatusResponseJson,
  ListWorkspacesRequestJson,
  ListWorkspacesResponseJson,
} from "../gen/krane/ctrl/v1/api_pb.js";
import type { ListInstanceEventsRequestJson, ListInstanceEventsResponseJson } from "../gen/krane/ctrl/v1/events_pb.js";
import type { GetRolloutStatusRequestJson, GetRolloutStatusResponseJson } from "../gen/krane/ctrl/v1/rollout_pb.js";

export function registerStatusCommand(program: Command): void {
  const json = userAction(async (x, target: string) => {
    const ref = { workspace: await x.ctrl.workspace(), ...splitTarget(target) };
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
    await statusTable(target, flags);
  });
}

/** The status as tables, read with the JSON client. */
async function statusTable(target: string, flags: ConnectionFlags): Promise<void> {
  const [{ JsonCtrl, CallError }, { isOutageCode, only }, view] = await Promise.all([
    import("./json-call.js"),
    import("./calls.js"),
    import("./status-view.js"),
  ]);
  const envRef = splitTarget(target);
  const ctrl = new JsonCtrl(flags);
  try {
    const workspace =
      flags.workspace ??
      only(
        (
          await ctrl.call<ListWorkspacesResponseJson>("krane.ctrl.v1.WorkspaceService", "ListWorkspaces", {
            pageSize: 2,
          } satisfies ListWorkspacesRequestJson)
        ).workspaces ?? [],
      );
    const ref = { workspace, ...envRef } satisfies GetEnvironmentStatusRequestJson & GetRolloutStatusRequestJson;
    const [status, { status: rollout }, { events }] = await Promise.all([
      ctrl.call<GetEnvironmentStatusResponseJson>("krane.ctrl.v1.StatusService", "GetEnvironmentStatus", ref),
      ctrl.call<GetRolloutStatusResponseJson>("krane.ctrl.v1.RolloutService", "GetRolloutStatus", ref),
      ctrl.call<ListInstanceEventsResponseJson>("krane.ctrl.v1.InstanceEventService", "ListInstanceEvents", {
        ...ref,
        latest: true,
      } satisfies ListInstanceEventsRequestJson),
    ]);
    process.stdout.write(`${view.renderEnvironmentStatus(status, Date.now(), rollout, events)}\n`);
  } catch (err) {
    if (!(err instanceof CallError)) throw err;
    if (isOutageCode(err.code, err.rawMessage)) process.exitCode = EXIT_UNAVAILABLE;
    throw new Error(err.message);
  } finally {
    ctrl.close();
  }
}
