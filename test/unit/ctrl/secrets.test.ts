// Envelope encryption (src/ctrl/secrets) and the validation of configuration, secrets, cron
// schedules and release manifests (src/ctrl/validate): what is refused names the field and never
// echoes a secret's value.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import fc from "fast-check";
import { create, toBinary } from "@bufbuild/protobuf";
import { Keyring, KeyringError, masterKeyId, open, parseMasterKey, seal } from "../../../src/ctrl/secrets/keyring.js";
import { DomainError } from "../../../src/ctrl/errors.js";
import { validateConfigValues, validateSecretInputs, settingKeys } from "../../../src/ctrl/validate/settings.js";
import { cronSchedule, timeZone, validateJobSpec } from "../../../src/ctrl/validate/job.js";
import { validateReleaseFiles } from "../../../src/ctrl/validate/release.js";
import { DEFAULT_RELEASE_KINDS, parseAllowedKinds } from "../../../src/contracts/releases.js";
import { deletePayload, environmentOfPayload } from "../../../src/ctrl/payloads/delete-payload.js";
import { KIND_PAYLOADS } from "../../../src/ctrl/payloads/registry.js";

const KINDS = Object.values(KIND_PAYLOADS);
import {
  ApplyJobSchema,
  ApplyReleaseSchema,
  ApplySentinelSchema,
  DeleteJobSchema,
  DeleteReleaseSchema,
  DeleteSentinelSchema,
} from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { fromBinary } from "@bufbuild/protobuf";
import { JobSpecSchema } from "../../../src/gen/krane/ctrl/v1/job_pb.js";

const field = (f: string) => (e: unknown) => e instanceof DomainError && e.code === "invalid_argument" && e.field === f;

test("seal/open: round trip, bound to its associated data, tamper-evident", () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 2048 }), fc.string({ maxLength: 40 }), (plain, aad) => {
      const key = randomBytes(32);
      const sealed = seal(key, plain, aad);
      assert.deepEqual(new Uint8Array(open(key, sealed, aad)), plain);
      assert.throws(() => open(key, sealed, `${aad}x`), KeyringError);
      const flipped = Buffer.from(sealed);
      flipped[flipped.length - 1] = (flipped[flipped.length - 1] ?? 0) ^ 1;
      assert.throws(() => open(key, flipped, aad), KeyringError);
      assert.throws(() => open(randomBytes(32), sealed, aad), KeyringError);
    }),
    { numRuns: 50 },
  );
  const key = randomBytes(32);
  assert.notDeepEqual(
    seal(key, Buffer.from("same"), "a"),
    seal(key, Buffer.from("same"), "a"),
    "fresh nonce each time",
  );
});

test("keyring: wraps with the current key, unwraps with previous ones, rewraps on rotation", () => {
  const oldKey = randomBytes(32);
  const newKey = randomBytes(32);
  const before = new Keyring(oldKey);
  const dk = before.newDataKey("env_1");
  const during = new Keyring(newKey, [oldKey]);
  assert.deepEqual(during.unwrap(dk.wrapped, dk.masterKeyId, "env_1"), dk.key);
  const rewrapped = during.rewrap(dk.wrapped, dk.masterKeyId, "env_1");
  const after = new Keyring(newKey);
  assert.deepEqual(after.unwrap(rewrapped, after.currentId, "env_1"), dk.key);
  assert.throws(() => after.unwrap(dk.wrapped, dk.masterKeyId, "env_1"), /not given/);
  assert.throws(
    () => during.unwrap(dk.wrapped, dk.masterKeyId, "env_2"),
    KeyringError,
    "a data key is bound to its environment",
  );
  assert.equal(masterKeyId(newKey), after.currentId);
  assert.equal(parseMasterKey(newKey.toString("base64"), "k").equals(newKey), true);
  assert.equal(parseMasterKey(newKey.toString("hex"), "k").equals(newKey), true);
  assert.throws(() => parseMasterKey("short", "k"), /32 random bytes/);
});

