// Audit and preview figures (`npm run bench -- audit`), in one run on this machine:
//  - the audit log's cost on the write path: ctrl's rate of keyed CreateDeployment calls (and of
//    UpdateEnvironment, whose diff reads the whole environment) with the log recording and with
//    it off, alternating rounds on fresh databases, SQLite and PostgreSQL (target: at most 10 %
//    slower). ctrl runs in a process of its own (bench/audit/audit-ctrl.ts); 8 writers in this one;
//    beside it, what a user would otherwise have: the same events appended as JSON lines to a
//    file, one write per event as a Kubernetes-style audit log file backend does (and with an
//    fdatasync per event, which is what matching the log's durability would take);
//  - export: ExportAuditEvents streaming a chain of KRANE_BENCH_AUDIT_EXPORT (50,000) events
//    through ctrl (events/s, MiB/s), beside reading the same events from an NDJSON file;
//  - from a signed GitHub pull-request delivery to the preview's URL answering through the
//    Gateway (the local cluster with Traefik and pod stand-ins; the image "present": stand-ins
//    start at once), p50/p99 (target ≤ 60 s), beside the same environment made by the API calls
//    a user would otherwise script (create environment, endpoint, deployment);
//  - from the close delivery to everything deleted: no object labelled with the preview's
//    environment left in the cluster and no row of it in ctrl (target ≤ 5 min).
// KRANE_BENCH_AUDIT_ROUNDS (3), KRANE_BENCH_AUDIT_CREATES (1500), KRANE_BENCH_AUDIT_WARMUP (200 calls
// before each measure), KRANE_BENCH_AUDIT_EXPORT (50,000), KRANE_BENCH_AUDIT_PREVIEWS (10);
// KRANE_BENCH_AUDIT_ONLY=writes|previews runs one part.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import {
  closeSync,
  createReadStream,
  fdatasyncSync,
  mkdtempSync,
  openSync,
  rmSync,
  statSync,
  writeSync,
} from "node:fs";
import { request as httpRequest } from "node:http";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Registry } from "prom-client";
import { Agent } from "../../src/agent/agent.js";
import { parseGatewayRef } from "../../src/agent/config.js";
import { agentKubeConfigFrom } from "../../src/agent/rbac.js";
import { silentLogger } from "../../src/base/log.js";
import { podAddressMap, startCluster } from "../../src/cluster/index.js";
import { auditRecordToJson } from "../../src/contracts/audit.js";
import { recordOf } from "../../src/cli/audit-records.js";
import { LABEL_ENVIRONMENT_ID } from "../../src/contracts/labels.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { AuditService } from "../../src/gen/krane/ctrl/v1/audit_pb.js";
import { EndpointService } from "../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { PreviewService } from "../../src/gen/krane/ctrl/v1/preview_pb.js";
import { KubeClient } from "../../src/kube/client.js";
import { resources, type ResourceType } from "../../src/kube/resources.js";
import { applySentinelRbac } from "../../src/sentinel/rbac.js";
import { deliver, githubDelivery } from "../../test/support/git-providers.js";
import { randomKeyring, startTestCtrl, type TestCtrl } from "../../test/integration/ctrl/support.js";
import { startPostgres } from "../../test/support/postgres.js";
import { percentileOf, ROOT, until } from "../support.js";
import { seedAuditEvents } from "../../test/support/audit-events.js";

const ROUNDS = Number(process.env.KRANE_BENCH_AUDIT_ROUNDS ?? 3);
const CREATES = Number(process.env.KRANE_BENCH_AUDIT_CREATES ?? 1500);
const PREVIEWS = Number(process.env.KRANE_BENCH_AUDIT_PREVIEWS ?? 10);
const EXPORTED = Number(process.env.KRANE_BENCH_AUDIT_EXPORT ?? 50_000);
const WARMUP = Number(process.env.KRANE_BENCH_AUDIT_WARMUP ?? 200);
const ONLY = process.env.KRANE_BENCH_AUDIT_ONLY;
const WRITERS = 8;

