// Unit tests of ctrl's pure cores: resume planning, the feed tail, names, rendering, validation.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { create, fromBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { CreateDeploymentRequestSchema } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { ApplyDeploymentSchema, ApplyJobSchema } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { DomainError } from "../../../src/ctrl/errors.js";
import { deploymentK8sName, newId, sentinelK8sName, workspaceNamespace } from "../../../src/ctrl/domain/ids.js";
import { decodePoke, encodePoke } from "../../../src/ctrl/db/notify.js";
import type { OutboxChange } from "../../../src/ctrl/db/outbox.js";
import { renderApplyDeployment, type DeploymentContext } from "../../../src/ctrl/payloads/deployment.js";
import { UNLIMITED } from "../../../src/contracts/quotas.js";
import { encodeApplyJob } from "../../../src/ctrl/payloads/job.js";
import { readTail } from "../../../src/ctrl/stream/feed.js";
import { planResume } from "../../../src/ctrl/stream/watch.js";
import {
  deploymentFrom,
  validateCreateDeployment,
  validateRollout,
  type RevisionSpec,
} from "../../../src/ctrl/validate/api.js";
import { slug } from "../../../src/ctrl/validate/rules.js";

const DNS_1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

describe("planResume", () => {
  it("snapshots for cursor 0, compacted cursors and cursors ahead of the head", () => {
    assert.equal(planResume(0, { head: 0, compactedThrough: 0 }), "snapshot");
    assert.equal(planResume(0, { head: 10, compactedThrough: 0 }), "snapshot");
    assert.equal(planResume(4, { head: 10, compactedThrough: 5 }), "snapshot");
    assert.equal(planResume(5, { head: 10, compactedThrough: 5 }), "resume");
    assert.equal(planResume(10, { head: 10, compactedThrough: 5 }), "resume");
    assert.equal(planResume(11, { head: 10, compactedThrough: 5 }), "snapshot");
  });
});

describe("readTail", () => {
  const change = (version: number): OutboxChange => ({
    region: "r",
    kind: "deployment",
    version,
    objectId: "o",
    op: "apply",
    payload: new Uint8Array(),
  });
  it("returns exactly the rows after the cursor, or miss when the tail does not reach back", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 0, max: 30 }),
        fc.integer({ min: 0, max: 90 }),
        fc.integer({ min: 1, max: 20 }),
        (first, len, after, max) => {
          const tail = Array.from({ length: len }, (_, i) => change(first + i));
          const loaded = len === 0 ? first - 1 : first + len - 1;
          const got = readTail(tail, loaded, after, max);
          if (after >= loaded) assert.deepEqual(got, []);
          else if (after < first - 1 || len === 0) assert.equal(got, "miss");
          else {
            assert.notEqual(got, "miss");
            const versions = (got as OutboxChange[]).map((c) => c.version);
            const expected = [];
            for (let v = after + 1; v <= loaded && expected.length < max; v++) expected.push(v);
            assert.deepEqual(versions, expected);
          }
        },
      ),
    );
  });
});

describe("ids and Kubernetes names", () => {
  it("makes prefixed ids and valid, bounded DNS labels", () => {
    assert.match(newId("dep"), /^dep_[a-z0-9]{20}$/);
    assert.equal(workspaceNamespace("acme"), "ws-acme");
    fc.assert(
      fc.property(
        fc.stringMatching(/^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$/),
        fc.stringMatching(/^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$/),
        (p, e) => {
          for (const name of [deploymentK8sName(p, e), sentinelK8sName(p, e)]) {
            assert.ok(name.length <= 63, name);
            assert.match(name, DNS_1035);
          }
        },
      ),
    );
  });

  it("encodes pokes losslessly", () => {
    assert.deepEqual(decodePoke(encodePoke({ kind: "sentinel", region: "eu-west", version: 42 })), {
      kind: "sentinel",
      region: "eu-west",
      version: 42,
    });
    assert.equal(decodePoke("junk"), null);
    assert.deepEqual(decodePoke(encodePoke({ kind: "deployment", region: "us-east" })), {
      kind: "deployment",
      region: "us-east",
    });
    assert.equal(decodePoke("deployment/us-east/x1"), null);
  });
});

