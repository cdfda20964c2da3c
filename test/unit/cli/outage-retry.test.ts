// The CLI's behaviour in an outage (src/cli/user-client.ts): which calls it repeats, for how long,
// what it prints, and the error it ends with. The calls are real Connect calls through an
// in-memory router whose handlers fail on demand.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { file_krane_ctrl_v1_api, WorkspaceService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { file_krane_ctrl_v1_rollout } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { file_krane_ctrl_v1_config } from "../../../src/gen/krane/ctrl/v1/config_pb.js";
import { file_krane_ctrl_v1_exposure } from "../../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { file_krane_ctrl_v1_job } from "../../../src/gen/krane/ctrl/v1/job_pb.js";
import { file_krane_ctrl_v1_notify } from "../../../src/gen/krane/ctrl/v1/notify_pb.js";
import { file_krane_ctrl_v1_access } from "../../../src/gen/krane/ctrl/v1/access_pb.js";
import { file_krane_ctrl_v1_apply } from "../../../src/gen/krane/ctrl/v1/apply_pb.js";
import { file_krane_ctrl_v1_release } from "../../../src/gen/krane/ctrl/v1/release_pb.js";
import { file_krane_ctrl_v1_quota } from "../../../src/gen/krane/ctrl/v1/quota_pb.js";
import { file_krane_ctrl_v1_build } from "../../../src/gen/krane/ctrl/v1/build_pb.js";
import { file_krane_ctrl_v1_alerts } from "../../../src/gen/krane/ctrl/v1/alerts_pb.js";
import { file_krane_ctrl_v1_keys } from "../../../src/gen/krane/ctrl/v1/keys_pb.js";
import { file_krane_ctrl_v1_repository } from "../../../src/gen/krane/ctrl/v1/repository_pb.js";
import { IDEMPOTENCY_KEY_HEADER } from "../../../src/contracts/headers.js";
import { idempotencyKeys, outageRetry, parseDuration, repeatable } from "../../../src/cli/user-client.js";

test("every public method is repeated after an outage as it is or only under its idempotency key, as its proto declares", () => {
  const all = [
    file_krane_ctrl_v1_api,
    file_krane_ctrl_v1_rollout,
    file_krane_ctrl_v1_config,
    file_krane_ctrl_v1_release,
    file_krane_ctrl_v1_job,
    file_krane_ctrl_v1_exposure,
    file_krane_ctrl_v1_notify,
    file_krane_ctrl_v1_access,
    file_krane_ctrl_v1_apply,
    file_krane_ctrl_v1_quota,
    file_krane_ctrl_v1_build,
    file_krane_ctrl_v1_alerts,
    file_krane_ctrl_v1_keys,
    file_krane_ctrl_v1_repository,
  ]
    .flatMap((f) => f.services)
    .flatMap((s) => s.methods);
  // Creates, new revisions and new tokens: a blind repeat could apply them twice.
  const withKey = [
    "WorkspaceService.CreateWorkspace",
    "ProjectService.CreateProject",
    "EnvironmentService.CreateEnvironment",
    "DeploymentService.CreateDeployment",
    "RegionService.CreateRegion",
    "RegionService.CreateClusterToken",
    "ApiTokenService.CreateApiToken",
    "RolloutService.Undo",
    "RolloutService.Restart",
    // Under a key a repeated promote gets the first answer instead of moving one more step.
    "RolloutService.Promote",
    // Each rollback goes one revision further back.
    "RolloutService.Rollback",
    "RolloutService.Abort",
    // A secret value is sealed afresh on every call, so a repeat would make a second revision.
    "ConfigService.SetSecrets",
    // A second add of the same name would be refused (already_exists) instead of answered.
    "PolicyService.AddPolicy",
    // A new channel, a sent test message, an invitation, a service account.
    "NotificationService.AddChannel",
    "NotificationService.TestChannel",
    "MemberService.InviteMember",
    "MemberService.CreateServiceAccount",
    // Each start queues one more build (and cancels the one before).
    "BuildService.StartBuild",
    // A second add of the same rule would be refused (already_exists) instead of answered.
    "AlertService.AddAlertRule",
    // Each create makes another key.
    "ApiKeyService.CreateApiKey",
    // A second connect would be refused (already_exists) instead of answered.
    "RepositoryService.ConnectRepository",
  ];
  const name = (m: (typeof all)[number]) => `${m.parent.name}.${m.name}`;
  assert.deepEqual(
    all.filter((m) => repeatable(m) === "with-key").map(name),
    withKey.filter((k) => all.some((m) => name(m) === k)),
  );
  assert.equal(all.filter((m) => repeatable(m) === "as-is").length, all.length - withKey.length);
});

/** A WorkspaceService whose calls fail with `failures` (in order) before they answer. */
function flaky(
  failures: ConnectError[],
  windowMs: number,
  progress: string[],
  opts: { keys?: boolean; now?: () => number } = {},
) {
  const calls = { list: 0, create: 0, keys: [] as (string | null)[] };
  const transport = createRouterTransport(
    ({ service }) => {
      service(WorkspaceService, {
        listWorkspaces() {
          const f = failures[calls.list++];
          if (f) throw f;
          return { workspaces: [{ slug: "acme" }] };
        },
        createWorkspace(req, ctx) {
          calls.keys.push(ctx.requestHeader.get(IDEMPOTENCY_KEY_HEADER));
          const f = failures[calls.create++];
          if (f) throw f;
          return { workspace: { slug: req.slug } };
        },
        getWorkspace() {
          throw new ConnectError("workspace x not found", Code.NotFound);
        },
      });
    },
    {
      transport: {
        interceptors: [
          ...(opts.keys ? [idempotencyKeys("inv-1")] : []),
          outageRetry({
            windowMs,
            ctrlUrl: "http://ctrl:7070",
            progress: (l) => progress.push(l),
            policy: { baseMs: 2, capMs: 10, minMs: 1 },
            ...(opts.now ? { now: opts.now } : {}),
          }),
        ],
      },
    },
  );
  return { client: createClient(WorkspaceService, transport), calls };
}