const loadNow = (): string => loadavg()[0]?.toFixed(1) ?? "?";

function bearer(token: string): Interceptor[] {
  return [(next) => (req) => (req.header.set("authorization", `Bearer ${token}`), next(req))];
}

/** ctrl in a process of its own, recording the audit log or not. */
async function ctrlChild(
  database: string,
  mode: "on" | "off" | "serve",
): Promise<{ url: string; token: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, "bench/audit/audit-ctrl.ts"), database, mode], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, KRANE_LOG_LEVEL: "warn" },
  });
  const line = await new Promise<string>((resolve, reject) => {
    const rl = createInterface({ input: child.stdout! });
    rl.once("line", resolve);
    child.once("exit", (code) => reject(new Error(`bench ctrl exited with ${code}`)));
  });
  const { url, token } = JSON.parse(line) as { url: string; token: string };
  return { url, token, child };
}

/** Calls per second of `call` from WRITERS concurrent writers, `n` calls in all. */
async function rate(n: number, call: (i: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: WRITERS }, async () => {
      for (let i = next++; i < n; i = next++) await call(i);
    }),
  );
  return n / ((performance.now() - started) / 1000);
}

async function writeRates(
  database: () => Promise<string>,
  mode: "on" | "off",
): Promise<{ create: number; update: number }> {
  const c = await ctrlChild(await database(), mode);
  try {
    const t = createConnectTransport({ baseUrl: c.url, httpVersion: "2", interceptors: bearer(c.token) });
    const deployments = createClient(DeploymentService, t);
    const envs = createClient(EnvironmentService, t);
    const ref = { workspace: "acme", project: "shop", environment: "prod" };
    const key = randomBytes(4).toString("hex");
    // Warm-up: connections, JIT, the database's caches.
    await rate(WARMUP, (i) =>
      deployments.createDeployment(
        { ...ref, image: `r.io/shop:w${i}` },
        { headers: { "idempotency-key": `${key}-w${i}` } },
      ),
    );
    const create = await rate(CREATES, (i) =>
      deployments.createDeployment(
        { ...ref, image: `r.io/shop:${i}` },
        { headers: { "idempotency-key": `${key}-${i}` } },
      ),
    );
    const update = await rate(Math.round(CREATES / 3), (i) =>
      envs.updateEnvironment({ ...ref, regions: [{ region: "bench", replicas: 1 + (i % 3) }] }),
    );
    return { create, update };
  } finally {
    c.child.kill("SIGTERM");
    await once(c.child, "exit");
  }
}

const median = (v: number[]): number => percentileOf(v, 50);

const WS = "ws_benchbenchbenchbenchb";

/**
 * A chain of EXPORTED events written straight into the database (the shape of an environment
 * update with six changed settings), then: ExportAuditEvents of the chain through ctrl, each event
 * made the JSON line `krane audit export --format ndjson` writes; those lines in a file, written
 * one write per event (a Kubernetes-style audit log file) and with an fdatasync each; reading that
 * file back.
 */
