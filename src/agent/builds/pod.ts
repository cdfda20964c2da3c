// Pure rendering of a builder pod (a source build run on the cluster) and its key's Secret.
//
// The pod runs under gVisor on an untrusted node like user code, with no ServiceAccount token
// and no service links, restartPolicy Never and activeDeadlineSeconds from the build's time
// limit (the kubelet ends it past that, whatever the agent does). One container, the builder
// image (scripts/bases/builder-entry.sh), as the sandbox's root with the default capabilities and
// the build's CPU and memory as limits: buildkitd in user, mount, PID and network namespaces of
// its own (steps get no network), and beside it the gate (src/builds/gate.ts, as 65532 without
// capabilities), the only way in, for connections that hold the build's key.
import { randomBytes } from "node:crypto";
import { BUILDS_NAMESPACE, NODE_CLASS, onNodeClass, RUNTIME_CLASS } from "../../contracts/cluster.js";
import { BASE_USER, BUILDER_GATE_PORT, BUILDER_KEY_FILE } from "../../contracts/builds.js";
import { COMPONENT, LABEL_BUILD_ID, LABEL_COMPONENT, LABEL_MANAGED_BY, MANAGED_BY } from "../../contracts/labels.js";
import { GATE_KEY_BYTES } from "../../builds/gate.js";
import type { KubeObject } from "../../kube/object.js";

export const BUILDER_CONTAINER = "builder";

export interface BuilderPodSpec {
  /** The build's id (ctrl's): names the pod, labels it. */
  readonly buildId: string;
  /** The builder image (scripts/build-builder.sh). */
  readonly builderImage: string;
  readonly cpuMillicores: number;
  readonly memoryMib: number;
  /** The build's time limit; the pod's activeDeadlineSeconds. */
  readonly deadlineSeconds: number;
  /** The gate's key, hex (newGateKey). */
  readonly keyHex: string;
}

/** A fresh key for one build's gate. */
export function newGateKey(): string {
  return randomBytes(GATE_KEY_BYTES).toString("hex");
}

/** The pod's and Secret's name: "build-" and the id as a DNS label (ctrl's "bld_…" ids: "_" → "-"). */
export function builderName(buildId: string): string {
  const id = buildId.toLowerCase().replace(/_/g, "-");
  if (!/^[a-z0-9]([a-z0-9-]{0,55}[a-z0-9])?$/.test(id))
    throw new Error(`build id "${buildId}" cannot name a builder pod (letters, digits and "-", at most 57)`);
  return `build-${id}`;
}

export function builderLabels(buildId: string): Record<string, string> {
  return { [LABEL_MANAGED_BY]: MANAGED_BY, [LABEL_COMPONENT]: COMPONENT.builder, [LABEL_BUILD_ID]: buildId };
}

export function renderBuilderSecret(s: BuilderPodSpec): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: builderName(s.buildId), namespace: BUILDS_NAMESPACE, labels: builderLabels(s.buildId) },
    type: "Opaque",
    stringData: { key: s.keyHex },
  };
}

export function renderBuilderPod(s: BuilderPodSpec): KubeObject {
  if (!Number.isInteger(s.cpuMillicores) || s.cpuMillicores < 100)
    throw new Error(`cpu_millicores: a build needs at least 100 (got ${String(s.cpuMillicores)})`);
  if (!Number.isInteger(s.memoryMib) || s.memoryMib < 128)
    throw new Error(`memory_mib: a build needs at least 128 (got ${String(s.memoryMib)})`);
  if (!Number.isInteger(s.deadlineSeconds) || s.deadlineSeconds < 1)
    throw new Error(`deadline_seconds: must be a positive whole number (got ${String(s.deadlineSeconds)})`);
  const name = builderName(s.buildId);
  const gid = Number(BASE_USER.split(":")[1]);
  const size = { cpu: `${s.cpuMillicores}m`, memory: `${s.memoryMib}Mi` };
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: BUILDS_NAMESPACE, labels: builderLabels(s.buildId) },
    spec: {
      runtimeClassName: RUNTIME_CLASS,
      ...onNodeClass(NODE_CLASS.untrusted),
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      restartPolicy: "Never",
      activeDeadlineSeconds: s.deadlineSeconds,
      terminationGracePeriodSeconds: 5,
      // The key's file is the gate's group's to read.
      securityContext: { fsGroup: gid },
      volumes: [{ name: "key", secret: { secretName: name, defaultMode: 0o440 } }],
      containers: [
        {
          name: BUILDER_CONTAINER,
          image: s.builderImage,
          imagePullPolicy: "IfNotPresent",
          env: [{ name: "KRANE_BUILDER_KEY_FILE", value: BUILDER_KEY_FILE }],
          ports: [{ name: "gate", containerPort: BUILDER_GATE_PORT }],
          readinessProbe: { tcpSocket: { port: BUILDER_GATE_PORT }, periodSeconds: 1 },
          resources: { limits: size, requests: size },
          // The sandbox's root with the default capabilities: the entry point's user namespace
          // gives buildkitd what it needs over its own namespaces, and nothing over the pod's.
          securityContext: { runAsUser: 0, runAsGroup: 0 },
          volumeMounts: [
            { name: "key", mountPath: BUILDER_KEY_FILE.slice(0, BUILDER_KEY_FILE.lastIndexOf("/")), readOnly: true },
          ],
        },
      ],
    },
  };
}
