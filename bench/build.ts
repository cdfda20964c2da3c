// Builds from a push (`npm run bench -- build`): how long from a push of a small Node.js app (no
// Dockerfile) until a request through the environment's sentinel on a real node is answered by
// the new commit — krane's whole path: the signed webhook, ctrl's queue and local build worker
// (git fetch, pack, BuildKit on krane's bases, push to the registry in token mode), the deploy of
// the digest, the node's pull and start, the sentinel's routing. Beside it in the same run, the
// floor: `buildctl build` of the same context with the same generated Dockerfile against a
// buildkitd of its own, the same push of its OCI archive, and a deploy of that digest through
// krane's API (CreateDeployment) until the floor environment's sentinel answers. Cold cache
// (each BuildKit daemon's cache pruned before every run) and warm (the previous run's cache).
// The pairs alternate, so both see the same load. Issue 43's goal: krane at most 10 % over the
// floor with a warm cache.
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { pino } from "pino";
import { Agent as HttpAgent } from "undici";
import { baseContextOpts, startBuildkitd, type Buildkitd } from "../src/builds/buildkit.js";
import { detect } from "../src/builds/detect.js";
import { pushOciArchive } from "../src/builds/push.js";
import { startCluster } from "../src/cluster/index.js";
import { workloadImages } from "../src/cluster/images.js";
import { realNodeSupport } from "../src/cluster/nodes/host.js";
import { CTRL_PUSH_SUBJECT } from "../src/ctrl/builds/registry-token.js";
import { DeploymentService } from "../src/gen/krane/ctrl/v1/api_pb.js";
import { BuildService } from "../src/gen/krane/ctrl/v1/build_pb.js";
import { buildsSkip } from "../test/support/build-tools.js";
import { answer, BuildWorld, type ConnectedProject } from "../test/integration/builds/world.js";
import { load, pct, until } from "./support.js";

const run = promisify(execFile);
const RUNS = Number(process.env.KRANE_BENCH_BUILD_RUNS ?? "10");
const WS = "bench";

/** The app of one run: it answers `mark`. */
function app(mark: string): Record<string, string> {
  return {
    "package.json": JSON.stringify({ name: "app", scripts: { start: "node server.js" } }),
    "server.js": `require("http").createServer((q, s) => s.end(${JSON.stringify(mark)})).listen(process.env.PORT);\n`,
  };
}

/** One run's times, ms: from the push (or the floor's buildctl) to the answer, and its parts. */
interface Run {
  total: number;
  /** krane: webhook → build finished (queued, fetched, built, pushed, revision recorded); floor: buildctl + push. */
  build: number;
  /** From the build's end (krane) or CreateDeployment (floor) to the first answer of the new commit. */
  deploy: number;
}

function line(what: string, runs: readonly Run[]): string {
  const q = (k: keyof Run, p: number) =>
    (
      pct(
        [...runs.map((r) => r[k])].sort((a, b) => a - b),
        p,
      ) / 1000
    ).toFixed(2);
  return `${what.padEnd(34)} p50 ${q("total", 50)} s, p99 ${q("total", 99)} s (build p50 ${q("build", 50)} s, deploy → answer p50 ${q("deploy", 50)} s; ${runs.length} runs, ${load()})`;
}

function overhead(what: string, krane: readonly Run[], floor: readonly Run[]): string {
  const p = (rs: readonly Run[], q: number) =>
    pct(
      [...rs.map((r) => r.total)].sort((a, b) => a - b),
      q,
    );
  const pc = (q: number) => `${(((p(krane, q) - p(floor, q)) / p(floor, q)) * 100).toFixed(0)} %`;
  return `${what.padEnd(34)} p50 ${pc(50)}, p99 ${pc(99)} (goal with a warm cache: at most 10 %)`;
}

