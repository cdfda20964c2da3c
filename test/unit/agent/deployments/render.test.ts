import { test } from "node:test";
import assert from "node:assert/strict";
import { clone, create, type DescField } from "@bufbuild/protobuf";
import {
  ApplyDeploymentSchema,
  EnvVarSchema,
  HealthCheckSchema,
  type ApplyDeployment,
  type HealthCheck,
} from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { networkPolicyName, renderDeployment, renderReplicaSet } from "../../../../src/agent/deployments/render.js";
import { validateApplyDeployment } from "../../../../src/agent/deployments/validate.js";
import { sampleDeployment } from "./fixtures.js";

const REGION = "local";

// Fields that do not show up in the ReplicaSet on purpose, and where they go instead.
const renderedElsewhere: Record<string, string> = {
  region: "validated against the agent's region (a mismatch is rejected); the agent's own region is rendered",
};

/** A different, still valid value for one field of the message. */
function mutate(d: ApplyDeployment, field: DescField): ApplyDeployment {
  const copy = create(ApplyDeploymentSchema, { ...d });
  const rec = copy as unknown as Record<string, unknown>;
  const name = field.localName;
  const v = rec[name];
  if (field.fieldKind === "list") {
    if (field.listKind === "message")
      rec[name] = [...(v as unknown[]), create(EnvVarSchema, { name: "EXTRA", value: "1" })];
    else rec[name] = [...(v as string[]), "extra"];
  } else if (field.fieldKind === "message") {
    throw new Error("handled separately");
  } else if (name === "protocol") {
    rec[name] = v === "grpc" ? "h2c" : "grpc";
  } else if (typeof v === "string") {
    rec[name] = name === "k8sNamespace" || name === "k8sName" ? `${v}-x` : `${v}x`;
  } else if (typeof v === "number") {
    rec[name] = v + 1;
  } else if (typeof v === "bigint") {
    rec[name] = v + 1n;
  }
  return copy;
}

/** Changes of each settings message that must reach the ReplicaSet (names the pods read by). */
function settingsVariants(name: string): Partial<ApplyDeployment>[] {
  const base = sampleDeployment();
  switch (name) {
    case "config":
      return [{ config: { ...base.config, configMapName: "other-config" } as ApplyDeployment["config"] }];
    case "secrets":
      return [{ secrets: { ...base.secrets, secretName: "other-secrets" } as ApplyDeployment["secrets"] }];
    case "external_secrets":
      return [
        {
          externalSecrets: {
            ...base.externalSecrets,
            secretProviderClassName: "other-external",
          } as ApplyDeployment["externalSecrets"],
        },
      ];
    case "pull_secret":
      // The pods name the Secret; the ReplicaSet carries the version (a new one is a change to apply).
      return [
        { pullSecret: { ...base.pullSecret, secretName: "other-pull" } as ApplyDeployment["pullSecret"] },
        { pullSecret: { ...base.pullSecret, version: "fedcba9876543210" } as ApplyDeployment["pullSecret"] },
      ];
    case "workspace_quota":
      // The namespace's ResourceQuota (quota.ts, tested there); the ReplicaSet carries what it holds.
      return [
        { workspaceQuota: { ...base.workspaceQuota, cpuMillicores: 1n } as ApplyDeployment["workspaceQuota"] },
        { workspaceQuota: { ...base.workspaceQuota, memoryMib: 1n } as ApplyDeployment["workspaceQuota"] },
        { workspaceQuota: { ...base.workspaceQuota, instances: 1n } as ApplyDeployment["workspaceQuota"] },
        { workspaceQuota: undefined },
      ];
    default:
      throw new Error(`no variants for message field ${name}: add them`);
  }
}