const dbDown = new ConnectError(
  "ctrl's database (PostgreSQL) is unavailable: connection refused; the request was not applied, try again later",
  Code.Unavailable,
);

test("a read is repeated while the database is down and succeeds once it is back, with a line per retry", async () => {
  const progress: string[] = [];
  const { client, calls } = flaky(
    [
      dbDown,
      dbDown,
      new ConnectError(
        "ctrl's database (PostgreSQL) is out of capacity: no free connection; the request was not applied, try again later",
        Code.ResourceExhausted,
      ),
    ],
    5000,
    progress,
  );
  const res = await client.listWorkspaces({});
  assert.deepEqual(
    res.workspaces.map((w) => w.slug),
    ["acme"],
  );
  assert.equal(calls.list, 4);
  assert.equal(progress.length, 3);
  assert.match(
    progress[0] ?? "",
    /^krane: ctrl's database \(PostgreSQL\) is unavailable: connection refused; .* retrying ListWorkspaces in \d+\.\d s \(\d+\.\d s left\)$/,
  );
});

test("it gives up after the window with what is down, and never waits past it", async () => {
  // A clock that moves 25 ms each time the retry reads it, so how many tries fit in the 60 ms
  // window does not depend on how busy the machine is: started = 0, then 25 and 50 leave time
  // (35 and 10 ms), and 75 is past the window.
  let t = -25;
  const now = () => (t += 25);
  const progress: string[] = [];
  const { client, calls } = flaky(
    Array.from({ length: 10_000 }, () => dbDown),
    60,
    progress,
    { now },
  );
  const err = await client.listWorkspaces({}).then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
  assert.equal(err?.code, Code.Unavailable);
  assert.match(err?.rawMessage ?? "", /^ctrl's database \(PostgreSQL\) is unavailable: .* \(retried for 0\.1 s\)$/);
  assert.equal(calls.list, 3);
  assert.equal(progress.length, 2);
  // Each wait is cut to what is left of the window, never past it.
  assert.match(progress[1] ?? "", /retrying ListWorkspaces in 0\.0 s \(0\.0 s left\)$/);
});

test("ctrl itself unreachable is named as such; a create without an idempotency key is not repeated", async () => {
  const progress: string[] = [];
  const refused = new ConnectError("connect ECONNREFUSED 127.0.0.1:7070", Code.Unavailable);
  const { client, calls } = flaky([refused], 0, progress);
  const read = await client.listWorkspaces({}).then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
  assert.match(
    read?.rawMessage ?? "",
    /^ctrl is not reachable at http:\/\/ctrl:7070 \(.*ECONNREFUSED.*\): is it running\?$/,
  );
  const write = await client.createWorkspace({ slug: "x" }).then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
  assert.equal(write?.code, Code.Unavailable);
  assert.match(
    write?.rawMessage ?? "",
    /CreateWorkspace is not repeated automatically \(it is not idempotent without an Idempotency-Key\)/,
  );
  assert.equal(calls.create, 1);
  assert.deepEqual(progress, []);
});

test("a create carrying an idempotency key is repeated with the same key; the next call gets a new one", async () => {
  const progress: string[] = [];
  const { client, calls } = flaky([dbDown, dbDown], 5000, progress, { keys: true });
  const res = await client.createWorkspace({ slug: "x" });
  assert.equal(res.workspace?.slug, "x");
  assert.equal(calls.create, 3);
  assert.deepEqual(calls.keys, ["inv-1:1", "inv-1:1", "inv-1:1"], "every attempt of one call carries its key");
  assert.equal(progress.length, 2);
  await client.createWorkspace({ slug: "y" });
  assert.equal(calls.keys.at(-1), "inv-1:2");
});

test("other errors pass straight through", async () => {
  const progress: string[] = [];
  const { client } = flaky([], 5000, progress);
  const err = await client.getWorkspace({ workspace: "x" }).then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
  assert.equal(err?.code, Code.NotFound);
  assert.equal(err?.rawMessage, "workspace x not found");
  assert.deepEqual(progress, []);
});

test("durations", () => {
  assert.equal(parseDuration("10s"), 10_000);
  assert.equal(parseDuration("500ms"), 500);
  assert.equal(parseDuration("2m"), 120_000);
  assert.equal(parseDuration("1.5"), 1500);
  assert.equal(parseDuration("0"), 0);
  assert.throws(() => parseDuration("soon"), /expected a duration/);
  assert.throws(() => parseDuration("-1s"), /expected a duration/);
});

test("a limit of the caller's (resource_exhausted from ctrl itself) is an answer, not an outage", async () => {
  const progress: string[] = [];
  const limit = new ConnectError(
    'workspace "acme" is at its preview limit max_previews (2): its previews use 2, this one needs 1 more',
    Code.ResourceExhausted,
  );
  const { client, calls } = flaky([limit], 5000, progress);
  await assert.rejects(client.listWorkspaces({}), (e) => ConnectError.from(e).rawMessage === limit.rawMessage);
  assert.equal(calls.list, 1, "not repeated");
  assert.deepEqual(progress, []);
});