export async function benchBuild(): Promise<void> {
  const support = await realNodeSupport();
  const why = buildsSkip || (support.ok ? false : support.reason);
  if (why) {
    console.log(`build: skipped, ${why}`);
    return;
  }
  const images = await workloadImages((l) => console.log(`  ${l}`));
  const t0 = performance.now();
  const cluster = await startCluster({
    name: "bench-build",
    realNodes: ["untrusted", "sentinel"],
    images: [images.krane, images.hello],
  });
  console.log(`build: cluster with 2 real nodes up in ${((performance.now() - t0) / 1000).toFixed(1)} s (${load()})`);
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-build-"));
  const w = new BuildWorld(cluster, dir, WS);
  let floorDaemon: Buildkitd | undefined;
  let dispatcher: HttpAgent | undefined;
  try {
    // ctrl's errors on stderr: a stuck run says why (warnings would be its retried commit statuses).
    await w.start(images.krane.name, (l) => console.log(`  ${l}`), pino({ level: "error" }, pino.destination(2)));
    // No warm revision (issue 44's window): each run replaces the previous container, as a deploy
    // without a rollback window does, and the node runs two app pods at most.
    const krane = await w.project("app", { warmWindowSeconds: 0 });
    const floor = await w.project("floor", { repository: false, warmWindowSeconds: 0 });
    floorDaemon = await startBuildkitd({ ...w.buildkit, stateDir: join(dir, "floor-buildkit") });
    const floorSocket = floorDaemon.socket;
    dispatcher = new HttpAgent({ connect: { ca: w.registry.caPem } });
    // As ctrl's worker pushes: a token of ctrl's key for the one repository.
    const pushTo = {
      base: `https://${w.registry.host}`,
      authorization: w.tokens.bearerFor(CTRL_PUSH_SUBJECT, ["pull", "push"]),
      dispatcher,
    };
    const builds = w.ctrl.client(BuildService, w.ctrl.adminToken);
    const deployments = w.ctrl.client(DeploymentService, w.ctrl.adminToken);

    /** Until the sentinel at `url` answers `mark` (checking `failed` now and then, to stop at once). */
    const answered = (url: string, mark: string, failed: () => Promise<string | undefined>) => {
      let polls = 0;
      return until(
        `"${mark}" through the sentinel`,
        async () => {
          if (++polls % 50 === 0) {
            const why = await failed();
            if (why !== undefined) throw new Error(why);
          }
          const a = await answer(url);
          return a?.status === 200 && a.body === mark;
        },
        10 * 60_000,
        20,
      );
    };

    const kraneUrl = { value: "" };
    const kraneRun = async (mark: string): Promise<Run> => {
      const commit = await w.git.commit(krane.repo, "main", app(mark));
      const started = performance.now();
      const id = await w.push(krane, commit);
      const state = async () => (await builds.getBuild({ workspace: WS, buildId: id })).build;
      kraneUrl.value ||= await w.sentinelUrl(krane.environmentId);
      await answered(kraneUrl.value, mark, async () => {
        const b = await state();
        return b && !["queued", "running", "succeeded"].includes(b.state)
          ? `build ${id}: ${b.state} ${b.error}`
          : undefined;
      });
      const done = performance.now();
      const b = await state();
      // The build's own clock: webhook (queued) → finished, on the same machine as ours.
      const build = b ? Number(b.finishedAtUnixMs - b.createdAtUnixMs) : NaN;
      return { total: done - started, build, deploy: done - started - build };
    };

    // The floor's context, with the Dockerfile krane's detector generates for it.
    const plan = detect({ paths: Object.keys(app("")), read: (p) => app("")[p] });
    if (plan.dockerfile === undefined) throw new Error("the bench's app should have no Dockerfile of its own");
    const context = join(dir, "floor-context");
    const dockerfileDir = join(dir, "floor-dockerfile");
    mkdirSync(context);
    mkdirSync(dockerfileDir);
    writeFileSync(join(dockerfileDir, "Dockerfile"), plan.dockerfile);
    const bases = baseContextOpts(readFileSync(join(w.bases, "index.json"), "utf8"), plan.bases);
    const floorUrl = { value: "" };
    let floorN = 0;
    const floorRun = async (mark: string): Promise<Run> => {
      for (const [p, text] of Object.entries(app(mark))) writeFileSync(join(context, p), text);
      const tag = `run-${++floorN}`;
      const archive = join(dir, `floor-${floorN}.tar`);
      const metadata = join(dir, `floor-${floorN}.json`);
      const started = performance.now();
      await run(w.buildkit.buildctl, [
        "--addr",
        `unix://${floorSocket}`,
        "build",
        "--frontend",
        "dockerfile.v0",
        "--local",
        `context=${context}`,
        "--local",
        `dockerfile=${dockerfileDir}`,
        "--oci-layout",
        `bases=${w.bases}`,
        ...bases,
        "--output",
        `type=oci,dest=${archive},name=${w.registry.host}/${WS}/${floor.project}:${tag}`,
        "--metadata-file",
        metadata,
      ]);
      const digest = await pushOciArchive(pushTo, archive, `${WS}/${floor.project}`, tag);
      const deployAt = performance.now();
      await deployments.createDeployment({
        workspace: WS,
        project: floor.project,
        environment: "production",
        image: `${w.registry.host}/${WS}/${floor.project}@${digest}`,
      });
      floorUrl.value ||= await w.sentinelUrl(floor.environmentId);
      await answered(floorUrl.value, mark, () => Promise.resolve(undefined));
      const done = performance.now();
      rmSync(archive, { force: true });
      return { total: done - started, build: deployAt - started, deploy: done - deployAt };
    };

    /** `buildctl prune --all` against each daemon: the next build starts from no cache. */
    const prune = async (p: ConnectedProject): Promise<void> => {
      const projectDirs = readdirSync(w.stateDir);
      if (projectDirs.length !== 1)
        throw new Error(`one project builds here, not ${projectDirs.length} (${p.project})`);
      for (const socket of [join(w.stateDir, projectDirs[0] ?? "", "buildkitd.sock"), floorSocket])
        await run(w.buildkit.buildctl, ["--addr", `unix://${socket}`, "prune", "--all"]);
    };

    // A first revision in each environment (not measured): every measured one replaces a running one.
    await kraneRun("krane first");
    await floorRun("floor first");
    const results: Record<string, { krane: Run[]; floor: Run[] }> = {};
    for (const phase of ["cold", "warm"] as const) {
      const r = (results[phase] = { krane: [] as Run[], floor: [] as Run[] });
      for (let i = 1; i <= RUNS; i++) {
        if (phase === "cold") await prune(krane);
        for (const [who, runs, fn] of [
          ["krane", r.krane, kraneRun],
          ["floor", r.floor, floorRun],
        ] as const) {
          const one = await fn(`${who} ${phase} ${i}`);
          runs.push(one);
          console.log(`  ${who}, ${phase} ${i}: ${(one.total / 1000).toFixed(2)} s (${load()})`);
        }
      }
      console.log(line(`build: krane, ${phase} cache`, r.krane));
      console.log(line(`build: floor, ${phase} cache`, r.floor));
      console.log(overhead(`build: krane over the floor, ${phase}`, r.krane, r.floor));
    }
  } finally {
    await floorDaemon?.close();
    await w.stop();
    await dispatcher?.close();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