const SAMPLE_CONTEXT: DeploymentContext = {
  workspace: {
    id: "ws_1",
    slug: "acme",
    name: "Acme",
    k8s_namespace: "ws-acme",
    created_at: 1,
    deleting_at: null,
  },
  project: { id: "prj_1", workspace_id: "ws_1", slug: "web", name: "web", created_at: 1, deleting_at: null },
  environment: {
    id: "env_1",
    workspace_id: "ws_1",
    project_id: "prj_1",
    slug: "prod",
    sentinel_image: null,
    sentinel_replicas: 0,
    sentinel_cpu_millicores: 0,
    sentinel_memory_mib: 0,
    strategy: "RollingUpdate",
    max_surge: "25%",
    max_unavailable: "25%",
    min_ready_seconds: 7,
    progress_deadline_seconds: 600,
    revision_history_limit: 10,
    paused: 0,
    last_revision: 3,
    edge_auth: null,
    edge_policies: null,
    edge_api_keys: null,
    created_at: 1,
    updated_at: 1,
    deleting_at: null,
    routing_version: 1,
    progressive: null,
    routing_regions: null,
    warm_window_seconds: 1800,
    pinned_deployment_id: null,
    autoscale: null,
  },
  deployment: {
    id: "dep_1",
    workspace_id: "ws_1",
    project_id: "prj_1",
    environment_id: "env_1",
    revision: 3,
    k8s_name: "web-prod-abcdefgh",
    image: "app:1",
    command: '["node"]',
    args: '["s.js"]',
    port: 8080,
    env: '[{"name":"A","value":"b"}]',
    cpu_millicores: 250,
    memory_mib: 256,
    health_check:
      '{"method":"GET","path":"/h","intervalSeconds":10,"timeoutSeconds":1,"failureThreshold":3,"initialDelaySeconds":0}',
    build_id: "b1",
    protocol: "grpc",
    created_at: 1,
    // The revision's configuration, sealed secrets (keys only reach the agent) and external references.
    config: '[{"name":"LOG_LEVEL","value":"debug"}]',
    secrets: Buffer.from(JSON.stringify({ DB_PASSWORD: "c2VhbGVk" })),
    secret_keys: '["DB_PASSWORD"]',
    secrets_digest: "0123456789",
    external_secrets: '[{"key":"API_KEY","path":"secret/data/api#key"}]',
    image_digest: `sha256:${"d".repeat(64)}`,
  },
};

describe("renderApplyDeployment", () => {
  it("fills every field of ApplyDeployment", () => {
    const msg = renderApplyDeployment(
      SAMPLE_CONTEXT,
      "eu",
      4,
      { secretName: "krane-registry-credentials", version: "0123456789abcdef" },
      { ...UNLIMITED, cpu: 4000, instances: 8 },
    );
    // The workspace's quota, which the agent backs in the namespace; unlimited ones absent.
    assert.deepEqual(
      [msg.workspaceQuota?.cpuMillicores, msg.workspaceQuota?.memoryMib, msg.workspaceQuota?.instances],
      [4000n, undefined, 8n],
    );
    // The pods run the digest the tag named at deploy, the tag dropped.
    assert.equal(msg.image, `app@sha256:${"d".repeat(64)}`);
    // The workspace's pull Secret by name and version (its content only through GetSecretValues).
    assert.deepEqual(
      [msg.pullSecret?.secretName, msg.pullSecret?.version],
      ["krane-registry-credentials", "0123456789abcdef"],
    );
    // Every field of the contract is set to a non-default value: a field added to the proto but
    // forgotten here fails this test.
    for (const field of ApplyDeploymentSchema.fields) {
      const v = (msg as unknown as Record<string, unknown>)[field.localName];
      const empty = v === undefined || v === "" || v === 0 || v === 0n || (Array.isArray(v) && v.length === 0);
      assert.ok(!empty, `field ${field.name} is not rendered`);
    }
  });
});

