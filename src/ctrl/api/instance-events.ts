// InstanceEventService: an environment's instance events after a cursor (follow by calling again
// with the answer's cursor). Scoped like every public call by the workspace, project and
// environment the request names: another workspace's environment is not found.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { InstanceEventSchema, type InstanceEventService } from "../../gen/krane/ctrl/v1/events_pb.js";
import type { Store } from "../db/store.js";
import { findEnvironment } from "../domain/tenancy.js";
import { invalidArgument } from "../errors.js";
import {
  deploymentOfRevision,
  eventRegionKnown,
  latestInstanceEvents,
  listInstanceEvents,
  type InstanceEventView,
} from "../read/instance-events.js";
import { validateEnvironmentRef } from "../validate/api.js";
import * as r from "../validate/rules.js";

const LIMIT_MAX = 1000;
/** How far in the future `since` may lie (clocks of the caller and ctrl differ a little). */
const SINCE_SKEW_MS = 60_000;

/** A cursor is "e" and the position of the last event answered. */
export function parseCursor(field: string, s: string): number {
  if (s === "") return 0;
  const m = /^e(\d{1,15})$/.exec(s);
  if (!m) throw invalidArgument(field, "is not a cursor this API gave");
  return Number(m[1]);
}

export function eventMsg(e: InstanceEventView) {
  return create(InstanceEventSchema, {
    deploymentId: e.deploymentId,
    revision: BigInt(e.revision),
    region: e.region,
    instance: e.instance,
    kind: e.kind,
    reason: e.reason,
    atUnixMs: BigInt(e.atMs),
    exitCode: e.exitCode ?? undefined,
    restarts: e.restarts,
    image: e.image,
    message: e.message,
    recordedUnixMs: BigInt(e.recordedAt),
  });
}

export function instanceEventServiceImpl({ store }: { store: Store }): ServiceImpl<typeof InstanceEventService> {
  return {
    async listInstanceEvents(req) {
      const ref = validateEnvironmentRef(req);
      const revision = r.intRange("revision", req.revision, 0, Number.MAX_SAFE_INTEGER);
      const region = r.text("region", req.region, r.LIMITS.slugMax);
      const instance = r.text("instance", req.instance, 253);
      const since = r.intRange("since_unix_ms", req.sinceUnixMs, 0, Number.MAX_SAFE_INTEGER);
      if (since > Date.now() + SINCE_SKEW_MS) throw invalidArgument("since_unix_ms", "is in the future");
      const limit = req.limit === 0 ? LIMIT_MAX : r.intRange("limit", req.limit, 1, LIMIT_MAX);
      const after = parseCursor("cursor", req.cursor);
      const { environment } = await findEnvironment(store.db, ref, { includeDeleting: true });
      let deploymentId: string | undefined;
      if (revision !== 0) {
        deploymentId = await deploymentOfRevision(store.db, environment.id, revision);
        if (deploymentId === undefined)
          throw invalidArgument("revision", `environment "${environment.slug}" has no revision ${revision}`);
      }
      if (region !== "" && !(await eventRegionKnown(store.db, environment.id, region)))
        throw invalidArgument("region", `environment "${environment.slug}" has no region "${region}"`);
      const filter = {
        environmentId: environment.id,
        deploymentId,
        region: region === "" ? undefined : region,
        instance: instance === "" ? undefined : instance,
        sinceMs: since === 0 ? undefined : since,
      };
      if (req.latest) {
        const latest = await latestInstanceEvents(store.db, filter);
        return { events: latest.map(eventMsg), cursor: req.cursor, more: false };
      }
      // One more than asked tells whether more are waiting.
      const rows = await listInstanceEvents(store.db, {
        ...filter,
        afterSeq: after,
        limit: limit + 1,
      });
      const more = rows.length > limit;
      const page = more ? rows.slice(0, limit) : rows;
      const last = page.at(-1)?.seq ?? after;
      return { events: page.map(eventMsg), cursor: `e${last}`, more };
    },
  };
}
