// Fault scenarios of ctrl and its database, with real processes and no cluster: `krane ctrl
// serve` children on SQLite or PostgreSQL, a burst of writes through the public API (each with an
// Idempotency-Key, repeated on unavailable until acknowledged, as the CLI does), and the agent's
// own stream loop reading a region's stream throughout. Faults: ctrl killed with SIGKILL every
// few hundred milliseconds; PostgreSQL restarted (one or two ctrl replicas). Checks: every
// acknowledged write present exactly once and no write twice; the outbox dense and replaying to
// the desired state; the stream saw every version once, in order; and the recovery times.
import { join } from "node:path";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import pg from "pg";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import type { ApplyDeployment, DeleteDeployment, DeploymentState } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { createCtrlClient } from "../../../src/agent/ctrl-client.js";
import { deploymentsController } from "../../../src/agent/deployments/controller.js";
import { DesiredStateStream } from "../../../src/agent/runtime/stream.js";
import { silentLogger } from "../../../src/base/log.js";
import { Store } from "../../../src/ctrl/db/store.js";
import { ChainVerifier } from "../../../src/contracts/audit.js";
import { chainHead, recordOfRow } from "../../../src/ctrl/domain/audit.js";
import { generateToken } from "../../../src/ctrl/domain/tokens.js";
import { transportFor } from "../../integration/ctrl/support.js";
import type { TestPostgres } from "../postgres.js";
import { outboxIntegrity } from "./checks.js";
import { CtrlChild, sleep, until } from "./processes.js";

const REF = { workspace: "acme", project: "web", environment: "prod" };
const REGION = "burst";

/** Writes through the public API, each repeated under its key until acknowledged. */
class Writer {
  readonly acked = new Map<string, number>();
  /** Writes whose repeats were told "applied, answer lost" (CreateDeployment rebuilds its answer: target 0). */
  readonly appliedWithoutAnswer = new Set<string>();
  /** Answers that were repeats (header Idempotency-Replayed). */
  replayed = 0;
  /** Answers naming another image than the request's: a wrong first answer (target none). */
  readonly wrongAnswers: string[] = [];
  readonly attempted = new Set<string>();
  attempts = 0;
  #stop = false;
  readonly #clients: Client<typeof DeploymentService>[];

  constructor(urls: string[], token: string) {
    this.#clients = urls.map((u) => createClient(DeploymentService, transportFor(u, token)));
  }

  /** Runs `count` creates from `concurrency` loops; resolves when all are acknowledged (or stopped). */
  async run(count: number, concurrency: number, prefix: string): Promise<void> {
    let next = 0;
    const loop = async (lane: number): Promise<void> => {
      while (!this.#stop) {
        const i = next++;
        if (i >= count) return;
        const image = `registry.example.com/web:${prefix}-${i}`;
        this.attempted.add(image);
        const key = `${prefix}-${i}`;
        for (let attempt = 0; !this.#stop; attempt++) {
          const client = this.#clients[(lane + attempt) % this.#clients.length] as Client<typeof DeploymentService>;
          this.attempts++;
          try {
            let replayed = false;
            const res = await client.createDeployment(
              { ...REF, image },
              {
                headers: { "idempotency-key": key },
                timeoutMs: 10_000,
                onHeader: (h) => (replayed = h.get("idempotency-replayed") === "true"),
              },
            );
            if (replayed) this.replayed++;
            if (res.deployment?.image !== image)
              this.wrongAnswers.push(`${key}: asked for ${image}, answered ${res.deployment?.image ?? "nothing"}`);
            this.acked.set(image, Date.now());
            break;
          } catch (err) {
            const ce = ConnectError.from(err);
            if (ce.code === Code.AlreadyExists && /answer was lost/.test(ce.rawMessage)) {
              this.appliedWithoutAnswer.add(image);
              this.acked.set(image, Date.now());
              break;
            }
            if (
              ![
                Code.Unavailable,
                Code.ResourceExhausted,
                Code.DeadlineExceeded,
                Code.Unknown,
                Code.Internal,
                Code.Aborted,
                Code.Canceled,
              ].includes(ce.code)
            )
              throw ce;
            await sleep(50 + Math.random() * 100);
          }
        }
      }
    };
    await Promise.all(Array.from({ length: concurrency }, (_, lane) => loop(lane)));
  }

  stop(): void {
    this.#stop = true;
  }
}