async function exportAndFile(name: string, database: string, dir: string): Promise<void> {
  await seedAuditEvents(database, WS, EXPORTED);
  const file = join(dir, `events-${randomBytes(4).toString("hex")}.ndjson`);
  const c = await ctrlChild(database, "serve");
  try {
    const t = createConnectTransport({ baseUrl: c.url, httpVersion: "2", interceptors: bearer(c.token) });
    const client = createClient(AuditService, t);
    const lines: string[] = [];
    let bytes = 0;
    const t0 = performance.now();
    for await (const batch of client.exportAuditEvents({ filter: { workspace: WS } }, { timeoutMs: 0 }))
      for (const e of batch.events) {
        // What `krane audit export --format ndjson` does with each event.
        const line = `${JSON.stringify(auditRecordToJson(recordOf(e)))}\n`;
        lines.push(line);
        bytes += line.length;
      }
    const s = (performance.now() - t0) / 1000;
    const n = lines.length;
    if (n !== EXPORTED) throw new Error(`export gave ${n} events of ${EXPORTED}`);

    const perEvent = (synced: boolean): number => {
      rmSync(file, { force: true });
      const fd = openSync(file, "a");
      const w0 = performance.now();
      for (const l of lines) {
        writeSync(fd, l);
        if (synced) fdatasyncSync(fd);
      }
      const us = ((performance.now() - w0) * 1000) / lines.length;
      closeSync(fd);
      return us;
    };
    const synced = perEvent(true);
    const plain = perEvent(false);
    console.log(
      `audit: beside it, a Kubernetes-style audit log file: ${plain.toFixed(1)} µs per event appended (one write each), ${synced.toFixed(0)} µs with an fdatasync each`,
    );

    let read = 0;
    const r0 = performance.now();
    for await (const line of createInterface({ input: createReadStream(file), crlfDelay: Infinity })) {
      JSON.parse(line);
      read++;
    }
    const rs = (performance.now() - r0) / 1000;
    const mib = statSync(file).size / 1024 / 1024;
    console.log(
      `audit: ${name} ExportAuditEvents of ${n} events: ${(n / s).toFixed(0)} events/s (${(bytes / 1024 / 1024 / s).toFixed(1)} MiB/s as JSON); reading the same ${mib.toFixed(0)} MiB NDJSON file: ${(read / rs).toFixed(0)} events/s (load ${loadNow()})`,
    );
  } finally {
    c.child.kill("SIGTERM");
    await once(c.child, "exit");
    rmSync(file, { force: true });
  }
}

