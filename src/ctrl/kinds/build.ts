// The build kind's descriptor (`ctrl serve --builds-in cluster`): its stream, and its agents'
// reports, of which only a rejection means something (the build fails with the reason,
// ../domain/builds.ts). A build's log and outcome come with ReportBuildProgress
// (../cluster-service/builds.ts). Its payloads are ../payloads/build.ts.
import { BuildStateSchema, ReportBuildStatusRequestSchema } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { recordBuildReport } from "../domain/builds.js";
import { buildPayloads } from "../payloads/build.js";
import { streamedKind } from "./kind.js";

export const buildKind = streamedKind({
  name: buildPayloads.name,
  idPrefix: "bld",
  wire: { state: BuildStateSchema, apply: buildPayloads.apply, delete: buildPayloads.delete },
  report: {
    message: ReportBuildStatusRequestSchema,
    key: "buildId",
    byK8sName: false,
    update: () => ({}),
    record: recordBuildReport,
  },
});