/** The agent's stream loop on the region's deployments, recording each version it handled. */
class StreamReader {
  readonly versions: bigint[] = [];
  readonly seenAt = new Map<bigint, number>();
  snapshots = 0;
  readonly #ac = new AbortController();
  readonly #stream: DesiredStateStream<DeploymentState, ApplyDeployment, DeleteDeployment>;
  readonly #running: Promise<void>;

  constructor(url: string, token: string) {
    const protocol = deploymentsController({
      region: REGION,
      ctrl: createCtrlClient(url, token),
    }).protocol;
    let inSnapshot = false;
    this.#stream = new DesiredStateStream<DeploymentState, ApplyDeployment, DeleteDeployment>({
      name: "deployments",
      log: silentLogger,
      reconnect: { baseMs: 100, capMs: 1000, minMs: 50 },
      open: (cursor, call) => protocol.watch(cursor, call),
      decode: (msg) => {
        const ev = protocol.decode(msg);
        if (ev.type === "snapshot-start") {
          inSnapshot = true;
          this.snapshots++;
        } else if (ev.type === "snapshot-end") inSnapshot = false;
        else if ((ev.type === "apply" || ev.type === "delete") && !inSnapshot) {
          this.versions.push(ev.version);
          this.seenAt.set(ev.version, Date.now());
        }
        return ev;
      },
      onAction: () => undefined,
      onConnectedChange: (c) => {
        if (!c) inSnapshot = false;
      },
    });
    this.#running = this.#stream.run(this.#ac.signal);
  }

  get cursor(): bigint {
    return this.#stream.cursor;
  }

  /** Versions handled outside snapshots that did not follow the one before by exactly 1. */
  skipsOrRepeats(): string[] {
    const out: string[] = [];
    for (let i = 1; i < this.versions.length; i++) {
      const [a, b] = [this.versions[i - 1] as bigint, this.versions[i] as bigint];
      if (b !== a + 1n) out.push(`${a} → ${b}`);
    }
    return out;
  }

  async stop(): Promise<void> {
    this.#ac.abort();
    await this.#running;
  }
}

async function seed(url: string, admin: string): Promise<string> {
  const t = transportFor(url, admin);
  await createClient(RegionService, t).createRegion({ name: REGION });
  await createClient(WorkspaceService, t).createWorkspace({ slug: "acme" });
  await createClient(ProjectService, t).createProject({ workspace: "acme", slug: "web" });
  await createClient(EnvironmentService, t).createEnvironment({
    ...REF,
    slug: "prod",
    regions: [{ region: REGION, replicas: 1 }],
    rollout: { revisionHistoryLimit: 100 },
  });
  return (await createClient(RegionService, t).createClusterToken({ region: REGION })).token;
}

/**
 * The audit log against the deployments there are: every revision (acknowledged or not: it
 * committed) has exactly one accepted CreateDeployment event naming it, no event names a revision
 * that is not there (a change rolled back by the kill), and every chain verifies.
 */
async function auditIntegrity(store: Store): Promise<string[]> {
  const problems: string[] = [];
  const deployments = new Set((await store.db.selectFrom("deployments").select("id").execute()).map((d) => d.id));
  const events = await store.db
    .selectFrom("audit_events")
    .select(["targets"])
    .where("method", "=", "DeploymentService/CreateDeployment")
    .where("code", "=", "ok")
    .execute();
  const named = new Map<string, number>();
  for (const e of events) {
    const id = (JSON.parse(e.targets) as string[]).find((t) => t.startsWith("dep_"));
    if (id !== undefined) named.set(id, (named.get(id) ?? 0) + 1);
  }
  const missing = [...deployments].filter((d) => !named.has(d));
  const twice = [...named].filter(([, n]) => n > 1).map(([d]) => d);
  const ghosts = [...named.keys()].filter((d) => !deployments.has(d));
  if (missing.length)
    problems.push(`${missing.length} revisions without their audit event: ${missing.slice(0, 5).join(", ")}`);
  if (twice.length) problems.push(`${twice.length} revisions with two audit events: ${twice.slice(0, 5).join(", ")}`);
  if (ghosts.length)
    problems.push(`${ghosts.length} audit events of changes that are not there: ${ghosts.slice(0, 5).join(", ")}`);
  for (const { workspace_id: ws } of await store.db.selectFrom("audit_chains").select("workspace_id").execute()) {
    const v = new ChainVerifier(await chainHead(store.db, ws));
    for (const row of await store.db
      .selectFrom("audit_events")
      .selectAll()
      .where("workspace_id", "=", ws)
      .orderBy("seq")
      .execute())
      v.add(recordOfRow(row));
    for (const p of v.finish()) problems.push(`audit chain "${ws}": ${p.problem}`);
  }
  return problems;
}

