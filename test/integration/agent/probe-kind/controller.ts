// The probe kind's agent side: a kind that exists only in the tests, written the way
// src/agent/README.md says a kind is added (its messages, this folder, one registration line),
// to show that the runtime asks for nothing more. Key = probe id.
//   owns    one ConfigMap per probe in the probe's namespace, holding its value
// reconcile(key): the ConfigMap (applied only when the cache shows it differs), then the value the
// cluster holds as its status; a deleted probe's ConfigMap is deleted. A value over 63 characters
// is refused before anything is applied.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import {
  ProbeService,
  ProbeStateSchema,
  ReportProbeStatusRequestSchema,
  type ApplyProbe,
  type DeleteProbe,
  type ProbeState,
  type ReportProbeStatusRequest,
} from "../../../gen/krane/probe/v1/probe_pb.js";
import { LABEL_MANAGED_BY, LABEL_REGION, MANAGED_BY } from "../../../../src/contracts/labels.js";
import type { KubeObject } from "../../../../src/kube/object.js";
import { resources } from "../../../../src/kube/resources.js";
import { controller } from "../../../../src/agent/runtime/builder.js";
import { kind, type KindRegistration } from "../../../../src/agent/runtime/kind.js";
import { serviceProtocol } from "../../../../src/agent/runtime/kstate.js";

export const LABEL_PROBE_ID = "test.krane.dev/probe-id";

export function probeKeyOf(obj: KubeObject): string | undefined {
  return obj.metadata.labels?.[LABEL_PROBE_ID];
}

function probeName(id: string): string {
  return `probe-${id}`;
}

/** The registration line: the probe kind talking to `service` (the test's own ctrl side). */
export function probes(service: Client<typeof ProbeService>): KindRegistration {
  return kind(({ region }) => {
    const report = (
      change: MessageInitShape<typeof ReportProbeStatusRequestSchema>["change"],
    ): ReportProbeStatusRequest => create(ReportProbeStatusRequestSchema, { region, change });
    return controller<ProbeState, ApplyProbe, DeleteProbe, ReportProbeStatusRequest>("probes")
      .protocol(
        serviceProtocol(ProbeService, service, region, {
          state: ProbeStateSchema,
          report: ReportProbeStatusRequestSchema,
          key: "probeId",
        }),
      )
      .owns(resources.configMaps, {
        keyOf: probeKeyOf,
        refOf: (cm) => ({
          $typeName: "krane.probe.v1.DeleteProbe",
          probeId: probeKeyOf(cm) ?? "",
          k8sNamespace: cm.metadata.namespace ?? "",
        }),
      })
      .reconciler({
        validate: (p) => (p.value.length > 63 ? "value: longer than 63 characters" : undefined),
        validateDelete: () => undefined,
        render: (p) => [
          {
            apiVersion: "v1",
            kind: "ConfigMap",
            metadata: {
              name: probeName(p.probeId),
              namespace: p.k8sNamespace,
              labels: { [LABEL_MANAGED_BY]: MANAGED_BY, [LABEL_REGION]: region, [LABEL_PROBE_ID]: p.probeId },
            },
            data: { value: p.value },
          },
        ],
        async reconcile(key, want, ctx, signal) {
          if (want.type === "delete") {
            await ctx.kube.delete(resources.configMaps, want.ref.k8sNamespace, probeName(key), signal);
            return ctx.deleted(key, want, signal);
          }
          const result = await ctx.sync(key, want.rendered, signal, async () => {
            for (const obj of want.rendered)
              if (!ctx.isCurrent(obj)) await ctx.apply(resources.configMaps, obj, signal);
          });
          if (result.type !== "done") return result;
          ctx.report(key, () => {
            const cm = ctx.primaryOf(key);
            if (!cm) return undefined;
            const value = (cm as KubeObject & { data?: Record<string, string> }).data?.["value"] ?? "";
            return {
              fingerprint: value,
              report: report({ case: "update", value: { probeId: key, observedValue: value } }),
            };
          });
          return result;
        },
      })
      .build();
  });
}
