// Releases and secrets on the real local cluster, ctrl on SQLite in this process with
// a master key, the agent in this process as its least-privilege ServiceAccount:
//  - a release of 200 objects (ConfigMaps, Services, Secrets; 20 files in a directory):
//    `ApplyRelease` → every object applied and reported back to ctrl, against
//    `kubectl apply --server-side -f dir/` of the same files (kubectl's discovery cache warm);
//    ROUNDS rounds, kubectl and krane taking turns (each round new objects: a release of its
//    own), so a busy machine weighs on both alike; the median round of each is compared;
//    and, to tell krane's own cost from the admission fence's (kubectl as admin is not fenced),
//    kubectl as the agent's ServiceAccount applying the objects as krane renders them;
//  - an idle resync of those releases: Kubernetes writes (0 expected);
//  - `secret set` → the pods of the new revision Running with the new Secret, p50/p99, against
//    kubectl doing the same by hand (apply a new Secret and the Deployment pointing at it, then
//    the Deployment controller rolls the pods).
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { Registry } from "prom-client";
import { stringify } from "yaml";
import { findKubeAssets, startCluster } from "../src/cluster/index.js";
import { Agent } from "../src/agent/agent.js";
import { silentLogger } from "../src/base/log.js";
import { KubeClient } from "../src/kube/client.js";
import { isRecord } from "../src/kube/object.js";
import { resources } from "../src/kube/resources.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../src/gen/krane/ctrl/v1/api_pb.js";
import { ConfigService } from "../src/gen/krane/ctrl/v1/config_pb.js";
import { ReleaseService } from "../src/gen/krane/ctrl/v1/release_pb.js";
import { agentKubeConfig, kubeWrites } from "../test/integration/agent/support.js";
import { randomKeyring, startTestCtrl } from "../test/integration/ctrl/support.js";
import { pct, until } from "./support.js";

const OBJECTS = 200;
const ROUNDS = Number(process.env.KRANE_BENCH_RELEASE_ROUNDS ?? 3);
const FILES = 20;
const SECRET_CHANGES = Number(process.env.KRANE_BENCH_SECRET_CHANGES ?? 20);
const REGION = "local";

/** A release: FILES files of OBJECTS/FILES objects each, a third each ConfigMaps, Services, Secrets. */
function releaseFiles(prefix: string): { name: string; content: string }[] {
  const files: { name: string; content: string }[] = [];
  for (let f = 0; f < FILES; f++) {
    const docs: unknown[] = [];
    for (let j = 0; j < OBJECTS / FILES; j++) {
      const i = f * (OBJECTS / FILES) + j;
      const name = `${prefix}-obj-${i}`;
      if (i % 3 === 0)
        docs.push({
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name },
          data: { index: String(i), mode: "fast" },
        });
      else if (i % 3 === 1)
        docs.push({
          apiVersion: "v1",
          kind: "Service",
          metadata: { name },
          spec: { selector: { app: name }, ports: [{ port: 80, targetPort: 8080 }] },
        });
      else docs.push({ apiVersion: "v1", kind: "Secret", metadata: { name }, stringData: { token: `t-${i}` } });
    }
    files.push({
      name: `part-${String(f).padStart(2, "0")}.yaml`,
      content: docs.map((d) => stringify(d)).join("---\n"),
    });
  }
  return files;
}

function podRunningWith(obj: unknown): { name: string; running: boolean; refs: string } | null {
  if (
    !isRecord(obj) ||
    !isRecord(obj.metadata) ||
    typeof obj.metadata.name !== "string" ||
    !isRecord(obj.spec) ||
    !isRecord(obj.status)
  )
    return null;
  if (obj.metadata.deletionTimestamp) return { name: obj.metadata.name, running: false, refs: "" };
  return {
    name: obj.metadata.name,
    running: obj.status.phase === "Running",
    refs: JSON.stringify([obj.metadata.labels, obj.spec.containers]),
  };
}