export interface DbScenarioResult {
  readonly name: string;
  readonly passed: boolean;
  readonly problems: string[];
  readonly acknowledged: number;
  /** Acknowledged writes missing afterwards (target 0). */
  readonly lost: number;
  /** Writes present more than once (target 0). */
  readonly duplicated: number;
  readonly notes: Record<string, number | string>;
}

/** What the database holds against what the writer saw acknowledged; the outbox; the stream. */
async function verify(
  database: string,
  writer: Writer,
  reader: StreamReader,
): Promise<{ problems: string[]; lost: number; duplicated: number; versions: number }> {
  const problems: string[] = [];
  const store = await Store.open({ url: database, poolSize: 2 });
  try {
    const rows = await store.db.selectFrom("deployments").select(["image"]).execute();
    const count = new Map<string, number>();
    for (const r of rows) count.set(r.image, (count.get(r.image) ?? 0) + 1);
    const lost = [...writer.acked.keys()].filter((i) => (count.get(i) ?? 0) === 0);
    const duplicated = [...count].filter(([, n]) => n > 1).map(([i]) => i);
    if (lost.length) problems.push(`${lost.length} acknowledged writes missing: ${lost.slice(0, 5).join(", ")}`);
    if (duplicated.length)
      problems.push(`${duplicated.length} writes applied twice: ${duplicated.slice(0, 5).join(", ")}`);
    if (writer.wrongAnswers.length)
      problems.push(
        `${writer.wrongAnswers.length} answers for another request: ${writer.wrongAnswers.slice(0, 3).join("; ")}`,
      );
    if (writer.appliedWithoutAnswer.size)
      problems.push(`${writer.appliedWithoutAnswer.size} repeats told "applied, answer lost" instead of an answer`);
    const outbox = await outboxIntegrity(store.db);
    problems.push(...outbox.problems);
    problems.push(...(await auditIntegrity(store)));
    const head = await store.db
      .selectFrom("stream_versions")
      .select("version")
      .where("region", "=", REGION)
      .where("kind", "=", "deployment")
      .executeTakeFirstOrThrow();
    const reached = await until(() => (reader.cursor >= BigInt(head.version) ? true : undefined), 15_000, 50);
    if (!reached) problems.push(`the stream stopped at ${reader.cursor}, ctrl's head is ${head.version}`);
    const gaps = reader.skipsOrRepeats();
    if (gaps.length) problems.push(`the stream skipped or repeated versions: ${gaps.slice(0, 5).join(", ")}`);
    return { problems, lost: lost.length, duplicated: duplicated.length, versions: outbox.versions };
  } finally {
    await store.close();
  }
}

/**
 * `kill -9` of ctrl during a burst of `writes` creates, each time within `everyMs` of its first
 * acknowledged write since the restart (at most `maxKills` times); restarted at once.
 * Reports kills, acknowledged, lost, duplicated, and how long ctrl took to be ready after each start.
 */
export async function ctrlKilledDuringWrites(
  database: string,
  dir: string,
  o: { writes: number; everyMs: number; concurrency: number; maxKills?: number },
): Promise<DbScenarioResult & { kills: number; readyMs: number[] }> {
  const admin = generateToken("user");
  const ctrl = await CtrlChild.create(database, dir, admin);
  const readyMs: number[] = [];
  let kills = 0;
  const writer = new Writer([ctrl.url], admin);
  let reader: StreamReader | undefined;
  try {
    await ctrl.startReady();
    reader = new StreamReader(ctrl.url, await seed(ctrl.url, admin));
    const burst = writer.run(o.writes, o.concurrency, "k");
    let done = false;
    void burst.finally(() => (done = true));
    while (!done && kills < (o.maxKills ?? Infinity)) {
      // Killed a random moment (up to everyMs) after the restarted ctrl acknowledged a write, so
      // kills land in the middle of writes however slowly a loaded machine starts ctrl.
      const acked = writer.acked.size;
      await until(() => (done || writer.acked.size > acked ? true : undefined), 30_000, 5);
      await sleep(o.everyMs * Math.random());
      if (done) break;
      await ctrl.kill9();
      kills++;
      const started = Date.now();
      ctrl.start();
      readyMs.push((await ctrl.ready()) - started);
    }
    await burst;
    const v = await verify(database, writer, reader);
    return {
      name: `ctrl kill -9 every ~${o.everyMs} ms during ${o.writes} creates (${database.startsWith("postgres") ? "PostgreSQL" : "SQLite"})`,
      passed: v.problems.length === 0,
      problems: v.problems,
      acknowledged: writer.acked.size,
      lost: v.lost,
      duplicated: v.duplicated,
      notes: {
        attempts: writer.attempts,
        replayed: writer.replayed,
        appliedAnswerLost: writer.appliedWithoutAnswer.size,
        outboxVersions: v.versions,
        streamVersions: reader.versions.length,
      },
      kills,
      readyMs,
    };
  } finally {
    writer.stop();
    await reader?.stop();
    await ctrl.stop();
  }
}