test("field coverage: every ApplyDeployment field reaches the rendered ReplicaSet", () => {
  const base = sampleDeployment();
  assert.equal(validateApplyDeployment(base, REGION, true), undefined);
  const baseJson = JSON.stringify(renderReplicaSet(base, REGION));
  const missing: string[] = [];
  for (const field of ApplyDeploymentSchema.fields) {
    if (field.name in renderedElsewhere) continue;
    if (field.fieldKind === "message" && field.name !== "health_check") {
      // A revision's settings reach the pod template by object name (the ConfigMap,
      // Secret and SecretProviderClass themselves are settings.ts's, tested there): a change of
      // any of their fields changes the ReplicaSet.
      for (const variant of settingsVariants(field.name)) {
        const changed = JSON.stringify(renderReplicaSet(sampleDeployment(variant), REGION));
        if (changed === baseJson)
          missing.push(
            `${field.name} (${JSON.stringify(variant, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v))})`,
          );
      }
      continue;
    }
    if (field.fieldKind === "message") {
      // Every field of the nested message must reach it too.
      for (const sub of HealthCheckSchema.fields) {
        const hc = clone(HealthCheckSchema, base.healthCheck as HealthCheck);
        const r = hc as unknown as Record<string, unknown>;
        const v = r[sub.localName];
        r[sub.localName] = sub.localName === "method" ? "POST" : typeof v === "string" ? `${v}x` : (v as number) + 1;
        const changed = JSON.stringify(renderReplicaSet(sampleDeployment({ healthCheck: hc }), REGION));
        if (changed === baseJson) missing.push(`${field.name}.${sub.name}`);
      }
      continue;
    }
    const changed = JSON.stringify(renderReplicaSet(mutate(base, field), REGION));
    if (changed === baseJson) missing.push(field.name);
  }
  assert.deepEqual(missing, [], `fields that do not reach the ReplicaSet: ${missing.join(", ")}`);
  for (const name of Object.keys(renderedElsewhere)) {
    assert.ok(
      ApplyDeploymentSchema.fields.some((f) => f.name === name),
      `stale entry in renderedElsewhere: ${name}`,
    );
  }
});

interface Rs {
  metadata: { name: string; namespace: string; labels: Record<string, string> };
  spec: {
    replicas: number;
    minReadySeconds?: number;
    selector: { matchLabels: Record<string, string> };
    template: {
      metadata: { labels: Record<string, string> };
      spec: {
        runtimeClassName: string;
        automountServiceAccountToken: boolean;
        enableServiceLinks: boolean;
        nodeSelector: Record<string, string>;
        tolerations: Array<Record<string, string>>;
        topologySpreadConstraints: Array<{ maxSkew: number; topologyKey: string }>;
        affinity: {
          podAffinity: {
            preferredDuringSchedulingIgnoredDuringExecution: Array<{
              podAffinityTerm: { labelSelector: { matchLabels: Record<string, string> } };
            }>;
          };
        };
        containers: Array<{
          image: string;
          command?: string[];
          args?: string[];
          ports: Array<{ containerPort: number }>;
          env: Array<{ name: string; value?: string; valueFrom?: unknown }>;
          resources: { limits: Record<string, string>; requests: Record<string, string> };
          readinessProbe?: { httpGet: { path: string; port: number }; periodSeconds: number };
          livenessProbe?: unknown;
        }>;
      };
    };
  };
}