test("config and secret inputs: keys are environment variable names, values text within limits", () => {
  assert.deepEqual(validateConfigValues([{ key: "LOG_LEVEL", value: "debug" }]), [
    { key: "LOG_LEVEL", value: "debug" },
  ]);
  assert.throws(() => validateConfigValues([{ key: "1BAD", value: "x" }]), field("values[0].key"));
  assert.throws(() => validateConfigValues([{ key: "PORT", value: "x" }]), field("values[0].key"));
  assert.throws(
    () =>
      validateConfigValues([
        { key: "A", value: "x" },
        { key: "A", value: "y" },
      ]),
    field("values[1].key"),
  );
  assert.throws(() => validateConfigValues([{ key: "A", value: "x".repeat(32 * 1024 + 1) }]), field("values[0].value"));
  assert.throws(() => validateConfigValues([{ key: "A", value: "bin\u0000ary" }]), field("values[0].value"));
  assert.throws(() => validateConfigValues([]), field("values"));
  assert.ok(validateConfigValues([{ key: "PEM", value: "-----BEGIN-----\nabc\n-----END-----\n" }]));
  const secret = "hunter2-\u0001-never-echoed";
  assert.throws(
    () => validateSecretInputs([{ key: "DB", source: { case: "value", value: secret } }]),
    (e) => e instanceof DomainError && e.field === "secrets[0].value" && !e.message.includes("hunter2"),
  );
  assert.deepEqual(
    validateSecretInputs([{ key: "API", source: { case: "externalPath", value: "secret/data/api#key" } }]),
    [{ key: "API", source: "external", path: "secret/data/api#key" }],
  );
  assert.throws(() => validateSecretInputs([{ key: "X", source: { case: undefined } }]), field("secrets[0]"));
  assert.throws(() => settingKeys("keys", ["A", "A"]), field("keys[1]"));
});

test("cron schedules and time zones", () => {
  for (const ok of ["*/5 * * * *", "0 9 * * MON-FRI", "@hourly", "@every 1h30m", "  0  0 * * *  "])
    assert.ok(cronSchedule("schedule", ok));
  for (const bad of ["* * * *", "61 * * * *", "@fortnightly", "TZ=UTC 0 * * * *", "", "* * * * * *"])
    assert.throws(() => cronSchedule("schedule", bad), field("schedule"), bad);
  assert.equal(timeZone("tz", "Europe/Paris"), "Europe/Paris");
  assert.throws(() => timeZone("tz", "Mars/Olympus"), field("tz"));
  const spec = validateJobSpec(create(JobSpecSchema, { name: "report", schedule: "@daily" }));
  assert.equal(spec.concurrencyPolicy, "Forbid");
  assert.equal(spec.deadlineSeconds, 3600);
  assert.throws(
    () => validateJobSpec(create(JobSpecSchema, { name: "Bad_Name", schedule: "@daily" })),
    field("spec.name"),
  );
  assert.throws(
    () => validateJobSpec(create(JobSpecSchema, { name: "a", schedule: "@daily", concurrencyPolicy: "Sometimes" })),
    field("spec.concurrency_policy"),
  );
});

const NS = "ws-acme";
const files = (content: string) => [{ name: "app.yaml", content }];

