// Runs one source build in a builder pod (./pod.ts): the pod and its key's Secret created, the
// gate dialled from a unix socket of the agent's own once the pod has an address, BuildKit's
// client (src/builds/buildkit.ts buildImage: the source, the base images and the build's secrets
// go over its session) pointed at that socket, and the pod and Secret deleted afterwards, whatever
// happened. The image comes back as an OCI archive on the agent, which pushes it (src/builds/push.ts).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  BuildFailed,
  buildImage,
  timeLimitReason,
  waitForBuildkitd,
  type BuildRequest,
  type BuildResult,
} from "../../builds/buildkit.js";
import { dialGate, parseGateKey } from "../../builds/gate.js";
import { BUILDER_GATE_PORT } from "../../contracts/builds.js";
import { BUILDS_NAMESPACE } from "../../contracts/cluster.js";
import type { KubeClient } from "../../kube/client.js";
import { resources } from "../../kube/resources.js";
import {
  BUILDER_CONTAINER,
  builderName,
  newGateKey,
  renderBuilderPod,
  renderBuilderSecret,
  type BuilderPodSpec,
} from "./pod.js";
import { pastDeadline, podProblem } from "./status.js";

export interface BuilderPodRun {
  readonly kube: KubeClient;
  readonly pod: Omit<BuilderPodSpec, "keyHex">;
  /** How long the pod may take to be scheduled, pulled and answering (default 2 min). */
  readonly startTimeoutMs?: number;
  readonly build: Omit<BuildRequest, "socket">;
}

/** Builds `run.build` in a builder pod; throws BuildFailed (the pod failed, the build did) or an Error. */
export async function buildInPod(run: BuilderPodRun): Promise<BuildResult> {
  const { kube } = run;
  const keyHex = newGateKey();
  const spec: BuilderPodSpec = { ...run.pod, keyHex };
  const name = builderName(spec.buildId);
  const log = run.build.log;
  const signal = run.build.signal;
  const work = await mkdtemp(join(tmpdir(), "krane-builder-"));
  try {
    await kube.create(resources.secrets, renderBuilderSecret(spec), signal);
    const created = await kube.create(resources.pods, renderBuilderPod(spec), signal);
    const createdAt = Date.now();
    if (created === "exists") throw new Error(`builder pod ${BUILDS_NAMESPACE}/${name} already exists`);
    log(`builder pod ${BUILDS_NAMESPACE}/${name}: starting`);
    const ip = await waitForAddress(kube, name, run.startTimeoutMs ?? 120_000, signal);
    const dialer = await dialGate({
      host: ip,
      port: BUILDER_GATE_PORT,
      key: parseGateKey(keyHex),
      socket: join(work, "gate.sock"),
    });
    try {
      let problem: string | undefined;
      // A pod that ends (OOMKilled, past its deadline) leaves the client waiting on a connection
      // nothing answers any more: the pod's end cancels the build.
      const ended = new AbortController();
      const watching = setInterval(() => {
        void kube.get(resources.pods, BUILDS_NAMESPACE, name).then(
          (p) => {
            problem = p === undefined ? `builder pod ${BUILDS_NAMESPACE}/${name} is gone` : podProblem(p);
            if (problem !== undefined) ended.abort();
          },
          () => {},
        );
      }, 1_000);
      const cancel = signal === undefined ? ended.signal : AbortSignal.any([signal, ended.signal]);
      try {
        await waitForBuildkitd(run.build.buildctl, dialer.socket, run.startTimeoutMs ?? 120_000, () => problem, cancel);
        log(`builder pod ${BUILDS_NAMESPACE}/${name} (${ip}): buildkitd answers`);
        return await buildImage({ ...run.build, socket: dialer.socket, signal: cancel });
      } catch (err) {
        // A pod that ended explains a build that broke off better than BuildKit's client does.
        const last = await kube.get(resources.pods, BUILDS_NAMESPACE, name).catch(() => undefined);
        // Past the time limit (the kubelet stopped the pod at its deadline, which also counts its
        // start, or it is just due): the same reason as a build past it anywhere else, not the
        // client's broken connection ("EOF").
        const pastLimit =
          (last !== undefined && pastDeadline(last)) || Date.now() - createdAt >= spec.deadlineSeconds * 1000;
        if (pastLimit && signal?.aborted !== true)
          throw new BuildFailed(
            timeLimitReason(spec.deadlineSeconds * 1000, run.build.timeLimitReason),
            err instanceof BuildFailed ? err.lastLines : [],
          );
        problem = last === undefined ? problem : (podProblem(last) ?? problem);
        if (problem !== undefined) throw new BuildFailed(problem, err instanceof BuildFailed ? err.lastLines : []);
        if (err instanceof BuildFailed) throw err;
        // Not the build's own failure: what the pod's containers last said is the operator's clue.
        const tails = await podTails(kube, name);
        for (const l of tails) log(l);
        throw new Error(`${err instanceof Error ? err.message : String(err)}\n${tails.join("\n")}`, { cause: err });
      } finally {
        clearInterval(watching);
      }
    } finally {
      await dialer.close();
    }
  } finally {
    await rm(work, { recursive: true, force: true });
    await kube.delete(resources.pods, BUILDS_NAMESPACE, name).catch(() => {});
    await kube.delete(resources.secrets, BUILDS_NAMESPACE, name).catch(() => {});
  }
}

/** The pod's IP once it runs; a pod that cannot start fails with why. */
async function waitForAddress(
  kube: KubeClient,
  name: string,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    signal?.throwIfAborted();
    const pod = await kube.get(resources.pods, BUILDS_NAMESPACE, name, signal);
    if (pod === undefined) throw new Error(`builder pod ${BUILDS_NAMESPACE}/${name} is gone`);
    const problem = podProblem(pod);
    if (problem !== undefined) throw new BuildFailed(problem, []);
    const status = (pod as { status?: { phase?: string; podIP?: string } }).status;
    if (status?.phase === "Running" && status.podIP) return status.podIP;
    if (Date.now() > deadline)
      throw new Error(`builder pod ${BUILDS_NAMESPACE}/${name} did not start in ${Math.round(timeoutMs / 1000)} s`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** The last lines of the builder pod's log (buildkitd's and the gate's), "builder: <line>". */
async function podTails(kube: KubeClient, name: string): Promise<string[]> {
  const lines: string[] = [];
  for (const container of [BUILDER_CONTAINER]) {
    const chunks: Buffer[] = [];
    await kube
      .streamBytes(
        `/api/v1/namespaces/${BUILDS_NAMESPACE}/pods/${name}/log`,
        { container, tailLines: 15 },
        (c) => chunks.push(c),
        AbortSignal.timeout(5_000),
      )
      .catch((err: unknown) => chunks.push(Buffer.from(`(its log cannot be read: ${String(err)})`)));
    for (const l of Buffer.concat(chunks).toString("utf8").split("\n"))
      if (l.trim() !== "") lines.push(`${container}: ${l}`);
  }
  return lines;
}
