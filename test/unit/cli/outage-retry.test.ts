// The CLI's behaviour in an outage (src/cli/user-client.ts): which calls it repeats, for how long,
// what it prints, and the error it ends with. The calls are real Connect calls through an
// in-memory router whose handlers fail on demand.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { file_krane_ctrl_v1_api, WorkspaceService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { file_krane_ctrl_v1_rollout } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { file_krane_ctrl_v1_exposure } from "../../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { methodKey, NOT_RETRIED, outageRetry, parseDuration, RETRY_SAFE } from "../../../src/cli/user-client.js";

test("every public method is either repeated after an outage or explicitly not (a new method needs a decision)", () => {
  const all = [file_krane_ctrl_v1_api, file_krane_ctrl_v1_rollout, file_krane_ctrl_v1_exposure].flatMap((f) => f.services).flatMap((s) => s.methods).map(methodKey);
  const undecided = all.filter((k) => !RETRY_SAFE.has(k) && !NOT_RETRIED.has(k));
  assert.deepEqual(undecided, []);
  assert.deepEqual([...RETRY_SAFE].filter((k) => NOT_RETRIED.has(k)), []);
  assert.deepEqual([...RETRY_SAFE, ...NOT_RETRIED].filter((k) => !all.includes(k)), [], "names of methods that do not exist");
});

/** A WorkspaceService whose calls fail with `failures` (in order) before they answer. */
function flaky(failures: ConnectError[], windowMs: number, progress: string[]) {
  const calls = { list: 0, create: 0 };
  const transport = createRouterTransport(
    ({ service }) => {
      service(WorkspaceService, {
        listWorkspaces() {
          const f = failures[calls.list++];
          if (f) throw f;
          return { workspaces: [{ slug: "acme" }] };
        },
        createWorkspace() {
          calls.create++;
          throw failures[0] ?? new ConnectError("no", Code.Internal);
        },
        getWorkspace() {
          throw new ConnectError("workspace x not found", Code.NotFound);
        },
      });
    },
    { transport: { interceptors: [outageRetry({ windowMs, ctrlUrl: "http://ctrl:7070", progress: (l) => progress.push(l), policy: { baseMs: 2, capMs: 10, minMs: 1 } })] } },
  );
  return { client: createClient(WorkspaceService, transport), calls };
}

const dbDown = new ConnectError("ctrl's database (PostgreSQL) is unavailable: connection refused; the request was not applied, try again later", Code.Unavailable);

test("a read is repeated while the database is down and succeeds once it is back, with a line per retry", async () => {
  const progress: string[] = [];
  const { client, calls } = flaky([dbDown, dbDown, new ConnectError("no free connection", Code.ResourceExhausted)], 5000, progress);
  const res = await client.listWorkspaces({});
  assert.deepEqual(res.workspaces.map((w) => w.slug), ["acme"]);
  assert.equal(calls.list, 4);
  assert.equal(progress.length, 3);
  assert.match(progress[0] ?? "", /^krane: ctrl's database \(PostgreSQL\) is unavailable: connection refused; .* retrying ListWorkspaces in \d+\.\d s \(\d+\.\d s left\)$/);
});

test("it gives up after the window with what is down, and never waits past it", async () => {
  const progress: string[] = [];
  const { client, calls } = flaky(Array.from({ length: 10_000 }, () => dbDown), 60, progress);
  const started = Date.now();
  const err = await client.listWorkspaces({}).then(() => undefined, (e: unknown) => ConnectError.from(e));
  assert.equal(err?.code, Code.Unavailable);
  assert.match(err?.rawMessage ?? "", /^ctrl's database \(PostgreSQL\) is unavailable: .* \(retried for 0\.1 s\)$/);
  assert.ok(Date.now() - started >= 60);
  assert.ok(calls.list >= 2 && calls.list === progress.length + 1);
});

test("ctrl itself unreachable is named as such; a call that is not idempotent is not repeated", async () => {
  const progress: string[] = [];
  const refused = new ConnectError("connect ECONNREFUSED 127.0.0.1:7070", Code.Unavailable);
  const { client, calls } = flaky([refused], 0, progress);
  const read = await client.listWorkspaces({}).then(() => undefined, (e: unknown) => ConnectError.from(e));
  assert.match(read?.rawMessage ?? "", /^ctrl is not reachable at http:\/\/ctrl:7070 \(.*ECONNREFUSED.*\): is it running\?$/);
  const write = await client.createWorkspace({ slug: "x" }).then(() => undefined, (e: unknown) => ConnectError.from(e));
  assert.equal(write?.code, Code.Unavailable);
  assert.match(write?.rawMessage ?? "", /CreateWorkspace is not repeated automatically/);
  assert.equal(calls.create, 1);
  assert.deepEqual(progress, []);
});

test("other errors pass straight through", async () => {
  const progress: string[] = [];
  const { client } = flaky([], 5000, progress);
  const err = await client.getWorkspace({ workspace: "x" }).then(() => undefined, (e: unknown) => ConnectError.from(e));
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