test("release manifests: parsed, allow-listed, namespaced, isolated; the first problem names its document", () => {
  const objs = validateReleaseFiles(
    files(`apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {a: "1"}
---
apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: ws-acme}
spec:
  template:
    spec:
      containers: [{name: m, image: busybox}]
      restartPolicy: Never
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Service, metadata: {name: web}, spec: {ports: [{port: 80}]}}
`),
    NS,
    DEFAULT_RELEASE_KINDS,
  );
  assert.deepEqual(
    objs.map((o) => o.id),
    ["/ConfigMap/settings", "batch/Job/migrate", "/Service/web"],
  );
  const pod = ((objs[1]!.object.spec as Record<string, unknown>).template as { spec: Record<string, unknown> }).spec;
  assert.equal(pod.runtimeClassName, "gvisor");
  assert.equal(pod.automountServiceAccountToken, false);
  assert.deepEqual(pod.nodeSelector, { "node-class": "untrusted" });
  assert.equal((objs[0]!.object.metadata as { namespace: string }).namespace, NS);

  const bad: [string, RegExp][] = [
    ["kind: [unclosed", /document 1: is not YAML/],
    ["apiVersion: v1\nmetadata: {name: x}", /kind is required/],
    ["apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: other}", /not "other"/],
    ["apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}", /not on the platform's allow-list/],
    ["apiVersion: v1\nkind: Namespace\nmetadata: {name: x}", /cluster-scoped/],
    ["apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: x}", /cluster-scoped/],
    ["apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: krane-workspace-quota}", /krane's own/],
    ["apiVersion: v1\nkind: LimitRange\nmetadata: {name: x}", /krane's own/],
    [
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}",
      /also defined/,
    ],
    ["apiVersion: v1\nkind: Secret\ntype: kubernetes.io/service-account-token\nmetadata: {name: x}", /token Secrets/],
    ["apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: x}\nautomountServiceAccountToken: true", /must be false/],
    [
      "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {template: {spec: {serviceAccountName: admin, containers: []}}}",
      /default ServiceAccount/,
    ],
    ["apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Bad_Name}", /DNS subdomain/],
    ["just a string", /must be a Kubernetes object/],
  ];
  for (const [content, msg] of bad) {
    assert.throws(
      () => validateReleaseFiles(files(content), NS, DEFAULT_RELEASE_KINDS),
      (e) => e instanceof DomainError && e.code === "invalid_argument" && msg.test(e.message),
      content,
    );
  }
  assert.throws(() => validateReleaseFiles([], NS, DEFAULT_RELEASE_KINDS), field("files"));
  // Even where a platform allow-lists them, the quota backstop's kinds stay krane's.
  assert.throws(
    () =>
      validateReleaseFiles(files("apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: x}"), NS, [
        ...DEFAULT_RELEASE_KINDS,
        { group: "", kind: "ResourceQuota" },
      ]),
    /krane's own/,
  );
  assert.deepEqual(parseAllowedKinds("ConfigMap, batch/Job,monitoring.coreos.com/ServiceMonitor"), [
    { group: "", kind: "ConfigMap" },
    { group: "batch", kind: "Job" },
    { group: "monitoring.coreos.com", kind: "ServiceMonitor" },
  ]);
  assert.throws(() => parseAllowedKinds("batch/job"), /group\/Kind/);
});

test("deleting an environment is generic over the registry: every kind's Delete from its stored Apply", () => {
  const kind = (name: string) => KINDS.find((k) => k.name === name)!;
  const sentinel = toBinary(
    ApplySentinelSchema,
    create(ApplySentinelSchema, { sentinelId: "snt_1", k8sName: "snt-a", environmentId: "env_9" }),
  );
  assert.deepEqual(
    fromBinary(DeleteSentinelSchema, deletePayload(kind("sentinel"), sentinel)),
    create(DeleteSentinelSchema, { sentinelId: "snt_1", k8sName: "snt-a" }),
  );
  assert.equal(environmentOfPayload(kind("sentinel"), sentinel), "env_9");
  const job = toBinary(
    ApplyJobSchema,
    create(ApplyJobSchema, { jobId: "job_1", k8sNamespace: "ws-a", k8sName: "job-x", environmentId: "env_9" }),
  );
  assert.deepEqual(
    fromBinary(DeleteJobSchema, deletePayload(kind("job"), job)),
    create(DeleteJobSchema, { jobId: "job_1", k8sNamespace: "ws-a", k8sName: "job-x" }),
  );
  const rel = toBinary(
    ApplyReleaseSchema,
    create(ApplyReleaseSchema, {
      releaseId: "rel_1",
      k8sNamespace: "ws-a",
      kindsEver: [{ group: "batch", version: "v1", kind: "Job" }],
    }),
  );
  const del = fromBinary(DeleteReleaseSchema, deletePayload(kind("release"), rel));
  assert.equal(del.releaseId, "rel_1");
  assert.equal(del.kindsEver[0]?.kind, "Job", "kinds ever applied travel to the delete");
  for (const k of KINDS)
    assert.ok(
      k.apply.fields.some((f) => f.name === "environment_id"),
      `${k.name}'s Apply names its environment`,
    );
});