describe("encodeApplyJob", () => {
  it("runs the revision's image pinned to its digest, with the pull Secret; a job's own image as named", () => {
    const { workspace, environment, deployment } = SAMPLE_CONTEXT;
    const spec = {
      name: "report",
      schedule: "*/5 * * * *",
      timeZone: "",
      image: "",
      command: [],
      args: [],
      concurrencyPolicy: "Forbid",
      deadlineSeconds: 0,
      successfulJobsHistoryLimit: 3,
      failedJobsHistoryLimit: 1,
      suspend: false,
      cpuMillicores: 100,
      memoryMib: 64,
    };
    const job = {
      id: "job_1",
      workspace_id: "ws_1",
      project_id: "prj_1",
      environment_id: "env_1",
      name: "report",
      k8s_name: "job-report",
      spec: JSON.stringify(spec),
      created_at: 1,
      updated_at: 1,
    };
    const pullSecret = { secretName: "krane-registry-credentials", version: "0123456789abcdef" };
    const a = fromBinary(
      ApplyJobSchema,
      encodeApplyJob(
        { workspace, environment, job, revision: deployment, pullSecret, quota: { ...UNLIMITED, cpu: 2000 } },
        "eu",
      ),
    );
    // The workspace's quota, which the agent backs in the namespace of a job with no deployment too.
    assert.deepEqual(
      [a.workspaceQuota?.cpuMillicores, a.workspaceQuota?.memoryMib, a.workspaceQuota?.instances],
      [2000n, undefined, undefined],
    );
    assert.equal(a.image, `app@sha256:${"d".repeat(64)}`);
    assert.deepEqual([a.pullSecret?.secretName, a.pullSecret?.version], [pullSecret.secretName, pullSecret.version]);
    const own = fromBinary(
      ApplyJobSchema,
      encodeApplyJob(
        {
          workspace,
          environment,
          job: { ...job, spec: JSON.stringify({ ...spec, image: "tools:2" }) },
          revision: deployment,
        },
        "eu",
      ),
    );
    assert.equal(own.image, "tools:2");
    assert.equal(own.pullSecret, undefined);
    assert.equal(own.workspaceQuota, undefined);
  });
});