export async function benchReleases(): Promise<void> {
  const assets = await findKubeAssets();
  const kubectl = assets?.bin.kubectl;
  const cluster = await startCluster({ name: "bench-releases" });
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-releases-"));
  const ctrl = await startTestCtrl(join(dir, "ctrl.db"), { keyring: randomKeyring() });
  const admin = new KubeClient(cluster.kubeConfig(), { fieldManager: "bench" });
  const stop = new AbortController();
  let agent: Agent | undefined;
  const run = (args: string[]): number => {
    if (!kubectl) throw new Error("no kubectl");
    const t = performance.now();
    const r = spawnSync(
      kubectl,
      ["--kubeconfig", cluster.kubeconfigPath, "--cache-dir", join(dir, "kube-cache"), ...args],
      { encoding: "utf8", maxBuffer: 64 << 20 },
    );
    if (r.status !== 0) throw new Error(`kubectl ${args.join(" ")} failed: ${r.stderr.slice(0, 500)}`);
    return performance.now() - t;
  };
  try {
    const rounds = Array.from({ length: ROUNDS }, (_, k) => {
      const files = releaseFiles(`r${k}`);
      const manifests = join(dir, `release-${k}`);
      mkdirSync(manifests);
      for (const f of files) writeFileSync(join(manifests, f.name), f.content);
      return { name: `r${k}`, files, manifests };
    });
    // kubectl's discovery cache is warmed by a first run in another namespace.
    if (kubectl) {
      for (const ns of ["bench-warm", "bench-kubectl"])
        await admin.create(resources.namespaces, { metadata: { name: ns } });
      run([
        "apply",
        "--server-side",
        "--field-manager",
        "kubectl-bench",
        "-n",
        "bench-warm",
        "-f",
        rounds[0]?.manifests ?? "",
      ]);
    }

    // --- ctrl, an environment, the agent.
    const t = ctrl.adminToken;
    const ref = { workspace: "bench", project: "app", environment: "prod" };
    await ctrl.client(RegionService, t).createRegion({ name: REGION });
    await ctrl.client(WorkspaceService, t).createWorkspace({ slug: ref.workspace });
    await ctrl.client(ProjectService, t).createProject({ workspace: ref.workspace, slug: ref.project });
    await ctrl.client(EnvironmentService, t).createEnvironment({
      workspace: ref.workspace,
      project: ref.project,
      slug: ref.environment,
      regions: [{ region: REGION, replicas: 2 }],
      rollout: { maxSurge: "100%", maxUnavailable: "0" },
    });
    const agentKc = await agentKubeConfig(cluster);
    agent = new Agent({
      ctrlUrl: ctrl.url,
      token: await ctrl.agentToken(REGION),
      region: REGION,
      kubeconfig: agentKc,
      log: silentLogger,
      registry: new Registry(),
      opsPort: -1,
      resyncPeriodMs: 10 * 60_000,
    });
    await agent.start();
    await until("agent ready", () => agent?.ready === true, 120_000, 100);

    // --- the releases: ApplyRelease → all 200 objects applied and reported at that version,
    // each round after kubectl's apply of the same files.
    const releases = ctrl.client(ReleaseService, t);
    // Polled in ctrl's database directly (one small column): polling GetRelease, which encodes
    // 200 objects' status per answer, would load this process (ctrl and the agent) as kubectl's
    // run is not. The answer is checked once it is there.
    const reported = async (id: string, version: bigint): Promise<boolean> => {
      const row = await ctrl.store.db
        .selectFrom("release_status")
        .select("observed_version")
        .where("release_id", "=", id)
        .where("region", "=", REGION)
        .executeTakeFirst();
      return row !== undefined && BigInt(row.observed_version) === version;
    };
    const done = async (name: string, version: bigint): Promise<void> => {
      const { release } = await releases.getRelease({ ...ref, name });
      const n = release?.regions.find((x) => x.region === REGION && x.observedVersion === version)?.objects.length;
      if (n !== OBJECTS) throw new Error(`bench: release ${name} reported ${n ?? 0} objects, expected ${OBJECTS}`);
    };
    const kubectlMs: number[] = [];
    const kraneMs: number[] = [];
    const callMs: number[] = [];
    for (const round of rounds) {
      if (kubectl)
        kubectlMs.push(
          run([
            "apply",
            "--server-side",
            "--field-manager",
            "kubectl-bench",
            "-n",
            "bench-kubectl",
            "-f",
            round.manifests,
          ]),
        );
      const t0 = performance.now();
      const applied = await releases.applyRelease({ ...ref, name: round.name, files: round.files });
      callMs.push(performance.now() - t0);
      await until(
        `${OBJECTS} objects of ${round.name} reported`,
        () => reported(applied.release?.id ?? "", applied.release?.version ?? 0n),
        300_000,
        10,
      );
      kraneMs.push(performance.now() - t0);
      await done(round.name, applied.release?.version ?? 0n);
    }
    const counts = await Promise.all(
      [resources.configMaps, resources.services, resources.secrets].map(
        async (r) =>
          (
            await admin.list(r, {
              namespace: "ws-bench",
              labelSelector: "krane.dev/release-id,app.kubernetes.io/component=release",
            })
          ).items.length,
      ),
    );
    const total = counts.reduce((a, b) => a + b, 0);
    if (total !== OBJECTS * ROUNDS)
      throw new Error(
        `bench: ${total} release objects in the cluster (the inventories aside), expected ${OBJECTS * ROUNDS}`,
      );
    const med = (xs: number[]): number =>
      pct(
        [...xs].sort((a, b) => a - b),
        50,
      );
    const list = (xs: number[]): string => xs.map((x) => x.toFixed(0)).join(", ");
    if (kubectl)
      console.log(
        `releases: kubectl apply --server-side -f dir/ (${OBJECTS} objects, warm cache)   median ${med(kubectlMs).toFixed(0)} ms (rounds: ${list(kubectlMs)})`,
      );
    console.log(
      `releases: krane ApplyRelease → ${OBJECTS} objects applied and reported   median ${med(kraneMs).toFixed(0)} ms (rounds: ${list(kraneMs)})` +
        (kubectl ? `, ${(med(kraneMs) / med(kubectlMs)).toFixed(2)}× kubectl` : "") +
        `; of which the ApplyRelease call (parse, validate, seal, store) median ${med(callMs).toFixed(0)} ms`,
    );

    // --- idle resync of the release: nothing changed, nothing written.
    const rt = agent.runtime("releases");
    if (!rt) throw new Error("bench: no releases runtime");
    const before = await kubeWrites(agent);
    await rt.resyncOnce();
    await rt.idle();
    console.log(
      `releases: idle resync of ${ROUNDS} releases of ${OBJECTS} objects   ${(await kubeWrites(agent)) - before} Kubernetes writes`,
    );

    // --- where the difference goes: the same writes as krane renders them (its labels) by
    // kubectl as the agent's ServiceAccount, so under the admission fence as the agent is
    // (kubectl as admin is not), in new objects of a release nobody has.
    if (kubectl) {
      const agentKubeconfig = join(dir, "agent.kubeconfig");
      writeFileSync(agentKubeconfig, agentKc.exportConfig());
      const fenced: number[] = [];
      for (const [k, round] of rounds.entries()) {
        const { release } = await releases.getRelease({ ...ref, name: round.name });
        const docs: string[] = [];
        for (const r of [resources.configMaps, resources.services, resources.secrets]) {
          for (const o of (
            await admin.list(r, {
              namespace: "ws-bench",
              labelSelector: `krane.dev/release-id=${release?.id ?? "?"},app.kubernetes.io/component=release`,
            })
          ).items) {
            const labels = { ...o.metadata.labels, "krane.dev/release-id": "rel_fenced" };
            const body = {
              ...o,
              metadata: { name: `f${k}-${o.metadata.name ?? ""}`, namespace: "ws-bench", labels },
            } as Record<string, unknown>;
            delete body.status;
            if (isRecord(body.spec)) {
              const { clusterIP: _a, clusterIPs: _b, ...spec } = body.spec;
              body.spec = spec;
            }
            docs.push(stringify(body));
          }
        }
        const fdir = join(dir, `fenced-${k}`);
        mkdirSync(fdir);
        writeFileSync(join(fdir, "objects.yaml"), docs.join("---\n"));
        const args = [
          "--kubeconfig",
          agentKubeconfig,
          "--cache-dir",
          join(dir, "kube-cache-agent"),
          "apply",
          "--server-side",
          "--field-manager",
          "krane-release",
          "-n",
          "ws-bench",
          "-f",
          fdir,
        ];
        const t1 = performance.now();
        const r = spawnSync(kubectl, args, { encoding: "utf8", maxBuffer: 64 << 20 });
        if (r.status !== 0) throw new Error(`kubectl as the agent failed: ${r.stderr.slice(0, 500)}`);
        if (k > 0) fenced.push(performance.now() - t1); // the first run warms the discovery cache
      }
      console.log(
        `releases: kubectl apply --server-side as the agent (fenced) of krane's rendered objects   median ${med(fenced).toFixed(0)} ms (rounds: ${list(fenced)})`,
      );
    }

    // --- secret set → the new revision's pods Running with the new Secret.
    const pods = new Map<string, { running: boolean; refs: string }>();
    const waiters = new Set<() => void>();
    const onPod = (type: string, obj: unknown): void => {
      const p = podRunningWith(obj);
      if (!p) return;
      if (type === "DELETED") pods.delete(p.name);
      else pods.set(p.name, p);
      for (const w of [...waiters]) w();
    };
    const runningWith = (needle: string, n: number): Promise<void> =>
      new Promise<void>((resolve) => {
        const check = (): void => {
          if ([...pods.values()].filter((p) => p.running && p.refs.includes(needle)).length >= n) {
            waiters.delete(check);
            resolve();
          }
        };
        waiters.add(check);
        check();
      });
    void admin.watch(resources.pods, { namespace: "ws-bench" }, onPod, stop.signal).catch(() => undefined);
    void admin.watch(resources.pods, { namespace: "bench-kubectl" }, onPod, stop.signal).catch(() => undefined);

    const config = ctrl.client(ConfigService, t);
    await ctrl.client(DeploymentService, t).createDeployment({ ...ref, image: "registry.example.com/app:1" });
    const first = await config.setSecrets({
      ...ref,
      secrets: [{ key: "TOKEN", source: { case: "value", value: "warm-up" } }],
    });
    await runningWith(`"krane.dev/deployment-id":"${first.change?.deployment?.id ?? "?"}"`, 2);
    const lat: number[] = [];
    for (let i = 0; i < SECRET_CHANGES; i++) {
      const t1 = performance.now();
      const { change } = await config.setSecrets({
        ...ref,
        secrets: [{ key: "TOKEN", source: { case: "value", value: `v${i}-${randomBytes(6).toString("hex")}` } }],
      });
      await Promise.race([
        runningWith(`"krane.dev/deployment-id":"${change?.deployment?.id ?? "?"}"`, 2),
        new Promise((_, reject) =>
          setTimeout(() => reject(new Error("bench: new revision not running in 120 s")), 120_000).unref(),
        ),
      ]);
      lat.push(performance.now() - t1);
    }
    lat.sort((a, b) => a - b);
    console.log(
      `releases: krane secret set → new revision's 2 pods Running   p50 ${pct(lat, 50).toFixed(0)} ms, p99 ${pct(lat, 99).toFixed(0)} ms (${lat.length} changes)`,
    );

    // The same by hand: a new Secret and the Deployment referring to it, applied by kubectl;
    // the Deployment controller rolls the pods (maxSurge 100%, maxUnavailable 0 as above).
    if (kubectl) {
      const byHand = (i: number): string => {
        const secret = {
          apiVersion: "v1",
          kind: "Secret",
          metadata: { name: `app-secret-${i}` },
          stringData: { TOKEN: `v${i}` },
        };
        const deployment = {
          apiVersion: "apps/v1",
          kind: "Deployment",
          metadata: { name: "app" },
          spec: {
            replicas: 2,
            selector: { matchLabels: { app: "app" } },
            strategy: { rollingUpdate: { maxSurge: "100%", maxUnavailable: 0 } },
            template: {
              metadata: { labels: { app: "app" } },
              spec: {
                containers: [
                  {
                    name: "app",
                    image: "registry.example.com/app:1",
                    envFrom: [{ secretRef: { name: `app-secret-${i}` } }],
                  },
                ],
              },
            },
          },
        };
        const file = join(dir, `by-hand-${i}.yaml`);
        writeFileSync(file, `${stringify(secret)}---\n${stringify(deployment)}`);
        return file;
      };
      const apply = (file: string): number =>
        run(["apply", "--server-side", "--field-manager", "kubectl-bench", "-n", "bench-kubectl", "-f", file]);
      apply(byHand(-1));
      await runningWith(`"app-secret--1"`, 2);
      const hand: number[] = [];
      for (let i = 0; i < SECRET_CHANGES; i++) {
        const file = byHand(i);
        const t1 = performance.now();
        apply(file);
        await runningWith(`"app-secret-${i}"`, 2);
        hand.push(performance.now() - t1);
      }
      hand.sort((a, b) => a - b);
      console.log(
        `releases: kubectl apply Secret + Deployment → new pods Running   p50 ${pct(hand, 50).toFixed(0)} ms, p99 ${pct(hand, 99).toFixed(0)} ms (${hand.length} changes)`,
      );
    }
  } finally {
    stop.abort();
    await agent?.stop();
    admin.close();
    await ctrl.close();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