async function writes(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-audit-"));
  let pg: Awaited<ReturnType<typeof startPostgres>> | undefined;
  try {
    pg = await startPostgres().catch(() => undefined);
    const dbs: [string, () => Promise<string>][] = [
      ["SQLite", async () => join(dir, `${randomBytes(6).toString("hex")}.db`)],
      ...(pg
        ? ([["PostgreSQL", () => (pg as NonNullable<typeof pg>).newDatabase()]] as [string, () => Promise<string>][])
        : []),
    ];
    if (!pg) console.log("audit: PostgreSQL's server binaries are missing (apt-get install postgresql): SQLite only");
    for (const [name, database] of dbs) {
      const on: { create: number; update: number }[] = [];
      const off: { create: number; update: number }[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        // Alternating which goes first, so a drift of the machine's load falls on both alike.
        const order: ("on" | "off")[] = r % 2 === 0 ? ["off", "on"] : ["on", "off"];
        for (const mode of order) {
          const res = await writeRates(database, mode);
          (mode === "on" ? on : off).push(res);
          console.log(
            `audit: ${name} round ${r + 1} audit ${mode.padEnd(3)}: CreateDeployment ${res.create.toFixed(0)}/s, UpdateEnvironment ${res.update.toFixed(0)}/s (load ${loadNow()})`,
          );
        }
      }
      const c = [median(off.map((x) => x.create)), median(on.map((x) => x.create))] as const;
      const u = [median(off.map((x) => x.update)), median(on.map((x) => x.update))] as const;
      const slower = (pair: readonly [number, number]): string => `${((1 - pair[1] / pair[0]) * 100).toFixed(1)} %`;
      console.log(
        `audit: ${name} CreateDeployment, median of ${ROUNDS}: off ${c[0].toFixed(0)}/s, on ${c[1].toFixed(0)}/s — ${slower(c)} slower with the audit log (target ≤ 10 %)`,
      );
      console.log(
        `audit: ${name} UpdateEnvironment, median of ${ROUNDS}: off ${u[0].toFixed(0)}/s, on ${u[1].toFixed(0)}/s — ${slower(u)} slower (its diff reads the environment before and after)`,
      );
      // What each change pays for its event, per call (8 writers: time per call at the server's rate).
      const cost = (pair: readonly [number, number]): string => `${(1e6 / pair[1] - 1e6 / pair[0]).toFixed(0)} µs`;
      console.log(
        `audit: ${name} the event's cost per change: CreateDeployment ${cost(c)}, UpdateEnvironment ${cost(u)}`,
      );
      await exportAndFile(name, await database(), dir);
    }
  } finally {
    await pg?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Everything krane makes for an environment in a cluster, found by its label. */
const KINDS: ResourceType[] = [
  resources.replicaSets,
  resources.pods,
  resources.deployments,
  resources.services,
  resources.configMaps,
  resources.secrets,
  resources.endpointSlices,
  resources.ciliumNetworkPolicies,
  resources.httpRoutes,
];

function get(port: number, host: string): Promise<number> {
  return new Promise((resolve) => {
    const req = httpRequest({ host: "127.0.0.1", port, path: "/", headers: { host }, timeout: 5_000 }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(0));
    req.end();
  });
}

async function previews(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-previews-"));
  const cluster = await startCluster({ name: "bench-previews", standins: true, gateway: true });
  const kube = new KubeClient(cluster.kubeConfig(), { qps: 100, burst: 200 });
  let agent: Agent | undefined;
  let ctrl: TestCtrl | undefined;
  try {
    const gws = cluster.gateways;
    if (!gws) throw new Error("the bench cluster runs no Gateways");
    await applySentinelRbac(cluster.kubeConfig());
    ctrl = await startTestCtrl(join(dir, "ctrl.db"), {
      opsListen: null,
      keyring: randomKeyring(),
      exposure: { publicApex: "preview.bench", scheme: "http" },
      previews: { webhookListen: { host: "127.0.0.1", port: 0 } },
    });
    const t = createConnectTransport({ baseUrl: ctrl.url, httpVersion: "2", interceptors: bearer(ctrl.adminToken) });
    const base = { workspace: "acme", project: "shop", environment: "production" };
    await createClient(RegionService, t).createRegion({ name: "local" });
    await createClient(WorkspaceService, t).createWorkspace({ slug: "acme" });
    await createClient(ProjectService, t).createProject({ workspace: "acme", slug: "shop" });
    const sentinel = { image: "", replicas: 1, cpuMillicores: 100n, memoryMib: 128n };
    await createClient(EnvironmentService, t).createEnvironment({
      ...base,
      slug: base.environment,
      regions: [{ region: "local", replicas: 1 }],
      sentinel,
    });
    await createClient(EndpointService, t).setEndpoint({ ...base, visibility: "public" });
    await createClient(DeploymentService, t).createDeployment({ ...base, image: "ghcr.io/acme/shop:1", port: 8080 });
    const secret = randomBytes(24).toString("hex");
    const { hook } = await createClient(PreviewService, t).createPreviewHook({
      workspace: "acme",
      project: "shop",
      baseEnvironment: "production",
      provider: "github",
      repository: "acme/shop",
      secret,
      imageTemplate: "ghcr.io/acme/shop:{short_sha}",
    });
    if (!hook || !ctrl.webhookUrl) throw new Error("no hook");
    const hookUrl = `${ctrl.webhookUrl}${hook.path}`;
    await createClient(PreviewService, t).setPreviewLimits({
      workspace: "acme",
      limits: { maxPreviews: 1000, maxCpuMillicores: 1_000_000n, maxMemoryMib: 1_000_000n, forkApproval: true },
    });
    agent = new Agent({
      ctrlUrl: ctrl.url,
      token: await ctrl.agentToken("local"),
      region: "local",
      kubeconfig: await agentKubeConfigFrom(cluster.kubeConfig()),
      log: silentLogger,
      registry: new Registry(),
      opsPort: -1,
      podAddressMap: cluster.podNetwork ? podAddressMap(cluster.podNetwork) : undefined,
      gateway: { public: parseGatewayRef(gws.public.ref), organization: parseGatewayRef(gws.organization.ref) },
    });
    await agent.start();
    const answers = async (host: string): Promise<void> => {
      await until(`${host} answering`, async () => (await get(gws.public.port, host)) === 200, 300_000, 100);
    };
    await answers("production-shop-acme.preview.bench");

    const toUrl: number[] = [];
    const byApi: number[] = [];
    const toGone: number[] = [];
    const envs = createClient(EnvironmentService, t);
    for (let i = 1; i <= PREVIEWS; i++) {
      const sha = randomBytes(20).toString("hex");
      // The webhook path.
      const t0 = performance.now();
      const r = await deliver(
        hookUrl,
        githubDelivery(secret, { action: "opened", number: i, sha, repository: "acme/shop" }),
      );
      if (r.status !== 200) throw new Error(`delivery answered ${r.status}: ${JSON.stringify(r.body)}`);
      await answers(`pr-${i}-shop-acme.preview.bench`);
      toUrl.push(performance.now() - t0);
      const { previews: list } = await createClient(PreviewService, t).listPreviews({ workspace: "acme" });
      const envId = list.find((p) => p.name === `pr-${i}`)?.environmentId ?? "";

      // The same environment made by the API calls a user would otherwise script.
      const slug = `manual-${i}`;
      const t1 = performance.now();
      await envs.createEnvironment({ ...base, slug, regions: [{ region: "local", replicas: 1 }], sentinel });
      await createClient(EndpointService, t).setEndpoint({ ...base, environment: slug, visibility: "public" });
      await createClient(DeploymentService, t).createDeployment({
        ...base,
        environment: slug,
        image: `ghcr.io/acme/shop:${i}`,
        port: 8080,
      });
      await answers(`${slug}-shop-acme.preview.bench`);
      byApi.push(performance.now() - t1);

      const t2 = performance.now();
      const closed = await deliver(
        hookUrl,
        githubDelivery(secret, { action: "closed", number: i, sha, repository: "acme/shop" }),
      );
      if (closed.status !== 200) throw new Error(`close answered ${closed.status}`);
      const store = ctrl.store;
      await until(
        `pr-${i} gone`,
        async () => {
          for (const kind of KINDS)
            if ((await kube.list(kind, { labelSelector: `${LABEL_ENVIRONMENT_ID}=${envId}` })).items.length > 0)
              return false;
          const rows = await store.db
            .selectFrom("desired_objects")
            .select("object_id")
            .where("environment_id", "=", envId)
            .execute();
          const env = await store.db.selectFrom("environments").select("id").where("id", "=", envId).executeTakeFirst();
          return rows.length === 0 && env === undefined;
        },
        600_000,
        100,
      );
      toGone.push(performance.now() - t2);
      await envs.deleteEnvironment({ ...base, environment: slug, confirm: slug });
    }
    const fmt = (v: number[]): string =>
      `p50 ${(percentileOf(v, 50) / 1000).toFixed(2)} s  p99 ${(percentileOf(v, 99) / 1000).toFixed(2)} s  max ${(Math.max(...v) / 1000).toFixed(2)} s`;
    console.log(
      `audit: signed webhook → the preview's URL answering   ${fmt(toUrl)} (${PREVIEWS} previews; target ≤ 60 s) (load ${loadNow()})`,
    );
    console.log(`audit: the same by API calls (env, endpoint, deploy)  ${fmt(byApi)}`);
    console.log(`audit: close → everything deleted (cluster and ctrl)  ${fmt(toGone)} (target ≤ 5 min)`);
  } finally {
    await agent?.stop();
    await ctrl?.close();
    kube.close();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function benchAudit(): Promise<void> {
  if (ONLY !== "previews") await writes();
  if (ONLY !== "writes") await previews();
}
