// One build handed to this region (the build kind's ApplyBuild) run to its end: its source asked
// of ctrl by the build's id (and checked against the digest ctrl streamed), built in a builder pod
// (./runner.ts), the image pushed to the build's one repository with a credential ctrl gives right
// before the push (a token lives minutes), and its log lines and outcome reported back
// (ReportBuildProgress). The lines go out every second, even none: each report renews the build's
// lease in ctrl, so a build whose agent is gone goes back to the queue. ctrl answering that the
// build no longer runs (cancelled, superseded, requeued) aborts it, as the Delete of its desired
// state does (the caller's signal).
import { createHash, type BinaryLike } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { rootCertificates } from "node:tls";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Agent } from "undici";
import { BuildFailed } from "../../builds/buildkit.js";
import { pushOciArchive } from "../../builds/push.js";
import { BUILDS_NAMESPACE } from "../../contracts/cluster.js";
import { type ApplyBuild, ReportBuildProgressRequestSchema } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { KubeClient } from "../../kube/client.js";
import { resources } from "../../kube/resources.js";
import { retry } from "../../retry/retry.js";
import type { ClusterClient } from "../runtime/kind.js";
import { builderName } from "./pod.js";
import { buildInPod } from "./runner.js";

/** What the agent runs builds with (`krane agent --builds N …`). */
export interface BuilderSettings {
  /** Builds at once. */
  readonly maxBuilds: number;
  readonly buildctl: string;
  /** The base images' OCI layout (scripts/build-bases.sh). */
  readonly basesLayout: string;
  /** The builder image (scripts/build-builder.sh). */
  readonly builderImage: string;
  /** How long a builder pod may take to answer (default 2 min). */
  readonly startTimeoutMs?: number;
}

export interface BuildRunDeps {
  readonly region: string;
  readonly ctrl: ClusterClient;
  readonly kube: KubeClient;
  readonly settings: BuilderSettings;
  /** Between progress reports (default 1 s). */
  readonly flushMs?: number;
}

type Outcome = MessageInitShape<typeof ReportBuildProgressRequestSchema>["outcome"];

const FLUSH_MS = 1_000;
const MAX_LINES = 500;

/** The report of a build's end, from what ended it (pure). */
export function outcomeOf(result: { digest: string } | { error: unknown }, aborted: boolean): Outcome {
  if ("digest" in result) return { case: "succeeded", value: { imageDigest: result.digest } };
  const err = result.error;
  // undici's "fetch failed" says why only in its cause (a refused connection, a certificate).
  const cause = err instanceof Error && err.cause instanceof Error ? err.cause.message : "";
  const message = err instanceof Error ? (cause === "" ? err.message : `${err.message}: ${cause}`) : String(err);
  return {
    case: "failed",
    value: {
      error: aborted ? "the build was cancelled" : message || "the build failed",
      failedStep: err instanceof BuildFailed ? (err.step ?? "") : "",
      failedOutput: err instanceof BuildFailed ? err.lastLines.slice(-30) : [],
      cancelled: aborted,
    },
  };
}

export function sha256(data: BinaryLike): string {
  return `sha256:${createHash("sha256").update(data).digest("hex")}`;
}

/** Runs the build until it ends or `signal` aborts it (its desired state was deleted). */
export async function runBuild(a: ApplyBuild, d: BuildRunDeps, signal: AbortSignal): Promise<void> {
  const { region, ctrl, kube, settings } = d;
  const id = a.buildId;
  const stopped = new AbortController();
  const abort = AbortSignal.any([signal, stopped.signal]);
  let pending: string[] = [];
  const log = (line: string): void => void pending.push(line);
  const report = async (outcome: Outcome, s?: AbortSignal): Promise<boolean> => {
    const lines = pending.splice(0, MAX_LINES);
    try {
      const res = await ctrl.reportBuildProgress(
        create(ReportBuildProgressRequestSchema, { region, buildId: id, lines, outcome }),
        { timeoutMs: 30_000, ...(s ? { signal: s } : {}) },
      );
      return res.running;
    } catch (err) {
      pending = [...lines, ...pending];
      throw err;
    }
  };
  let flushing = Promise.resolve();
  const timer = setInterval(() => {
    flushing = flushing
      .then(() => report(undefined, abort))
      .then(
        (running) => void (running || stopped.abort()),
        () => {}, // ctrl unreachable: the lines wait for the next report
      );
  }, d.flushMs ?? FLUSH_MS);
  const work = await mkdtemp(join(tmpdir(), "krane-agent-build-"));
  let outcome: Outcome;
  try {
    // A builder pod an earlier run left (this agent restarted mid-build) goes first.
    const name = builderName(id);
    await kube.delete(resources.pods, BUILDS_NAMESPACE, name, abort).catch(() => {});
    await kube.delete(resources.secrets, BUILDS_NAMESPACE, name, abort).catch(() => {});
    const source = await ctrl.getBuildSource({ region, buildId: id }, { signal: abort, timeoutMs: 120_000 });
    if (sha256(source.archive) !== a.sourceDigest)
      throw new Error(`the source ctrl sent is not ${a.sourceDigest} (its digest is ${sha256(source.archive)})`);
    const output = join(work, "image.oci.tar");
    const timeoutMs = Number(a.timeoutSeconds) * 1000;
    await buildInPod({
      kube,
      pod: {
        buildId: id,
        builderImage: settings.builderImage,
        cpuMillicores: Number(a.cpuMillicores),
        memoryMib: Number(a.memoryMib),
        deadlineSeconds: Number(a.timeoutSeconds),
      },
      ...(settings.startTimeoutMs === undefined ? {} : { startTimeoutMs: settings.startTimeoutMs }),
      build: {
        buildctl: settings.buildctl,
        archive: source.archive,
        limits: { maxBytes: Number(a.maxSourceBytes), maxEntries: 100_000 },
        ...(a.dockerfile === "" ? {} : { dockerfile: a.dockerfile }),
        basesLayout: settings.basesLayout,
        imageName: a.image,
        output,
        log,
        timeoutMs,
        ...(a.timeLimitReason === "" ? {} : { timeLimitReason: a.timeLimitReason }),
        signal: abort,
      },
    });
    log(`pushing ${a.image}`);
    const dispatcher = new Agent({
      connect: a.registryCa.length > 0 ? { ca: [...rootCertificates, ...a.registryCa] } : {},
    });
    try {
      const digest = await pushOciArchive(
        {
          base: `https://${a.registry}`,
          authorization: async () =>
            (await ctrl.getBuildPushAuthorization({ region, buildId: id }, { signal: abort, timeoutMs: 30_000 }))
              .authorization,
          dispatcher,
        },
        output,
        a.repository,
        a.tag,
      );
      outcome = outcomeOf({ digest }, false);
    } finally {
      await dispatcher.close();
    }
  } catch (err) {
    outcome = outcomeOf({ error: err }, abort.aborted);
  } finally {
    clearInterval(timer);
    await rm(work, { recursive: true, force: true });
  }
  await flushing;
  // Its end (ctrl's log says a failure), until ctrl has it (or no longer wants the build: its
  // Delete aborts `signal`).
  await retry(() => report(outcome, signal), {
    policy: { baseMs: 500, capMs: 15_000 },
    retryable: () => true,
    signal,
  }).catch(() => {});
}
