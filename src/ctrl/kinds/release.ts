// The release kind's descriptor: its stream and the rules of its
// agents' reports (an update is, per region, the version observed and each object's health),
// which ../domain/releases.ts records. Its payloads are ../payloads/release.ts.
import {
  ObjectHealth,
  ReleaseStateSchema,
  type ReportReleaseStatusRequest_Update,
  ReportReleaseStatusRequestSchema,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { recordReleaseReport, type ObjectHealthName } from "../domain/releases.js";
import { releasePayloads } from "../payloads/release.js";
import { oneLine } from "../validate/cluster.js";
import * as r from "../validate/rules.js";
import { streamedKind } from "./kind.js";

const OBJECT_HEALTH: Record<number, ObjectHealthName> = {
  [ObjectHealth.UNSPECIFIED]: "unknown",
  [ObjectHealth.PROGRESSING]: "progressing",
  [ObjectHealth.HEALTHY]: "healthy",
  [ObjectHealth.DEGRADED]: "degraded",
  [ObjectHealth.SUSPENDED]: "suspended",
  [ObjectHealth.KIND_MISSING]: "kind-missing",
  [ObjectHealth.REFUSED]: "refused",
};

/** The update's own fields: the version observed and each object's health. */
function checkUpdate(u: ReportReleaseStatusRequest_Update) {
  r.list("update.objects", u.objects, 1000);
  return {
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
        health: r.enumName(`${f}.health`, o.health, OBJECT_HEALTH, "object health"),
        message: r.text(`${f}.message`, oneLine(o.message), r.LIMITS.reasonMax),
      };
    }),
  };
}

// ---------------------------------------------------------------- descriptor

export const releaseKind = streamedKind({
  name: releasePayloads.name,
  idPrefix: "rel",
  wire: { state: ReleaseStateSchema, apply: releasePayloads.apply, delete: releasePayloads.delete },
  report: {
    message: ReportReleaseStatusRequestSchema,
    key: "releaseId",
    byK8sName: false,
    update: checkUpdate,
    record: recordReleaseReport,
  },
});