describe("validation", () => {
  it("accepts valid slugs and rejects the rest, naming the field", () => {
    assert.equal(slug("slug", "my-app"), "my-app");
    for (const bad of ["", "-a", "a-", "A", "1abc", "a_b", "a".repeat(41)]) {
      assert.throws(
        () => slug("slug", bad),
        (e) => e instanceof DomainError && e.field === "slug",
      );
    }
  });

  it("applies defaults to a minimal deployment", () => {
    const d = deploymentFrom(
      validateCreateDeployment(
        create(CreateDeploymentRequestSchema, {
          workspace: "acme",
          project: "web",
          environment: "prod",
          image: "nginx",
        }),
      ),
      null,
    );
    assert.equal(d.port, 8080);
    assert.equal(d.cpuMillicores, 250);
    assert.equal(d.memoryMib, 256);
    assert.equal(d.replicas, null);
    assert.deepEqual(validateRollout(undefined), {
      strategy: "RollingUpdate",
      maxSurge: "25%",
      maxUnavailable: "25%",
      minReadySeconds: 0,
      progressDeadlineSeconds: 600,
      revisionHistoryLimit: 10,
      paused: false,
      progressive: null,
      warmWindowSeconds: 1800,
    });
  });

  it("either accepts a random deployment request or throws InvalidArgument with a field", () => {
    const text = fc.oneof(
      fc.string({ maxLength: 30 }),
      fc.constantFrom("acme", "app:1", "registry.example.com:5000/a/b:1.0", "A", ""),
    );
    fc.assert(
      fc.property(
        fc.record({
          workspace: text,
          project: text,
          environment: text,
          image: text,
          port: fc.integer({ min: -10, max: 70_000 }),
          cpuMillicores: fc.bigInt({ min: -10n, max: 100_000n }),
          env: fc.array(fc.record({ name: text, value: text }), { maxLength: 3 }),
        }),
        (req) => {
          try {
            const out = deploymentFrom(validateCreateDeployment(create(CreateDeploymentRequestSchema, req)), null);
            assert.ok(out.port >= 1 && out.port <= 65_535);
            assert.ok(out.cpuMillicores >= 10);
          } catch (e) {
            assert.ok(e instanceof DomainError, String(e));
            assert.equal(e.code, "invalid_argument");
            assert.ok(e.field && e.message.startsWith(`${e.field}: `));
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe("a deploy's settings: given, carried over (inherit) or the defaults", () => {
  const ask = (o: MessageInitShape<typeof CreateDeploymentRequestSchema> = {}) =>
    validateCreateDeployment(
      create(CreateDeploymentRequestSchema, {
        workspace: "acme",
        project: "hello",
        environment: "production",
        image: "krane.local/hello:v2",
        ...o,
      }),
    );
  const current: RevisionSpec = {
    image: "krane.local/hello:v1",
    imageDigest: `sha256:${"1".repeat(64)}`,
    command: ["node"],
    args: ["server.js"],
    port: 3000,
    protocol: "h2c",
    env: [
      { name: "GREETING", value: "hi" },
      { name: "MODE", value: "prod" },
      { name: "OLD", value: "x" },
    ],
    cpuMillicores: 500,
    memoryMib: 512,
    healthCheck: {
      method: "GET",
      path: "/healthz",
      intervalSeconds: 5,
      timeoutSeconds: 2,
      failureThreshold: 4,
      initialDelaySeconds: 1,
    },
    buildId: "b-1",
  };

  it("with inherit, only what is given changes: the image always, a build id only its own", () => {
    const d = deploymentFrom(ask({ inherit: true }), current);
    assert.deepEqual(
      { ...d, workspace: undefined, project: undefined, environment: undefined },
      {
        ...current,
        workspace: undefined,
        project: undefined,
        environment: undefined,
        image: "krane.local/hello:v2",
        // The digest belongs to the image: the old one's is never carried to the new image.
        imageDigest: null,
        buildId: "",
        replicas: null,
      },
    );
  });

  it("given settings win; variables are laid over the carried ones by name, env_unset drops them", () => {
    const d = deploymentFrom(
      ask({
        inherit: true,
        port: 8080,
        cpuMillicores: 1000n,
        command: ["bun"],
        env: [
          { name: "MODE", value: "canary" },
          { name: "NEW", value: "1" },
        ],
        envUnset: ["OLD", "NEVER_SET"],
        healthCheck: { path: "/ready" },
      }),
      current,
    );
    assert.equal(d.port, 8080);
    assert.equal(d.cpuMillicores, 1000);
    assert.equal(d.memoryMib, 512);
    assert.deepEqual(d.command, ["bun"]);
    assert.deepEqual(d.args, ["server.js"]);
    assert.equal(d.protocol, "h2c");
    assert.deepEqual(d.env, [
      { name: "GREETING", value: "hi" },
      { name: "MODE", value: "canary" },
      { name: "NEW", value: "1" },
    ]);
    assert.equal(d.healthCheck?.path, "/ready");
    assert.equal(d.healthCheck?.intervalSeconds, 10, "a health check given replaces the carried one whole");
  });

  it("without inherit, or without a revision yet, what is not given is the default", () => {
    for (const d of [deploymentFrom(ask(), current), deploymentFrom(ask({ inherit: true }), null)]) {
      assert.deepEqual(
        [d.port, d.cpuMillicores, d.memoryMib, d.protocol, d.command, d.args, d.env, d.healthCheck],
        [8080, 250, 256, "http1", [], [], [], null],
      );
    }
  });

  it("refuses env_unset without inherit or naming a variable also set, and carried variables past the limits", () => {
    const field = (f: () => unknown): string | undefined => {
      try {
        f();
      } catch (e) {
        if (e instanceof DomainError) return e.field;
        throw e;
      }
      return undefined;
    };
    assert.equal(
      field(() => ask({ envUnset: ["OLD"] })),
      "env_unset",
    );
    assert.equal(
      field(() => ask({ inherit: true, envUnset: ["A"], env: [{ name: "A", value: "1" }] })),
      "env_unset[0]",
    );
    assert.equal(
      field(() => ask({ inherit: true, envUnset: ["1bad"] })),
      "env_unset[0]",
    );
    const many = { ...current, env: Array.from({ length: 100 }, (_, i) => ({ name: `V${i}`, value: "x" })) };
    assert.equal(
      field(() => deploymentFrom(ask({ inherit: true, env: [{ name: "ONE_MORE", value: "x" }] }), many)),
      "env",
    );
    assert.equal(deploymentFrom(ask({ inherit: true, env: [{ name: "V1", value: "y" }] }), many).env.length, 100);
    // 8 carried values of 32 KiB are at the 256 KiB total: one more character given is past it.
    const full = {
      ...current,
      env: Array.from({ length: 8 }, (_, i) => ({ name: `B${i}`, value: "x".repeat(32 * 1024 - 2) })),
    };
    assert.equal(deploymentFrom(ask({ inherit: true }), full).env.length, 8);
    assert.equal(
      field(() => deploymentFrom(ask({ inherit: true, env: [{ name: "M", value: "y" }] }), full)),
      "env",
    );
  });
});