async function pgAccepts(url: string): Promise<boolean | undefined> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 500 });
  try {
    await c.connect();
    await c.query("SELECT 1");
    return true;
  } catch {
    return undefined;
  } finally {
    await c.end().catch(() => undefined);
  }
}

/**
 * PostgreSQL restarted `cycles` times (stopped for `downMs`) under a steady stream of creates, with
 * `replicas` ctrl processes sharing it and the agent's stream reading from the last replica.
 * Per cycle: each replica's readiness after PostgreSQL accepts connections again; and the time
 * from then until a create made through the first replica reaches the stream on the last one
 * (with two replicas, that is the LISTEN/NOTIFY path).
 */
export async function postgresRestarts(
  postgres: TestPostgres,
  dir: string,
  o: { replicas: number; cycles: number; downMs: number },
): Promise<DbScenarioResult & { readyMs: number[]; crossMs: number[] }> {
  const database = await postgres.newDatabase();
  const admin = generateToken("user");
  const ctrls: CtrlChild[] = [];
  for (let i = 0; i < o.replicas; i++) ctrls.push(await CtrlChild.create(database, dir, admin));
  const first = ctrls[0] as CtrlChild;
  const last = ctrls[ctrls.length - 1] as CtrlChild;
  const writer = new Writer(
    ctrls.map((c) => c.url),
    admin,
  );
  let reader: StreamReader | undefined;
  const readyMs: number[] = [];
  const crossMs: number[] = [];
  const problems: string[] = [];
  const probe = createClient(DeploymentService, transportFor(first.url, admin));
  try {
    for (const c of ctrls) await c.startReady();
    const stream = new StreamReader(last.url, await seed(first.url, admin));
    reader = stream;
    const burst = writer.run(1_000_000, 2, "pg");
    for (let cycle = 0; cycle < o.cycles; cycle++) {
      await sleep(1000);
      await postgres.halt();
      await sleep(o.downMs);
      await postgres.resume();
      const back =
        (await until(() => pgAccepts(database).then((ok) => (ok ? Date.now() : undefined)), 30_000, 10)) ?? Date.now();
      for (const c of ctrls) readyMs.push((await c.ready(30_000)) - back);
      // A change through the first replica, seen on the stream of the last.
      const image = `registry.example.com/web:probe-${cycle}`;
      const before = stream.cursor;
      await until(
        () =>
          probe
            .createDeployment({ ...REF, image }, { headers: { "idempotency-key": `probe-${cycle}` } })
            .then(() => true),
        10_000,
        50,
      );
      const seen = await until(() => (stream.cursor > before ? Date.now() : undefined), 10_000, 5);
      if (seen === undefined)
        problems.push(
          `cycle ${cycle + 1}: the change made through the first replica did not reach the stream on the last within 10 s`,
        );
      else crossMs.push(seen - back);
    }
    await sleep(1000);
    writer.stop();
    await burst;
    const v = await verify(database, writer, stream);
    problems.push(...v.problems);
    return {
      name: `PostgreSQL restarted ${o.cycles}× under writes, ${o.replicas} ctrl replica${o.replicas > 1 ? "s" : ""}`,
      passed: problems.length === 0,
      problems,
      acknowledged: writer.acked.size,
      lost: v.lost,
      duplicated: v.duplicated,
      notes: { attempts: writer.attempts, outboxVersions: v.versions, streamVersions: stream.versions.length },
      readyMs,
      crossMs,
    };
  } finally {
    writer.stop();
    await reader?.stop();
    for (const c of ctrls) await c.stop();
  }
}

export function sqliteUrl(dir: string, name: string): string {
  return join(dir, name);
}
