// Every method the audit log has a view for (its declared audit subject: src/ctrl/audit/views.ts), called once
// against a real ctrl (HTTP/2, SQLite): each accepted call's event is in the chain it belongs to,
// and its diff lists exactly the fields the call changed — what it created as added, what it
// removed as removed, what it changed as set — never one kind of thing compared with another (a
// deploy once diffed the environment before against the new revision after, so the environment
// seemed to lose every field). A method declared with a view but without a step here fails.
//
// API tokens: a workspace token's creation and revocation — by the installation's admin or by a
// token of that workspace — are events of the workspace's chain, like everything else about the
// workspace (one event per call, in one chain; the admin reads every chain, the workspace's
// tokens only theirs). An installation token's are in the installation's chain.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  ApiTokenService,
  DeploymentService,
  RegistryService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { MemberService, SessionService } from "../../../src/gen/krane/ctrl/v1/access_pb.js";
import { DEFAULT_SESSION_LIFETIMES, insertMemberSession } from "../../../src/ctrl/domain/member-sessions.js";
import { findMember, memberRecord } from "../../../src/ctrl/domain/members.js";
import { AuditService, type AuditEvent } from "../../../src/gen/krane/ctrl/v1/audit_pb.js";
import { hashApiKey } from "../../../src/contracts/api-keys.js";
import { BuildService } from "../../../src/gen/krane/ctrl/v1/build_pb.js";
import { RepositoryService } from "../../../src/gen/krane/ctrl/v1/repository_pb.js";
import { ConfigService } from "../../../src/gen/krane/ctrl/v1/config_pb.js";
import { DomainService, EndpointService, PolicyService } from "../../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { JobService } from "../../../src/gen/krane/ctrl/v1/job_pb.js";
import { NotificationService } from "../../../src/gen/krane/ctrl/v1/notify_pb.js";
import { AlertService } from "../../../src/gen/krane/ctrl/v1/alerts_pb.js";
import { LogService } from "../../../src/gen/krane/ctrl/v1/logs_pb.js";
import { ApiKeyService } from "../../../src/gen/krane/ctrl/v1/keys_pb.js";
import { QuotaService } from "../../../src/gen/krane/ctrl/v1/quota_pb.js";
import { ProjectFileService } from "../../../src/gen/krane/ctrl/v1/apply_pb.js";
import { EnvironmentFileSchema } from "../../../src/gen/krane/ctrl/v1/project_file_pb.js";
import { PreviewService } from "../../../src/gen/krane/ctrl/v1/preview_pb.js";
import { ReleaseService } from "../../../src/gen/krane/ctrl/v1/release_pb.js";
import { RolloutService } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { readdirSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";
import { clone, type DescService } from "@bufbuild/protobuf";
import { subjectReader } from "../../../src/ctrl/audit/views.js";
import { Keyring } from "../../../src/ctrl/secrets/keyring.js";
import { deliver, githubDelivery } from "../../support/git-providers.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./support.js";

/** "Service/Method" of every method of src/gen whose policy declares an audit view. */
async function methodsWithViews(): Promise<string[]> {
  const gen = join(import.meta.dirname, "../../../src/gen/krane/ctrl/v1");
  const out: string[] = [];
  for (const file of readdirSync(gen).filter((f) => f.endsWith("_pb.ts"))) {
    for (const v of Object.values((await import(join(gen, file))) as Record<string, unknown>)) {
      const s = v as Partial<DescService> | null;
      if (s && typeof s === "object" && s.kind === "service")
        for (const m of s.methods ?? []) if (subjectReader(m)) out.push(`${m.parent.name}/${m.name}`);
    }
  }
  return out;
}

const WS = "acme";
const REF = { workspace: WS, project: "web", environment: "prod" };
const HOOK_SECRET = "s".repeat(32);

/** "field op" of each path under `prefix`. */
const each = (prefix: string, op: string, keys: string[]): string[] => keys.map((k) => `${prefix}.${k} ${op}`);
const ROLLOUT = [
  "max_surge",
  "max_unavailable",
  "min_ready_seconds",
  "paused",
  "progress_deadline_seconds",
  "revision_history_limit",
  "strategy",
  "warm_window_seconds",
];
const DEPLOYMENT = ["args", "build_id", "command", "cpu_millicores", "env", "image", "memory_mib", "port", "revision"];
const JOB = [
  "args",
  "command",
  "concurrencyPolicy",
  "cpuMillicores",
  "deadlineSeconds",
  "failedJobsHistoryLimit",
  "image",
  "memoryMib",
  "name",
  "schedule",
  "successfulJobsHistoryLimit",
  "suspend",
  "timeZone",
];
const HOOK = [
  "image_template",
  "provider",
  "region",
  "repository",
  "secret",
  "status_api_url",
  "status_token",
  "ttl_seconds",
  "with_secrets",
];
/** A preview's new environment, all of it added (with its base's configuration: LEVEL, from the krane.yaml step). */
const PREVIEW_ENVIRONMENT = [
  "environment.config.LEVEL added",
  "environment.deleting added",
  ...each("environment.endpoints.public", "added", ["hostname", "path_prefix"]),
  ...each("environment.preview", "added", ["approved", "expires_at", "fork", "image", "state", "with_secrets"]),
  "environment.regions.eu added",
  "environment.revision added",
  ...each("environment.rollout", "added", ROLLOUT),
  "environment.slug added",
];

interface Step {
  method: string;
  /** The chain its event must be in. */
  chain: "workspace" | "installation";
  /** Its diff: "field op", in the diff's (path) order. */
  diff: string[];
  /** More to check of the event. */
  check?: (e: AuditEvent) => void;
}

describe("the audit diff of every audited method", () => {
  const dir = tempDir("krane-audit-diffs-");
  let ctrl: TestCtrl;
  const txt = new Map<string, string>();

  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      keyring: new Keyring(randomBytes(32)),
      // Domain verification looks up the TXT record the test sets once AddDomain named it.
      domains: { resolver: { resolveTxt: async (name) => (txt.has(name) ? [[txt.get(name) ?? ""]] : []) } },
      previews: { webhookListen: { host: "127.0.0.1", port: 0 } },
      notifications: { allowLoopback: true },
      // Builds are queued and audited; none runs here (no slots): their views stay as the calls left them.
      builds: {
        registry: "127.0.0.1:9",
        buildkitd: "/nonexistent/buildkitd",
        buildctl: "/nonexistent/buildctl",
        basesLayout: "/nonexistent/bases",
        stateDir: join(dir.path, "builds"),
        slots: 0,
      },
    });
  });
  after(async () => {
    await ctrl?.close();
    dir.remove();
  });

  it("names what each call changed, in the chain it belongs to", async () => {
    const t = ctrl.adminToken;
    const steps = new Map<string, Step>();
    let n = 0;
    /** Runs one call with a request id of its own, the key its event is found by. */
    const step = async <T>(s: Step, fn: (o: { headers: Record<string, string> }) => Promise<T>): Promise<T> => {
      const requestId = `step-${++n}`;
      steps.set(requestId, s);
      return fn({ headers: { "x-request-id": requestId } });
    };
    const regions = ctrl.client(RegionService, t);
    const envs = ctrl.client(EnvironmentService, t);
    const deployments = ctrl.client(DeploymentService, t);
    const config = ctrl.client(ConfigService, t);
    const endpoints = ctrl.client(EndpointService, t);
    const domains = ctrl.client(DomainService, t);
    const jobs = ctrl.client(JobService, t);
    const releases = ctrl.client(ReleaseService, t);
    const rollout = ctrl.client(RolloutService, t);
    const previews = ctrl.client(PreviewService, t);
    const tokens = ctrl.client(ApiTokenService, t);

    // The installation's: regions and cluster tokens.
    await step({ method: "RegionService/CreateRegion", chain: "installation", diff: ["region.name added"] }, (o) =>
      regions.createRegion({ name: "eu" }, o),
    );
    await step(
      {
        method: "RegionService/CreateClusterToken",
        chain: "installation",
        diff: each("cluster", "added", ["name", "region", "token", "token_revoked"]),
      },
      (o) => regions.createClusterToken({ region: "eu" }, o),
    );
    await step(
      {
        method: "RegionService/RevokeClusterToken",
        chain: "installation",
        diff: ["cluster.token changed", "cluster.token_revoked set"],
      },
      (o) => regions.revokeClusterToken({ region: "eu" }, o),
    );

    // A workspace, its project and environment.
    const { workspace } = await step(
      {
        method: "WorkspaceService/CreateWorkspace",
        chain: "workspace",
        diff: each("workspace", "added", ["deleting", "name", "slug"]),
      },
      (o) => ctrl.client(WorkspaceService, t).createWorkspace({ slug: WS }, o),
    );
    assert.ok(workspace);
    await step(
      {
        method: "ProjectService/CreateProject",
        chain: "workspace",
        diff: each("project", "added", ["deleting", "name", "slug"]),
      },
      (o) => ctrl.client(ProjectService, t).createProject({ workspace: WS, slug: "web" }, o),
    );
    await step(
      {
        method: "EnvironmentService/CreateEnvironment",
        chain: "workspace",
        diff: [
          "environment.deleting added",
          "environment.regions.eu added",
          "environment.revision added",
          ...each("environment.rollout", "added", ROLLOUT),
          "environment.slug added",
        ],
      },
      (o) =>
        envs.createEnvironment(
          { workspace: WS, project: "web", slug: "prod", regions: [{ region: "eu", replicas: 1 }] },
          o,
        ),
    );
    await step(
      { method: "EnvironmentService/UpdateEnvironment", chain: "workspace", diff: ["environment.regions.eu set"] },
      (o) => envs.updateEnvironment({ ...REF, regions: [{ region: "eu", replicas: 2 }] }, o),
    );

    // Deploys: the new revision added, the environment's revision counter (and the replicas a
    // deploy sets) set — nothing of the environment removed.
    const { deployment: first } = await step(
      {
        method: "DeploymentService/CreateDeployment",
        chain: "workspace",
        diff: [...each("deployment", "added", DEPLOYMENT), "environment.revision set"],
        check: (e) => {
          const image = e.changes.find((c) => c.field === "deployment.image");
          assert.equal(image?.afterJson, '"registry.example.com/shop:1"');
          const revision = e.changes.find((c) => c.field === "environment.revision");
          assert.deepEqual([revision?.beforeJson, revision?.afterJson], ["0", "1"]);
        },
      },
      (o) => deployments.createDeployment({ ...REF, image: "registry.example.com/shop:1", port: 8080 }, o),
    );
    assert.ok(first);
    await step(
      {
        method: "DeploymentService/CreateDeployment",
        chain: "workspace",
        diff: [...each("deployment", "added", DEPLOYMENT), "environment.regions.eu set", "environment.revision set"],
        check: (e) => {
          const eu = e.changes.find((c) => c.field === "environment.regions.eu");
          assert.deepEqual([eu?.beforeJson, eu?.afterJson], ["2", "3"]);
        },
      },
      (o) => deployments.createDeployment({ ...REF, image: "registry.example.com/shop:2", port: 8080, replicas: 3 }, o),
    );

    // Settings: each a new revision of the environment (its number in the targets).
    await step(
      {
        method: "ConfigService/SetConfig",
        chain: "workspace",
        diff: ["environment.config.MODE added", "environment.revision set"],
      },
      (o) => config.setConfig({ ...REF, values: [{ key: "MODE", value: "prod" }] }, o),
    );
    await step(
      {
        method: "ConfigService/UnsetConfig",
        chain: "workspace",
        diff: ["environment.config.MODE removed", "environment.revision set"],
      },
      (o) => config.unsetConfig({ ...REF, keys: ["MODE"] }, o),
    );
    await step(
      {
        method: "ConfigService/SetSecrets",
        chain: "workspace",
        diff: ["environment.revision set", "environment.secrets.DB_PASSWORD added"],
      },
      (o) =>
        config.setSecrets(
          { ...REF, secrets: [{ key: "DB_PASSWORD", source: { case: "value", value: "hunter2" } }] },
          o,
        ),
    );
    await step(
      {
        method: "ConfigService/UnsetSecrets",
        chain: "workspace",
        diff: ["environment.revision set", "environment.secrets.DB_PASSWORD removed"],
      },
      (o) => config.unsetSecrets({ ...REF, keys: ["DB_PASSWORD"] }, o),
    );

    // krane.yaml: an apply of the plan made against the environment as it is.
    const files = ctrl.client(ProjectFileService, t);
    const plan = await files.planEnvironment({ ...REF, desired: {} });
    assert.ok(plan.current);
    const desired = clone(EnvironmentFileSchema, plan.current);
    desired.config.LEVEL = "debug";
    await step(
      {
        method: "ProjectFileService/ApplyEnvironment",
        chain: "workspace",
        diff: ["environment.config.LEVEL added", "environment.revision set"],
      },
      (o) => files.applyEnvironment({ ...REF, desired, plannedFrom: plan.current }, o),
    );

    // A private registry's credential: its host and user, the password as changed, never its value.
    const registries = ctrl.client(RegistryService, t);
    const REGISTRY = ['registries."registry.example.com".password', 'registries."registry.example.com".username'];
    await step(
      {
        method: "RegistryService/AddRegistry",
        chain: "workspace",
        diff: REGISTRY.map((f) => `${f} added`),
        check: (e) => assert.doesNotMatch(JSON.stringify(e.changes), /hunter2/, "no password in the event"),
      },
      (o) =>
        registries.addRegistry({ workspace: WS, host: "registry.example.com", username: "ci", password: "hunter2" }, o),
    );
    await step(
      { method: "RegistryService/RemoveRegistry", chain: "workspace", diff: REGISTRY.map((f) => `${f} removed`) },
      (o) => registries.removeRegistry({ workspace: WS, host: "registry.example.com" }, o),
    );

    // The workspace's quotas: each one it sets (-1: unlimited).
    const quotas = ctrl.client(QuotaService, t);
    await step(
      {
        method: "QuotaService/SetQuota",
        chain: "workspace",
        diff: each("quotas", "added", [
          "build_minutes",
          "cpu_millicores",
          "environments",
          "instances",
          "memory_mib",
          "previews",
        ]),
      },
      (o) =>
        quotas.setQuota(
          {
            workspace: WS,
            values: {
              cpu: "unlimited",
              memory: "unlimited",
              instances: "unlimited",
              environments: "unlimited",
              previews: "unlimited",
              build_minutes: "unlimited",
            },
          },
          o,
        ),
    );

    // Exposure, jobs, releases.
    await step(
      {
        method: "EndpointService/SetEndpoint",
        chain: "workspace",
        diff: each("environment.endpoints.public", "added", ["hostname", "path_prefix"]),
      },
      (o) => endpoints.setEndpoint({ ...REF, visibility: "public" }, o),
    );
    await step(
      {
        method: "EndpointService/DeleteEndpoint",
        chain: "workspace",
        diff: each("environment.endpoints.public", "removed", ["hostname", "path_prefix"]),
      },
      (o) => endpoints.deleteEndpoint({ ...REF, visibility: "public" }, o),
    );
    // Edge policies: the environment's list, compared whole.
    const policies = ctrl.client(PolicyService, t);
    await step(
      // The first policy adds the list; the last one removed takes it away.
      { method: "PolicyService/AddPolicy", chain: "workspace", diff: ["environment.edge_policies added"] },
      (o) =>
        policies.addPolicy(
          { ...REF, policy: { name: "office", kind: { case: "ip", value: { allow: ["192.0.2.0/24"] } } } },
          o,
        ),
    );
    const SET = { chain: "workspace" as const, diff: ["environment.edge_policies set"] };
    await step({ method: "PolicyService/AddPolicy", ...SET }, (o) =>
      policies.addPolicy({ ...REF, policy: { name: "api", kind: { case: "limits", value: { methods: ["GET"] } } } }, o),
    );
    await step(
      { method: "PolicyService/MovePolicy", chain: "workspace", diff: ["environment.edge_policies set"] },
      (o) => policies.movePolicy({ ...REF, name: "api", position: 0 }, o),
    );
    await step(
      { method: "PolicyService/RemovePolicy", chain: "workspace", diff: ["environment.edge_policies set"] },
      (o) => policies.removePolicy({ ...REF, name: "office" }, o),
    );
    await step({ method: "PolicyService/RemovePolicy", ...SET, diff: ["environment.edge_policies removed"] }, (o) =>
      policies.removePolicy({ ...REF, name: "api" }, o),
    );
    const hostname = "shop.acme-example.com";
    const { domain } = await step(
      { method: "DomainService/AddDomain", chain: "workspace", diff: [`environment.domains."${hostname}" added`] },
      (o) => domains.addDomain({ ...REF, hostname }, o),
    );
    assert.ok(domain);
    txt.set(domain.txtName, domain.txtValue);
    await step(
      { method: "DomainService/VerifyDomain", chain: "workspace", diff: [`environment.domains."${hostname}" set`] },
      (o) => domains.verifyDomain({ ...REF, hostname }, o),
    );
    await step(
      { method: "DomainService/RemoveDomain", chain: "workspace", diff: [`environment.domains."${hostname}" removed`] },
      (o) => domains.removeDomain({ ...REF, hostname }, o),
    );
    await step(
      { method: "JobService/PutJob", chain: "workspace", diff: each("environment.jobs.report", "added", JOB) },
      (o) => jobs.putJob({ ...REF, spec: { name: "report", schedule: "@hourly" } }, o),
    );
    await step(
      { method: "JobService/DeleteJob", chain: "workspace", diff: each("environment.jobs.report", "removed", JOB) },
      (o) => jobs.deleteJob({ ...REF, name: "report" }, o),
    );
    await step(
      {
        method: "ReleaseService/ApplyRelease",
        chain: "workspace",
        diff: each("environment.releases.extras", "added", ["digest", "version"]),
      },
      (o) =>
        releases.applyRelease(
          {
            ...REF,
            name: "extras",
            files: [
              { name: "cm.yaml", content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {a: b}\n" },
            ],
          },
          o,
        ),
    );
    await step(
      {
        method: "ReleaseService/DeleteRelease",
        chain: "workspace",
        diff: each("environment.releases.extras", "removed", ["digest", "version"]),
      },
      (o) => releases.deleteRelease({ ...REF, name: "extras" }, o),
    );

    // Rollouts.
    await step({ method: "RolloutService/Scale", chain: "workspace", diff: ["environment.regions.eu set"] }, (o) =>
      rollout.scale({ ...REF, replicas: 4 }, o),
    );
    await step({ method: "RolloutService/Pause", chain: "workspace", diff: ["environment.rollout.paused set"] }, (o) =>
      rollout.pause(REF, o),
    );
    await step({ method: "RolloutService/Resume", chain: "workspace", diff: ["environment.rollout.paused set"] }, (o) =>
      rollout.resume(REF, o),
    );
    await step({ method: "RolloutService/Restart", chain: "workspace", diff: ["environment.revision set"] }, (o) =>
      rollout.restart(REF, o),
    );
    await step(
      { method: "RolloutService/Undo", chain: "workspace", diff: ["environment.rollout.undo.eu added"] },
      (o) => rollout.undo(REF, o),
    );
    // A rollback pins the environment to the revision it went back to.
    await step(
      {
        method: "RolloutService/Rollback",
        chain: "workspace",
        diff: ["environment.rollout.pinned added"],
        check: (e) => assert.match(e.changes[0]?.afterJson ?? "", /^"dep_/),
      },
      (o) => rollout.rollback(REF, o),
    );
    await step(
      {
        method: "EnvironmentService/UpdateEnvironment",
        chain: "workspace",
        diff: each("environment.rollout.progressive", "added", [
          "progressDeadlineSeconds",
          "strategy.scaleDownStable",
          "strategy.steps",
          "strategy.type",
        ]),
      },
      (o) =>
        envs.updateEnvironment(
          {
            ...REF,
            rollout: {
              progressive: {
                canary: {
                  steps: [
                    { step: { case: "setWeight", value: 50 } },
                    { step: { case: "pause", value: { seconds: 0 } } },
                  ],
                },
              },
            },
          },
          o,
        ),
    );
    await step(
      { method: "RolloutService/Promote", chain: "workspace", diff: ["environment.rollout.command added"] },
      (o) => rollout.promote(REF, o),
    );
    await step(
      { method: "RolloutService/Abort", chain: "workspace", diff: ["environment.rollout.command added"] },
      (o) => rollout.abort(REF, o),
    );

    // Previews.
    await step(
      {
        method: "PreviewService/SetPreviewLimits",
        chain: "workspace",
        diff: each("preview_limits", "added", ["fork_approval"]),
      },
      (o) => previews.setPreviewLimits({ workspace: WS, limits: { forkApproval: true } }, o),
    );
    const { hook } = await step(
      { method: "PreviewService/CreatePreviewHook", chain: "workspace", diff: each("preview_hook", "added", HOOK) },
      (o) =>
        previews.createPreviewHook(
          {
            workspace: WS,
            project: "web",
            baseEnvironment: "prod",
            provider: "github",
            repository: "acme/shop",
            secret: HOOK_SECRET,
            imageTemplate: "registry.example.com/shop:{short_sha}",
          },
          o,
        ),
    );
    assert.ok(hook);
    await step({ method: "PreviewService/CreatePreview", chain: "workspace", diff: PREVIEW_ENVIRONMENT }, (o) =>
      previews.createPreview(
        {
          workspace: WS,
          project: "web",
          baseEnvironment: "prod",
          name: "pr-1",
          image: "registry.example.com/shop:pr-1",
        },
        o,
      ),
    );
    // A fork's pull request waits for approval (the workspace's limits say so).
    const opened = await deliver(
      `${ctrl.webhookUrl}${hook.path}`,
      githubDelivery(HOOK_SECRET, {
        action: "opened",
        number: 9,
        sha: "9".repeat(40),
        repository: "acme/shop",
        fork: true,
      }),
    );
    assert.equal(opened.status, 200, JSON.stringify(opened.body));
    await step({ method: "PreviewService/ApprovePreview", chain: "workspace", diff: PREVIEW_ENVIRONMENT }, (o) =>
      previews.approvePreview({ workspace: WS, project: "web", name: "pr-9" }, o),
    );
    await step(
      {
        method: "PreviewService/DeletePreview",
        chain: "workspace",
        diff: ["environment.deleting set", "environment.preview.state set", "environment.regions.eu removed"],
      },
      (o) => previews.deletePreview({ workspace: WS, project: "web", name: "pr-1" }, o),
    );
    await step(
      { method: "PreviewService/DeletePreviewHook", chain: "workspace", diff: each("preview_hook", "removed", HOOK) },
      (o) => previews.deletePreviewHook({ workspace: WS, hookId: hook.id }, o),
    );

    // Notifications: the installation's SMTP server (a real one, on loopback), a workspace's channel.
    const notify = ctrl.client(NotificationService, t);
    const smtp = new SMTPServer({ authOptional: true, disabledCommands: ["STARTTLS", "AUTH"], logger: false });
    await new Promise<void>((resolve) => smtp.listen(0, "127.0.0.1", resolve));
    const smtpPort = (smtp.server.address() as AddressInfo).port;
    await step(
      {
        method: "NotificationService/SetSmtpServer",
        chain: "installation",
        diff: each("smtp_server", "added", ["from", "host", "port", "security", "username"]),
      },
      (o) =>
        notify.setSmtpServer({ host: "127.0.0.1", port: smtpPort, security: "none", from: "krane@example.com" }, o),
    );
    await new Promise<void>((resolve) => smtp.close(() => resolve()));
    const CHANNEL = ["credentials", "environments", "events", "target", "type"];
    await step(
      {
        method: "NotificationService/AddChannel",
        chain: "workspace",
        diff: each("notification_channel", "added", CHANNEL),
      },
      (o) =>
        notify.addChannel(
          {
            workspace: WS,
            name: "ops",
            target: { case: "webhook", value: { url: "http://127.0.0.1:9/hook", secret: HOOK_SECRET } },
            events: ["deploy.failed"],
          },
          o,
        ),
    );
    await step({ method: "NotificationService/TestChannel", chain: "workspace", diff: [] }, (o) =>
      notify.testChannel({ workspace: WS, name: "ops" }, o),
    );
    await step(
      {
        method: "NotificationService/RemoveChannel",
        chain: "workspace",
        diff: each("notification_channel", "removed", CHANNEL),
      },
      (o) => notify.removeChannel({ workspace: WS, name: "ops" }, o),
    );
    // An environment's alert rule: its condition, not its evaluation state.
    const alerts = ctrl.client(AlertService, t);
    const RULE = ["for_seconds", "metric", "op", "threshold", "window_seconds"];
    await step(
      { method: "AlertService/AddAlertRule", chain: "workspace", diff: each("alert_rule", "added", RULE) },
      (o) =>
        alerts.addAlertRule(
          { ...REF, name: "errors", metric: "error_rate", op: ">", threshold: 2, forSeconds: 300 },
          o,
        ),
    );
    await step(
      { method: "AlertService/RemoveAlertRule", chain: "workspace", diff: each("alert_rule", "removed", RULE) },
      (o) => alerts.removeAlertRule({ ...REF, name: "errors" }, o),
    );
    // The workspace's log retention: its own days, changed, then back to the default.
    const logs = ctrl.client(LogService, t);
    await step({ method: "LogService/SetLogRetention", chain: "workspace", diff: ["log_retention.days added"] }, (o) =>
      logs.setLogRetention({ workspace: WS, days: 30 }, o),
    );
    await step(
      {
        method: "LogService/SetLogRetention",
        chain: "workspace",
        diff: ["log_retention.days set"],
        check: (e) => {
          const c = e.changes.find((x) => x.field === "log_retention.days");
          assert.deepEqual([c?.beforeJson, c?.afterJson], ["30", "3"]);
        },
      },
      (o) => logs.setLogRetention({ workspace: WS, days: 3 }, o),
    );
    await step(
      { method: "LogService/SetLogRetention", chain: "workspace", diff: ["log_retention.days removed"] },
      (o) => logs.setLogRetention({ workspace: WS }, o),
    );
    // An environment's API key: its name, limits and metadata, never the key nor its digest.
    const apiKeys = ctrl.client(ApiKeyService, t);
    let secret = "";
    const noKey = (e: AuditEvent) => {
      const text = JSON.stringify(e, (_, v: unknown) => (typeof v === "bigint" ? String(v) : v));
      assert.ok(secret !== "" && !text.includes(secret), "the event holds no key");
      assert.ok(!text.includes(hashApiKey(secret)), "nor its digest");
    };
    const made = await step(
      {
        method: "ApiKeyService/CreateApiKey",
        chain: "workspace",
        diff: each("api_key", "added", ["expires_at", "metadata.plan", "name", "rate_limit", "rate_window_seconds"]),
        check: noKey,
      },
      (o) =>
        apiKeys.createApiKey(
          {
            ...REF,
            name: "mobile",
            expiresAtUnixMs: BigInt(Date.now() + 86_400_000),
            rateLimit: 5n,
            rateWindowSeconds: 60n,
            metadata: { plan: "pro" },
          },
          o,
        ),
    );
    secret = made.secret;
    await step(
      { method: "ApiKeyService/RevokeApiKey", chain: "workspace", diff: ["api_key.revoked_at added"], check: noKey },
      (o) => apiKeys.revokeApiKey({ ...REF, keyId: made.key?.id ?? "" }, o),
    );
    // Members and service accounts: their address or name and role, in the workspace's chain.
    const members = ctrl.client(MemberService, t);
    await step(
      { method: "MemberService/InviteMember", chain: "workspace", diff: ["member.email added", "member.role added"] },
      (o) => members.inviteMember({ workspace: WS, email: "ana@example.com", role: "viewer" }, o),
    );
    await step(
      {
        method: "MemberService/SetMemberRole",
        chain: "workspace",
        diff: ["member.role set"],
        check: (e) => {
          const c = e.changes.find((x) => x.field === "member.role");
          assert.deepEqual([c?.beforeJson, c?.afterJson], ['"viewer"', '"developer"']);
        },
      },
      (o) => members.setMemberRole({ workspace: WS, member: "ana@example.com", role: "developer" }, o),
    );
    // A member's sign-in session (made here as a sign-in would), ended: whose and which client.
    const ana = await findMember(ctrl.store.db, workspace.id, "ana@example.com");
    assert.ok(ana);
    const session = await ctrl.store.write((tx) =>
      insertMemberSession(tx, memberRecord(ana), "cli", DEFAULT_SESSION_LIFETIMES, "203.0.113.7"),
    );
    await step(
      {
        method: "SessionService/RevokeSession",
        chain: "workspace",
        diff: ["session.client removed", "session.member removed"],
      },
      (o) => ctrl.client(SessionService, t).revokeSession({ workspace: WS, id: session.sessionId }, o),
    );
    await step(
      {
        method: "MemberService/RemoveMember",
        chain: "workspace",
        diff: ["member.email removed", "member.role removed"],
      },
      (o) => members.removeMember({ workspace: WS, member: "ana@example.com" }, o),
    );
    await step(
      {
        method: "MemberService/CreateServiceAccount",
        chain: "workspace",
        diff: ["service_account.name added", "service_account.role added"],
      },
      (o) => members.createServiceAccount({ workspace: WS, name: "deployer", role: "developer" }, o),
    );
    await step(
      {
        method: "MemberService/DeleteServiceAccount",
        chain: "workspace",
        diff: ["service_account.name removed", "service_account.role removed"],
      },
      (o) => members.deleteServiceAccount({ workspace: WS, name: "deployer" }, o),
    );

    // Builds: an upload's chunks, a queued build, its cancellation (never the log or the source's bytes).
    const builds = ctrl.client(BuildService, t);
    const archive = Buffer.from("not even a tar: builds check only the digest when queued");
    const digest = `sha256:${createHash("sha256").update(archive).digest("hex")}`;
    await step(
      { method: "BuildService/UploadSource", chain: "workspace", diff: each("source", "added", ["chunks", "digest"]) },
      (o) =>
        builds.uploadSource(
          { workspace: WS, project: REF.project, digest, size: BigInt(archive.length), offset: 0n, data: archive },
          o,
        ),
    );
    const queued = await step(
      {
        method: "BuildService/StartBuild",
        chain: "workspace",
        diff: each("build", "added", ["deploy", "source_digest", "state"]),
      },
      (o) => builds.startBuild({ ...REF, sourceDigest: digest, deploy: true }, o),
    );
    await step({ method: "BuildService/CancelBuild", chain: "workspace", diff: ["build.state set"] }, (o) =>
      builds.cancelBuild({ workspace: WS, buildId: queued.build?.id ?? "" }, o),
    );

    // A project's repository: where it is, its branch map, and that its credentials were set (never them).
    const repos = ctrl.client(RepositoryService, t);
    const REPOSITORY = [
      "branches.main",
      "credential",
      "credential_kind",
      "provider",
      "status_token",
      "url",
      "webhook_secret",
    ];
    await step(
      {
        method: "RepositoryService/ConnectRepository",
        chain: "workspace",
        diff: each("repository", "added", REPOSITORY),
        check: (e) =>
          assert.ok(
            !JSON.stringify(e, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v)).includes(
              "repo-token-never-shown",
            ),
            "the token is not in the event",
          ),
      },
      (o) =>
        repos.connectRepository(
          {
            workspace: WS,
            project: REF.project,
            provider: "github",
            url: "https://git.example.com/acme/web.git",
            token: "repo-token-never-shown",
            webhookSecret: HOOK_SECRET,
            branches: ["main=prod"],
          },
          o,
        ),
    );
    await step(
      {
        method: "RepositoryService/UpdateRepository",
        chain: "workspace",
        diff: ["repository.branches.main removed", "repository.branches.release added"],
      },
      (o) => repos.updateRepository({ workspace: WS, project: REF.project, branches: ["release=prod"] }, o),
    );
    await step(
      {
        method: "RepositoryService/DisconnectRepository",
        chain: "workspace",
        diff: each("repository", "removed", ["branches.release", ...REPOSITORY.filter((f) => f !== "branches.main")]),
      },
      (o) => repos.disconnectRepository({ workspace: WS, project: REF.project }, o),
    );

    // API tokens: a workspace's in its chain, whoever makes or revokes them; the installation's in its own.
    const workspaceToken = ["api_token.name", "api_token.workspace_id"];
    const bot = await step(
      { method: "ApiTokenService/CreateApiToken", chain: "workspace", diff: workspaceToken.map((f) => `${f} added`) },
      (o) => tokens.createApiToken({ name: "ci-bot", workspace: WS }, o),
    );
    const asBot = ctrl.client(ApiTokenService, bot.token);
    const bot2 = await step(
      { method: "ApiTokenService/CreateApiToken", chain: "workspace", diff: workspaceToken.map((f) => `${f} added`) },
      (o) => asBot.createApiToken({ name: "ci-bot-2" }, o),
    );
    const bot2Id = bot2.apiToken?.id ?? "";
    const botId = bot.apiToken?.id ?? "";
    await step(
      {
        method: "ApiTokenService/RevokeApiToken",
        chain: "workspace",
        diff: workspaceToken.map((f) => `${f} removed`),
        check: (e) => {
          assert.equal(e.actor?.name, "ci-bot", "ci-bot revoked ci-bot-2");
          assert.deepEqual(e.targets, [bot2Id]);
        },
      },
      (o) => asBot.revokeApiToken({ tokenId: bot2Id }, o),
    );
    await step(
      {
        method: "ApiTokenService/RevokeApiToken",
        chain: "workspace",
        diff: workspaceToken.map((f) => `${f} removed`),
        check: (e) => {
          assert.equal(e.actor?.name, "admin");
          assert.equal(e.actor?.scope, "installation", "the event says the installation's token did it");
          assert.deepEqual(e.targets, [botId]);
        },
      },
      (o) => tokens.revokeApiToken({ tokenId: botId }, o),
    );
    const ops = await step(
      { method: "ApiTokenService/CreateApiToken", chain: "installation", diff: ["api_token.name added"] },
      (o) => tokens.createApiToken({ name: "ops" }, o),
    );
    await step(
      { method: "ApiTokenService/RevokeApiToken", chain: "installation", diff: ["api_token.name removed"] },
      (o) => tokens.revokeApiToken({ tokenId: ops.apiToken?.id ?? "" }, o),
    );

    // Deletions: a revision removed (and nothing of its environment); the rest marked deleting.
    await step(
      {
        method: "DeploymentService/DeleteDeployment",
        chain: "workspace",
        diff: each("deployment", "removed", DEPLOYMENT),
        check: (e) => assert.equal(e.targets[e.targets.length - 1], first.id),
      },
      (o) => deployments.deleteDeployment({ deploymentId: first.id }, o),
    );
    await step(
      {
        method: "EnvironmentService/DeleteEnvironment",
        chain: "workspace",
        diff: ["environment.deleting set", "environment.regions.eu removed"],
      },
      (o) => envs.deleteEnvironment({ ...REF, confirm: "prod" }, o),
    );
    await step({ method: "ProjectService/DeleteProject", chain: "workspace", diff: ["project.deleting set"] }, (o) =>
      ctrl.client(ProjectService, t).deleteProject({ workspace: WS, project: "web", confirm: "web" }, o),
    );
    await step(
      { method: "WorkspaceService/DeleteWorkspace", chain: "workspace", diff: ["workspace.deleting set"] },
      (o) => ctrl.client(WorkspaceService, t).deleteWorkspace({ workspace: WS, confirm: WS }, o),
    );

    // Every method with a view was called.
    const called = new Set([...steps.values()].map((s) => s.method));
    assert.deepEqual(
      (await methodsWithViews()).filter((m) => !called.has(m)),
      [],
      "methods declared with a view but without a step here",
    );

    const audit = ctrl.client(AuditService, t);
    const chain = async (filter: { workspace?: string; installation?: boolean; method?: string }) =>
      (await audit.listAuditEvents({ filter, pageSize: 1000 })).events;
    // By id: the workspace is being deleted (its chain stays).
    const chains = {
      workspace: await chain({ workspace: workspace.id }),
      installation: await chain({ installation: true }),
    };
    for (const [requestId, s] of steps) {
      const where = (c: "workspace" | "installation") => chains[c].filter((e) => e.requestId === requestId);
      const other = s.chain === "workspace" ? "installation" : "workspace";
      assert.deepEqual(where(other), [], `${requestId} ${s.method}: nothing in the ${other}'s chain`);
      const events = where(s.chain);
      assert.equal(events.length, 1, `${requestId} ${s.method}: one event in the ${s.chain}'s chain`);
      const [e] = events;
      assert.ok(e);
      assert.equal(e.method, s.method);
      assert.equal(e.code, "ok", `${requestId} ${s.method}: ${e.message}`);
      assert.deepEqual(
        e.changes.map((c) => `${c.field} ${c.op}`),
        s.diff,
        `${requestId} ${s.method}: its diff`,
      );
      s.check?.(e);
    }

    // What the tester asked: the workspace's revocations are found by method in its chain.
    const revocations = await chain({ workspace: workspace.id, method: "RevokeApiToken" });
    assert.deepEqual(
      revocations.map((e) => [e.actor?.name, e.targets[0]]),
      [
        ["ci-bot", bot2Id],
        ["admin", botId],
      ],
    );
  });
});
