// `krane status` in table form: the environment's status, its rollout and its instances' last
// events read with the light JSON client (json-call.ts) and drawn by status-view.ts. status.ts
// loads this module when the command runs. The build bundles it, with cli-table3, into one
// module (dist/cli/status-table.js). Measured: a script that only draws a table took 22 ms more
// than `node -e ''` loading cli-table3 as CommonJS modules one by one, 9 ms with it bundled;
// `krane status` went from 120–125 to 115–117 ms.
import { CallError, JsonCtrl } from "./json-call.js";
import { isOutageCode, only } from "./calls.js";
import type { ConnectionFlags } from "./user-client.js";
import { EXIT_UNAVAILABLE } from "./exit-codes.js";
import { renderEnvironmentStatus } from "./status-view.js";
import type {
  GetEnvironmentStatusRequestJson,
  GetEnvironmentStatusResponseJson,
  ListWorkspacesRequestJson,
  ListWorkspacesResponseJson,
} from "../gen/krane/ctrl/v1/api_pb.js";
import type { ListInstanceEventsRequestJson, ListInstanceEventsResponseJson } from "../gen/krane/ctrl/v1/events_pb.js";
import type { GetRolloutStatusRequestJson, GetRolloutStatusResponseJson } from "../gen/krane/ctrl/v1/rollout_pb.js";

/** The status as tables, read with the JSON client. */
export async function statusTable(
  envRef: { project: string; environment: string },
  flags: ConnectionFlags,
): Promise<void> {
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
    process.stdout.write(`${renderEnvironmentStatus(status, Date.now(), rollout, events)}\n`);
  } catch (err) {
    if (!(err instanceof CallError)) throw err;
    if (isOutageCode(err.code, err.rawMessage)) process.exitCode = EXIT_UNAVAILABLE;
    throw new Error(err.message);
  } finally {
    ctrl.close();
  }
}
