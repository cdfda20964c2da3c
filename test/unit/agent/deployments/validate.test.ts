import { test } from "node:test";
import assert from "node:assert/strict";
import { validateApplyDeployment } from "../../../../src/agent/deployments/validate.js";
import { sampleDeployment } from "./fixtures.js";

test("a complete deployment is valid", () => {
  assert.equal(validateApplyDeployment(sampleDeployment(), "local", true), undefined);
});

test("invalid deployments are refused with a reason naming the field", () => {
  const cases: Array<[Parameters<typeof sampleDeployment>[0], RegExp]> = [
    [{ workspaceId: "" }, /workspace_id is required/],
    [{ projectId: "" }, /project_id is required/],
    [{ environmentId: "" }, /environment_id is required/],
    [{ deploymentId: "" }, /deployment_id is required/],
    [{ k8sNamespace: "" }, /k8s_namespace is required/],
    [{ k8sName: "" }, /k8s_name is required/],
    [{ image: "" }, /image is required/],
    [{ replicas: -1 }, /replicas must be >= 0/],
    [{ cpuMillicores: 0n }, /cpu_millicores must be > 0/],
    [{ memoryMib: 0n }, /memory_mib must be > 0/],
    [{ port: 0 }, /port must be between 1 and 65535/],
    [{ port: 70000 }, /port/],
    [{ k8sName: "Not_A_Label" }, /k8s_name .* DNS label/],
    [{ k8sNamespace: "kube-system" }, /reserved/],
    [{ k8sNamespace: "sentinel" }, /reserved/],
    [{ region: "elsewhere" }, /region "elsewhere" does not match/],
    [{ deploymentId: "has space" }, /label value/],
    [{ env: [{ $typeName: "krane.ctrl.v1.EnvVar", name: "PORT", value: "1" }] }, /reserved/],
    [
      {
        env: [
          { $typeName: "krane.ctrl.v1.EnvVar", name: "A", value: "1" },
          { $typeName: "krane.ctrl.v1.EnvVar", name: "A", value: "2" },
        ],
      },
      /twice/,
    ],
  ];
  for (const [overrides, reason] of cases) {
    const r = validateApplyDeployment(sampleDeployment(overrides), "local", true);
    assert.match(
      r ?? "(valid)",
      reason,
      JSON.stringify(overrides, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v)),
    );
  }
});

test("replicas 0 is valid (scaled to zero)", () => {
  assert.equal(validateApplyDeployment(sampleDeployment({ replicas: 0 }), "local", true), undefined);
});

test("external secrets need the cluster's store; settings keys must be usable environment variable names", () => {
  const reason = validateApplyDeployment(sampleDeployment(), "local", false);
  assert.match(reason ?? "", /external store/);
  assert.equal(validateApplyDeployment(sampleDeployment({ externalSecrets: undefined }), "local", false), undefined);
  for (const bad of ["1X", "PORT", "KRANE_ID", "A-B", ""]) {
    assert.match(
      validateApplyDeployment(
        sampleDeployment({ config: { configMapName: "c", values: [{ name: bad, value: "v" }] } as never }),
        "local",
        true,
      ) ?? "",
      /config key/,
    );
    assert.match(
      validateApplyDeployment(
        sampleDeployment({ secrets: { secretName: "s", keys: [bad] } as never }),
        "local",
        true,
      ) ?? "",
      /secret key/,
    );
  }
  assert.match(
    validateApplyDeployment(
      sampleDeployment({ secrets: { secretName: "Not_A_Name", keys: ["A"] } as never }),
      "local",
      true,
    ) ?? "",
    /secret_name/,
  );
});