test("the ReplicaSet has the isolation, scheduling, resources and env krane promises", () => {
  const rs = renderReplicaSet(sampleDeployment(), REGION) as unknown as Rs;
  assert.equal(rs.metadata.name, "dep-1");
  assert.equal(rs.metadata.namespace, "ws-1");
  assert.deepEqual(rs.metadata.labels, {
    "app.kubernetes.io/managed-by": "krane",
    "app.kubernetes.io/component": "deployment",
    "krane.dev/region": "local",
    "krane.dev/workspace-id": "ws_1",
    "krane.dev/project-id": "proj_1",
    "krane.dev/environment-id": "env_1",
    "krane.dev/deployment-id": "dep_1",
    "krane.dev/build-id": "build_9",
  });
  assert.deepEqual(rs.spec.selector.matchLabels, { "krane.dev/deployment-id": "dep_1", "krane.dev/region": "local" });
  assert.equal(rs.spec.replicas, 3);
  assert.equal(rs.spec.minReadySeconds, 15);
  const pod = rs.spec.template.spec;
  assert.deepEqual(rs.spec.template.metadata.labels, rs.metadata.labels);
  assert.equal(pod.runtimeClassName, "gvisor");
  assert.equal(pod.automountServiceAccountToken, false);
  assert.equal(pod.enableServiceLinks, false);
  assert.deepEqual(pod.nodeSelector, { "node-class": "untrusted" });
  assert.deepEqual(pod.tolerations, [
    { key: "node-class", operator: "Equal", value: "untrusted", effect: "NoSchedule" },
  ]);
  assert.equal(pod.topologySpreadConstraints[0]?.maxSkew, 1);
  assert.equal(pod.topologySpreadConstraints[0]?.topologyKey, "topology.kubernetes.io/zone");
  assert.deepEqual(
    pod.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]?.podAffinityTerm.labelSelector
      .matchLabels,
    {
      "krane.dev/environment-id": "env_1",
      "app.kubernetes.io/component": "sentinel",
    },
  );
  const c = pod.containers[0];
  assert.ok(c);
  assert.equal(c.image, "ghcr.io/acme/web:1.2.3");
  assert.deepEqual(c.command, ["/bin/web"]);
  assert.deepEqual(c.args, ["--listen", ":8080"]);
  assert.equal(c.ports[0]?.containerPort, 8080);
  assert.deepEqual(c.resources, {
    limits: { cpu: "500m", memory: "256Mi" },
    requests: { cpu: "250m", memory: "128Mi" },
  });
  const env = new Map(c.env.map((e) => [e.name, e.value ?? e.valueFrom]));
  assert.equal(env.get("PORT"), "8080");
  assert.equal(env.get("KRANE_DEPLOYMENT_ID"), "dep_1");
  assert.equal(env.get("KRANE_ENVIRONMENT_SLUG"), "production");
  assert.equal(env.get("KRANE_REGION"), "local");
  assert.deepEqual(env.get("KRANE_INSTANCE_ID"), { fieldRef: { apiVersion: "v1", fieldPath: "metadata.name" } });
  assert.equal(env.get("GREETING"), "hello");
  assert.equal(c.readinessProbe?.httpGet.path, "/health");
  assert.equal(c.readinessProbe?.httpGet.port, 8080);
  assert.equal(c.readinessProbe?.periodSeconds, 10);
  assert.ok(c.livenessProbe);
});

test("empty command/args/health check render nothing (no empty lists to drift on)", () => {
  const rs = renderReplicaSet(
    sampleDeployment({ command: [], args: [], healthCheck: undefined, buildId: "", minReadySeconds: 0 }),
    REGION,
  ) as unknown as Rs;
  const c = rs.spec.template.spec.containers[0];
  assert.ok(c);
  assert.equal(c.command, undefined);
  assert.equal(c.args, undefined);
  assert.equal(c.readinessProbe, undefined);
  assert.equal(rs.spec.minReadySeconds, undefined);
  assert.equal(rs.metadata.labels["krane.dev/build-id"], undefined);
  // Requests never round down to zero.
  const tiny = renderReplicaSet(sampleDeployment({ cpuMillicores: 1n, memoryMib: 1n }), REGION) as unknown as Rs;
  assert.deepEqual(tiny.spec.template.spec.containers[0]?.resources.requests, { cpu: "1m", memory: "1Mi" });
});

test("the network policy is per environment and region, admitting only that environment's sentinels", () => {
  const { networkPolicy } = renderDeployment(sampleDeployment(), REGION);
  const other = renderDeployment(sampleDeployment({ deploymentId: "dep_2", k8sName: "dep-2" }), REGION).networkPolicy;
  assert.deepEqual(other, networkPolicy, "two deployments of one environment share one policy");
  assert.equal(networkPolicy.metadata.name, networkPolicyName("env_1", "local"));
  assert.match(networkPolicy.metadata.name ?? "", /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
  const spec = networkPolicy.spec as {
    endpointSelector: { matchLabels: Record<string, string> };
    ingress: Array<{ fromEndpoints: Array<{ matchLabels: Record<string, string> }> }>;
  };
  assert.equal(spec.endpointSelector.matchLabels["krane.dev/environment-id"], "env_1");
  assert.deepEqual(spec.ingress[0]?.fromEndpoints[0]?.matchLabels, {
    "k8s:io.kubernetes.pod.namespace": "sentinel",
    "app.kubernetes.io/component": "sentinel",
    "krane.dev/environment-id": "env_1",
  });
  assert.notEqual(networkPolicyName("env_1", "a"), networkPolicyName("env_1", "b"));
});
