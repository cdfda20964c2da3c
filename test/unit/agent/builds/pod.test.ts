// A builder pod as the agent writes it (what the fence and the isolation rest on), and the
// reasons a builder pod gives for not building.
import assert from "node:assert/strict";
import { test } from "node:test";
import { builderName, newGateKey, renderBuilderPod, renderBuilderSecret } from "../../../../src/agent/builds/pod.js";
import { podProblem } from "../../../../src/agent/builds/status.js";
import type { KubeObject } from "../../../../src/kube/object.js";

const SPEC = {
  buildId: "b-42",
  builderImage: "krane.local/builder:builder",
  cpuMillicores: 2000,
  memoryMib: 1024,
  deadlineSeconds: 900,
  keyHex: newGateKey(),
};

interface Container {
  name: string;
  resources: { limits: { cpu: string; memory: string } };
  securityContext: Record<string, unknown>;
}
interface PodSpec {
  runtimeClassName: string;
  nodeSelector: Record<string, string>;
  automountServiceAccountToken: boolean;
  activeDeadlineSeconds: number;
  restartPolicy: string;
  containers: Container[];
  volumes: { name: string; secret?: { secretName: string } }[];
}

test("a builder pod runs under gVisor on untrusted nodes, without a token, bounded by the build's limits", () => {
  const pod = renderBuilderPod(SPEC);
  const spec = (pod as unknown as { spec: PodSpec }).spec;
  assert.equal(pod.metadata.namespace, "krane-builds");
  assert.equal(pod.metadata.name, "build-b-42");
  assert.equal(pod.metadata.labels?.["app.kubernetes.io/managed-by"], "krane");
  assert.equal(pod.metadata.labels?.["krane.dev/build-id"], "b-42");
  assert.equal(spec.runtimeClassName, "gvisor");
  assert.equal(spec.nodeSelector["node-class"], "untrusted");
  assert.equal(spec.automountServiceAccountToken, false);
  assert.equal(spec.restartPolicy, "Never");
  assert.equal(spec.activeDeadlineSeconds, 900);
  assert.equal(spec.containers.length, 1);
  const [builder] = spec.containers;
  assert.deepEqual(builder?.resources.limits, { cpu: "2000m", memory: "1024Mi" });
  assert.deepEqual(builder?.securityContext, { runAsUser: 0, runAsGroup: 0 }, "no privilege, no added capability");
  assert.ok(spec.volumes.some((v) => v.secret?.secretName === "build-b-42"));
  const secret = renderBuilderSecret(SPEC) as unknown as { stringData: { key: string } };
  assert.equal(secret.stringData.key, SPEC.keyHex);
});

test("each build gets its own key", () => {
  assert.notEqual(newGateKey(), newGateKey());
  assert.match(newGateKey(), /^[0-9a-f]{64}$/);
});

test("limits and ids it cannot run are refused, naming the field", () => {
  assert.throws(() => renderBuilderPod({ ...SPEC, cpuMillicores: 10 }), /cpu_millicores/);
  assert.throws(() => renderBuilderPod({ ...SPEC, memoryMib: 1.5 }), /memory_mib/);
  assert.throws(() => renderBuilderPod({ ...SPEC, deadlineSeconds: 0 }), /deadline_seconds/);
  assert.throws(() => builderName("Not/A-Name"), /cannot name a builder pod/);
});

const pod = (status: Record<string, unknown>): KubeObject =>
  ({ ...renderBuilderPod(SPEC), status }) as unknown as KubeObject;

test("a builder pod says why it will not build", () => {
  assert.equal(podProblem(pod({ phase: "Pending" })), undefined);
  assert.equal(podProblem(pod({ phase: "Running" })), undefined);
  assert.equal(
    podProblem(pod({ phase: "Failed", reason: "DeadlineExceeded" })),
    "the build ran past its time limit of 900 s: its builder pod was stopped",
  );
  assert.equal(
    podProblem(
      pod({
        phase: "Running",
        containerStatuses: [{ name: "builder", state: { terminated: { reason: "OOMKilled", exitCode: 137 } } }],
      }),
    ),
    "the build ran out of its memory limit (1024Mi): its builder pod's builder was killed",
  );
  assert.match(
    podProblem(
      pod({
        phase: "Pending",
        containerStatuses: [{ name: "builder", state: { waiting: { reason: "ErrImagePull" } } }],
      }),
    ) ?? "",
    /builder cannot start: ErrImagePull/,
  );
  assert.equal(
    podProblem(
      pod({
        phase: "Pending",
        containerStatuses: [{ name: "gate", state: { waiting: { reason: "ContainerCreating" } } }],
      }),
    ),
    undefined,
  );
});
