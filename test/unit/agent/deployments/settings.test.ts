// A revision's configuration and secrets in the cluster (src/agent/deployments/settings.ts):
// immutable objects named as ctrl says, labelled with the revision, read by the pods with envFrom;
// external secrets as a SecretProviderClass with the cluster's provider, mounted read-only.
import { test } from "node:test";
import assert from "node:assert/strict";
import { deploymentLabels, renderReplicaSet } from "../../../../src/agent/deployments/render.js";
import {
  CSI_DRIVER,
  EXTERNAL_SECRETS_MOUNT,
  renderConfigMap,
  renderSecret,
  renderSecretProviderClass,
  secretNameOfReplicaSet,
  settingsPodParts,
} from "../../../../src/agent/deployments/settings.js";
import { LABEL_DEPLOYMENT_ID } from "../../../../src/contracts/labels.js";
import { sampleDeployment } from "./fixtures.js";

test("the ConfigMap and Secret are immutable, labelled with their revision, and hold the values", () => {
  const d = sampleDeployment();
  const labels = deploymentLabels(d, "local");
  const cm = renderConfigMap(d.config!, d.k8sNamespace, labels);
  assert.equal(cm.immutable, true);
  assert.deepEqual(cm.data, { LOG_LEVEL: "debug" });
  assert.equal(cm.metadata.labels?.[LABEL_DEPLOYMENT_ID], d.deploymentId);
  const secret = renderSecret(d.secrets!, d.k8sNamespace, labels, [
    { key: "DB_PASSWORD", value: Buffer.from("s3cr3t\nline two") },
  ]);
  assert.equal(secret.immutable, true);
  assert.equal(secret.type, "Opaque");
  assert.equal(
    Buffer.from((secret.data as Record<string, string>).DB_PASSWORD ?? "", "base64").toString(),
    "s3cr3t\nline two",
  );
});

test("pods read the revision's objects by name; explicit variables keep precedence", () => {
  const d = sampleDeployment();
  const rs = renderReplicaSet(d, "local") as unknown as {
    spec: {
      template: {
        spec: {
          containers: { envFrom: unknown[]; env: { name: string }[]; volumeMounts: unknown[] }[];
          volumes: unknown[];
        };
      };
    };
  };
  const c = rs.spec.template.spec.containers[0]!;
  assert.deepEqual(c.envFrom, [
    { configMapRef: { name: d.config!.configMapName } },
    { secretRef: { name: d.secrets!.secretName } },
    // Required: a pod never starts without the Secret the store's driver syncs.
    { secretRef: { name: d.externalSecrets!.secretProviderClassName } },
  ]);
  assert.ok(
    c.env.some((e) => e.name === "PORT"),
    "explicit env still rendered",
  );
  assert.deepEqual(rs.spec.template.spec.volumes, [
    {
      name: "krane-external-secrets",
      csi: {
        driver: CSI_DRIVER,
        readOnly: true,
        volumeAttributes: { secretProviderClass: d.externalSecrets!.secretProviderClassName },
      },
    },
  ]);
  assert.deepEqual(c.volumeMounts, [
    { name: "krane-external-secrets", mountPath: EXTERNAL_SECRETS_MOUNT, readOnly: true },
  ]);
  assert.equal(
    secretNameOfReplicaSet(renderReplicaSet(d, "local")),
    d.secrets!.secretName,
    "the Secret to delete with the revision is found from its template",
  );
  assert.equal(
    secretNameOfReplicaSet(renderReplicaSet(sampleDeployment({ secrets: undefined }), "local")),
    "",
    "the driver's synced Secret is not the revision's to delete",
  );
  const none = settingsPodParts(
    sampleDeployment({ config: undefined, secrets: undefined, externalSecrets: undefined }),
  );
  assert.deepEqual(none, { envFrom: [], volumes: [], volumeMounts: [] });
  const bare = renderReplicaSet(
    sampleDeployment({ config: undefined, secrets: undefined, externalSecrets: undefined }),
    "local",
  ) as unknown as { spec: { template: { spec: Record<string, unknown> } } };
  assert.equal("volumes" in bare.spec.template.spec, false, "no empty lists (drift)");
});

test("the SecretProviderClass uses the cluster's provider and parameters and syncs one Secret", () => {
  const d = sampleDeployment();
  const spc = renderSecretProviderClass(
    d.externalSecrets!,
    { provider: "vault", parameters: { vaultAddress: "https://vault:8200", roleName: "krane" } },
    d.k8sNamespace,
    deploymentLabels(d, "local"),
  );
  const spec = spc.spec as {
    provider: string;
    parameters: Record<string, string>;
    secretObjects: { secretName: string; data: unknown[] }[];
  };
  assert.equal(spc.apiVersion, "secrets-store.csi.x-k8s.io/v1");
  assert.equal(spec.provider, "vault");
  assert.equal(spec.parameters.vaultAddress, "https://vault:8200");
  assert.match(spec.parameters.objects ?? "", /objectName: "API_KEY"/);
  assert.match(spec.parameters.objects ?? "", /secret\/data\/api#key/);
  assert.deepEqual(spec.secretObjects[0]?.data, [{ objectName: "API_KEY", key: "API_KEY" }]);
  assert.equal(spec.secretObjects[0]?.secretName, d.externalSecrets!.secretProviderClassName);
});
