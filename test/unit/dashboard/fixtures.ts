// An environment's live view as ctrl would push it, for the environment page's tests: three
// revisions of acme/shop/production, a canary rolling back to r2 (its target: r2, though r3 is
// newer), instances in two regions with their last events, a sentinel, configuration and a secret.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  DeploymentStatusSchema,
  type DeploymentSchema,
  type DeploymentStatus,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { InstanceStatus } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { EnvironmentViewSchema, type EnvironmentView } from "../../../src/gen/krane/ctrl/v1/live_pb.js";

export const PROD = { workspace: "acme", project: "shop", environment: "production" };
export const NOW = 1_800_000_000_000;

function deployment(
  rev: number,
  image: string,
  over: MessageInitShape<typeof DeploymentSchema> = {},
): DeploymentStatus {
  return create(DeploymentStatusSchema, {
    deployment: {
      id: `dep-${rev}`,
      revision: BigInt(rev),
      image,
      port: 8080,
      createdAtUnixMs: BigInt(NOW - rev * 60_000),
      ...over,
    },
    regions: [
      {
        region: "eu-west",
        desiredReplicas: 2,
        runningInstances: rev === 2 ? 2 : 0,
        instances:
          rev === 2
            ? [
                { k8sName: "web-a", status: InstanceStatus.RUNNING, nodeName: "node-1" },
                { k8sName: "web-b", status: InstanceStatus.FAILED, nodeName: "node-2" },
              ]
            : [],
      },
    ],
  });
}

/** The view, with `over`'s fields in place of the fixture's. */
export function environmentView(over: Partial<EnvironmentView> = {}): EnvironmentView {
  const view = create(EnvironmentViewSchema, {
    status: {
      environment: {
        slug: "production",
        regions: [
          { region: "eu-west", replicas: 2 },
          { region: "us-east", replicas: 1 },
        ],
        rollout: {
          progressive: {
            canary: {
              steps: [
                { step: { case: "setWeight", value: 20 } },
                { step: { case: "pause", value: { seconds: 0 } } },
                { step: { case: "analysis", value: {} } },
                { step: { case: "pause", value: { seconds: 30 } } },
              ],
            },
          },
        },
      },
      deployments: [
        deployment(1, "registry.example.com/shop:1.0"),
        deployment(3, "registry.example.com/shop:3.0", {
          env: [{ name: "B" }, { name: "A" }],
          config: [{ name: "LOG_LEVEL", value: "debug" }],
          secretKeys: ["API_KEY"],
        }),
        deployment(2, "registry.example.com/shop:2.0", { command: ["node"], args: ["server.js"] }),
      ],
      sentinels: [
        {
          sentinelId: "s1",
          region: "eu-west",
          desiredReplicas: 1,
          availableReplicas: 1,
          address: "10.1.1.1:8443",
          routingVersion: 5n,
          servedRoutingVersion: 4n,
        },
      ],
      clusters: [{ id: "c1", region: "eu-west", name: "eu-1", changesBehind: 3n }],
    },
    rollout: {
      strategy: "Canary",
      regions: [
        {
          region: "eu-west",
          targetDeploymentId: "dep-2",
          replicas: 2,
          updatedReplicas: 1,
          readyReplicas: 1,
          availableReplicas: 1,
          message: "1 of 2 updated",
          events: [
            { atUnixMs: BigInt(NOW - 5_000), type: "Warning", reason: "StepFailed", message: "analysis failed" },
          ],
        },
        { region: "us-east", targetDeploymentId: "dep-2", complete: true },
      ],
      progressive: {
        strategy: "Canary",
        phase: "Progressing",
        step: 2,
        steps: 4,
        stepName: "pause",
        canaryDeploymentId: "dep-2",
        weights: [
          {
            region: "eu-west",
            weights: [
              { deploymentId: "dep-3", weight: 80 },
              { deploymentId: "dep-2", weight: 20 },
            ],
          },
        ],
        lastAnalysis: "fail",
        lastAnalysisReason: "success rate 90.0 % < 99 %",
        lastAnalysisUnixMs: BigInt(NOW - 60_000),
      },
    },
    latestEvents: [
      {
        deploymentId: "dep-2",
        region: "eu-west",
        instance: "web-b",
        kind: "terminated",
        reason: "OOMKilled",
        exitCode: 137,
        atUnixMs: BigInt(NOW - 120_000),
        message: "the container ran out of memory",
      },
    ],
    verdictMeasurements: [
      {
        deploymentId: "dep-2",
        role: "canary",
        requests: 100n,
        responses5xx: 10n,
        successRatePercent: 90,
        p50Ms: 5,
        p99Ms: -1,
      },
    ],
    config: [{ key: "LOG_LEVEL", value: "debug", updatedAtUnixMs: BigInt(NOW - 1_000) }],
    secrets: [{ key: "API_KEY", source: "value" }],
  });
  return Object.assign(view, over);
}
