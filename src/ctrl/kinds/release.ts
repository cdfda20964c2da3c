// The release kind's descriptor: its stream, its ClusterService methods, and the validation of
// its agents' reports (per region, the version observed and each object's health, or a
// rejection), which ../domain/releases.ts records. Its payloads are ../payloads/release.ts.
import { create } from "@bufbuild/protobuf";
import {
  GetDesiredReleaseStatesResponseSchema,
  ObjectHealth,
  ReleaseStateSchema,
  type ReportReleaseStatusRequest,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { recordReleaseReport, type ObjectHealthName, type ReleaseReport } from "../domain/releases.js";
import { invalidArgument } from "../errors.js";
import { releasePayloads } from "../payloads/release.js";
import * as r from "../validate/rules.js";
import type { Kind } from "./kind.js";

export function healthName(field: string, h: ObjectHealth): ObjectHealthName {
  switch (h) {
    case ObjectHealth.UNSPECIFIED:
      return "unknown";
    case ObjectHealth.PROGRESSING:
      return "progressing";
    case ObjectHealth.HEALTHY:
      return "healthy";
    case ObjectHealth.DEGRADED:
      return "degraded";
    case ObjectHealth.SUSPENDED:
      return "suspended";
    case ObjectHealth.KIND_MISSING:
      return "kind-missing";
    case ObjectHealth.REFUSED:
      return "refused";
    default:
      throw invalidArgument(field, "is not a known object health");
  }
}

/** Messages from the API server may span lines; status keeps them on one. */
function oneLine(s: string): string {
  // eslint-disable-next-line no-control-regex
  return s.replace(/[\u0000-\u001f\u007f]+/g, " ");
}

export function validateReleaseReport(req: ReportReleaseStatusRequest): ReleaseReport {
  const c = req.change;
  switch (c.case) {
    case "update": {
      const u = c.value;
      r.list("update.objects", u.objects, 1000);
      return {
        type: "update",
        id: r.id("update.release_id", u.releaseId, "rel"),
        version: r.intRange("update.version", u.version, 0, Number.MAX_SAFE_INTEGER),
        objects: u.objects.map((o, i) => {
          const f = `update.objects[${i}]`;
          return {
            id: r.text(`${f}.id`, o.id, 600, true),
            group: r.text(`${f}.kind.group`, o.kind?.group ?? "", 253),
            version: r.text(`${f}.kind.version`, o.kind?.version ?? "", 64),
            kind: r.text(`${f}.kind.kind`, o.kind?.kind ?? "", 63, true),
            namespace: r.text(`${f}.namespace`, o.namespace, 63),
            name: r.text(`${f}.name`, o.name, 253, true),
            health: healthName(`${f}.health`, o.health),
            message: r.text(`${f}.message`, oneLine(o.message), r.LIMITS.reasonMax),
          };
        }),
      };
    }
    case "delete":
      return { type: "delete", id: r.id("delete.release_id", c.value.releaseId, "rel") };
    case "rejected":
      return {
        type: "rejected",
        id: r.id("rejected.release_id", c.value.releaseId, "rel"),
        reason: r.text("rejected.reason", oneLine(c.value.reason), r.LIMITS.reasonMax, true),
      };
    default:
      throw invalidArgument("change", "is required (update, delete or rejected)");
  }
}

// ---------------------------------------------------------------- descriptor

export const releaseKind: Kind<typeof ReleaseStateSchema, ReleaseReport> = {
  name: releasePayloads.name,
  idPrefix: "rel",
  wire: { state: ReleaseStateSchema, apply: releasePayloads.apply, delete: releasePayloads.delete },
  recordReport: recordReleaseReport,
  subject: (report) => ({ id: report.id, k8sName: "" }),
  methods: (h) => ({
    watchReleases: (req, ctx) => h.watch(req, ctx),
    getDesiredReleaseState: (req, ctx) => h.getOne(req, "release_id", req.releaseId, ctx),
    getDesiredReleaseStates: async (req, ctx) =>
      create(GetDesiredReleaseStatesResponseSchema, await h.getMany(req, "release_ids", req.releaseIds, ctx)),
    reportReleaseStatus: async (req, ctx) => {
      await h.report(req, () => validateReleaseReport(req), ctx);
      return {};
    },
  }),
};
