// Runs a build with BuildKit: a source archive (./tar.ts) in, an OCI image archive and its digest
// out, every line of BuildKit's progress to a log callback as it comes.
//
// Isolation of this runner: buildkitd runs as root with the OCI worker (runc, one container per
// RUN step) inside new network, mount and PID namespaces of its own (unshare). The network
// namespace is empty but for a loopback that is down, so no step reaches the node's network, the
// API server, ctrl or the internet; what a build needs (the context, the Dockerfile, the base
// images) comes over the client's session on the unix socket. Its mounts die with its mount
// namespace. One daemon per state directory: a project's cache is its own directory, which no
// other project's daemon opens. It does NOT map root to an unprivileged user (no user
// namespace): a step that escaped runc would be root on the machine.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import type { BaseImage } from "../contracts/builds.js";
import { detect, type BuildPlan } from "./detect.js";
import { readTar, type ReadLimits, type TarEntry } from "./tar.js";

const run = promisify(execFile);

/** A running buildkitd; `close` stops it (and every step it runs). */
export interface Buildkitd {
  readonly socket: string;
  close(): Promise<void>;
}

export interface BuildkitdOptions {
  readonly buildkitd: string;
  readonly buildctl: string;
  /** Its state: snapshots and the build cache. One per project. */
  readonly stateDir: string;
  /** The OCI runtime (default: runc on PATH). */
  readonly runc?: string;
  readonly log?: (line: string) => void;
  readonly startTimeoutMs?: number;
}

/** The command that starts buildkitd in namespaces of its own (see the top of this file). */
export function buildkitdCommand(o: { buildkitd: string; stateDir: string; runc: string }): [string, string[]] {
  return [
    "unshare",
    [
      "--net",
      "--mount",
      "--pid",
      "--fork",
      "--mount-proc",
      "--propagation",
      "private",
      // buildkitd (pid 1 of its namespace, so every step with it) dies when unshare does.
      "--kill-child=SIGKILL",
      "--",
      o.buildkitd,
      "--addr",
      `unix://${join(o.stateDir, "buildkitd.sock")}`,
      "--root",
      join(o.stateDir, "root"),
      "--oci-worker-binary",
      o.runc,
      // The namespace's network is the only one a step sees: empty.
      "--oci-worker-net",
      "host",
      "--oci-worker-gc",
    ],
  ];
}

export async function startBuildkitd(o: BuildkitdOptions): Promise<Buildkitd> {
  const log = o.log ?? (() => {});
  await mkdir(join(o.stateDir, "root"), { recursive: true });
  const socket = join(o.stateDir, "buildkitd.sock");
  await rm(socket, { force: true });
  const [cmd, args] = buildkitdCommand({ buildkitd: o.buildkitd, stateDir: o.stateDir, runc: o.runc ?? "runc" });
  const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
  const tail: string[] = [];
  for (const s of [child.stdout, child.stderr])
    createInterface({ input: s }).on("line", (l) => {
      tail.push(l);
      if (tail.length > 20) tail.shift();
    });
  let exited = false;
  child.once("exit", () => (exited = true));
  const close = () => stop(child);
  try {
    await waitForBuildkitd(o.buildctl, socket, o.startTimeoutMs ?? 60_000, () =>
      exited ? `buildkitd exited at start:\n${tail.join("\n")}` : undefined,
    );
  } catch (err) {
    await close();
    throw err instanceof Error && !exited ? new Error(`${err.message}:\n${tail.join("\n")}`) : err;
  }
  log(`buildkitd is up on ${socket} (state in ${o.stateDir})`);
  return { socket, close };
}

/**
 * Waits until a buildkitd answers on `socket` (its workers listed), for at most `timeoutMs`;
 * `gone` says why it never will (its process exited, its pod failed), which ends the wait at once.
 */
export async function waitForBuildkitd(
  buildctl: string,
  socket: string,
  timeoutMs: number,
  gone: () => string | undefined = () => undefined,
  signal?: AbortSignal,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const why = gone();
    if (why !== undefined) throw new Error(why);
    signal?.throwIfAborted();
    const ok = await run(buildctl, ["--addr", `unix://${socket}`, "debug", "workers"]).then(
      () => true,
      () => false,
    );
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`buildkitd did not answer on ${socket} in time`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exit = new Promise<void>((r) => child.once("exit", () => r()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await exit;
  clearTimeout(timer);
}

/** The `context:<name>=oci-layout://bases@<digest>` options that let FROM name krane's bases. */
export function baseContextOpts(indexJson: string, bases: readonly BaseImage[]): string[] {
  const index = JSON.parse(indexJson) as { manifests?: { digest: string; annotations?: Record<string, string> }[] };
  const byTag = new Map(
    (index.manifests ?? []).map((m) => [m.annotations?.["org.opencontainers.image.ref.name"], m.digest]),
  );
  return bases.flatMap((b) => {
    const digest = byTag.get(b.tag);
    if (digest === undefined) throw new Error(`the base images' layout has no ${b.tag} (${b.name})`);
    return ["--opt", `context:${b.name}=oci-layout://bases@${digest}`];
  });
}

export interface BuildRequest {
  readonly buildctl: string;
  readonly socket: string;
  /** The gzipped source archive (as `krane build --source` packs it). */
  readonly archive: Uint8Array;
  readonly limits: ReadLimits;
  /** `--dockerfile`: a Dockerfile's path in the source. */
  readonly dockerfile?: string;
  /** The OCI layout of the base images (src/cluster/bases.ts). */
  readonly basesLayout: string;
  /** The image's name, e.g. "registry.example/ws/app:build-7". */
  readonly imageName: string;
  /** Where the OCI archive of the image is written. */
  readonly output: string;
  readonly log: (line: string) => void;
  /** `--build-secret id=value`: mounted for the RUN steps that ask (`--mount=type=secret,id=…`), never in a layer. */
  readonly secrets?: Readonly<Record<string, string>>;
  /** The build's time limit; past it the build is cancelled and fails saying so. */
  readonly timeoutMs?: number;
  /** Why the time limit is what it is, when not the build's own (a quota's minutes left): the failure's reason. */
  readonly timeLimitReason?: string;
  /** Cancels the build (a newer one superseded it, someone cancelled it). */
  readonly signal?: AbortSignal;
}

export interface BuildResult {
  /** The image manifest's digest, "sha256:…". */
  readonly digest: string;
  readonly plan: BuildPlan;
}

/**
 * Why a build past its time limit failed: `reason` when the limit is not the build's own (a
 * quota's minutes left), else the limit. The same words wherever the build ran (here, a builder pod).
 */
export function timeLimitReason(timeoutMs: number, reason?: string): string {
  return reason ?? `the build ran past its time limit of ${Math.round(timeoutMs / 1000)} s and was cancelled`;
}

/** A build that failed; `lastLines` are BuildKit's last lines of output (the failed step's). */
export class BuildFailed extends Error {
  constructor(
    message: string,
    readonly lastLines: readonly string[],
    /** The step that failed, as BuildKit names it ("[2/3] RUN …"), when one did. */
    readonly step?: string,
  ) {
    super(message);
  }
}

const SECRET_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** The failed step of a failed build's progress, and that step's last lines. */
export function failedStep(lines: readonly string[]): { step: string; output: string[] } | undefined {
  // BuildKit closes a failed build with the step between two "------" lines: " > [2/3] RUN …:",
  // then the step's last lines of output, each after its time.
  const end = lines.lastIndexOf("------");
  if (end <= 0) return undefined;
  const start = lines.lastIndexOf("------", end - 1);
  const head = start >= 0 ? lines[start + 1] : undefined;
  const m = head === undefined ? null : /^ > (.+?):?$/.exec(head);
  if (!m?.[1]) return undefined;
  const output = lines.slice(start + 2, end).map((l) => l.replace(/^\d+\.\d+ /, ""));
  return { step: m[1], output };
}

/** Writes checked archive entries under `dir` (readTar has refused anything that leaves it). */
async function unpack(dir: string, entries: readonly TarEntry[]): Promise<void> {
  for (const e of entries) {
    const full = join(dir, ...e.path.split("/"));
    if (e.type === "dir") {
      await mkdir(full, { recursive: true });
      continue;
    }
    await mkdir(dirname(full), { recursive: true });
    if (e.type === "symlink") await symlink(e.target ?? "", full);
    else await writeFile(full, e.data ?? new Uint8Array(), { mode: e.executable ? 0o755 : 0o644 });
  }
}

/** Builds `req.archive` into an OCI image archive; throws DetectError, TarError or BuildFailed. */
export async function buildImage(req: BuildRequest): Promise<BuildResult> {
  const entries = readTar(req.archive, req.limits);
  const files = new Map(entries.filter((e) => e.type === "file").map((e) => [e.path, e.data ?? new Uint8Array()]));
  const plan = detect(
    {
      paths: entries.filter((e) => e.type !== "dir").map((e) => e.path),
      read: (p) => {
        const d = files.get(p);
        return d !== undefined && d.length <= 1024 * 1024 ? Buffer.from(d).toString("utf8") : undefined;
      },
    },
    { dockerfile: req.dockerfile },
  );
  const secrets = Object.entries(req.secrets ?? {});
  for (const [id] of secrets)
    if (!SECRET_ID.test(id))
      throw new Error(`build_secret: "${id}" is not a secret id (letters, digits, ".", "_", "-"; at most 64)`);
  req.log(`build plan: ${plan.summary}`);
  const work = await mkdtemp(join(tmpdir(), "krane-build-"));
  try {
    const context = join(work, "context");
    await mkdir(context);
    await unpack(context, entries);
    let dockerfileDir: string;
    let filename: string;
    if (plan.dockerfile !== undefined) {
      dockerfileDir = join(work, "dockerfile");
      await mkdir(dockerfileDir);
      filename = "Dockerfile";
      await writeFile(join(dockerfileDir, filename), plan.dockerfile);
    } else {
      const path = plan.dockerfilePath ?? "Dockerfile";
      dockerfileDir = join(context, ...dirname(path).split("/"));
      filename = path.split("/").pop() ?? "Dockerfile";
    }
    const metadata = join(work, "metadata.json");
    const secretArgs: string[] = [];
    if (secrets.length > 0) await mkdir(join(work, "secrets"), { mode: 0o700 });
    for (const [id, value] of secrets) {
      const file = join(work, "secrets", id);
      await writeFile(file, value, { mode: 0o600 });
      secretArgs.push("--secret", `id=${id},src=${file}`);
    }
    const args = [
      "--addr",
      `unix://${req.socket}`,
      "build",
      "--progress",
      "plain",
      "--frontend",
      "dockerfile.v0",
      "--local",
      `context=${context}`,
      "--local",
      `dockerfile=${dockerfileDir}`,
      "--opt",
      `filename=${filename}`,
      "--oci-layout",
      `bases=${req.basesLayout}`,
      ...baseContextOpts(await readFile(join(req.basesLayout, "index.json"), "utf8"), plan.bases),
      "--output",
      `type=oci,dest=${req.output},name=${req.imageName}`,
      "--metadata-file",
      metadata,
      ...secretArgs,
    ];
    const lines: string[] = [];
    let timedOut = false;
    let cancelled = false;
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn(req.buildctl, args, { stdio: ["ignore", "pipe", "pipe"] });
      const cancel = (): void => {
        cancelled = true;
        child.kill("SIGTERM");
      };
      if (req.signal?.aborted) cancel();
      req.signal?.addEventListener("abort", cancel, { once: true });
      child.once("close", () => req.signal?.removeEventListener("abort", cancel));
      // Cancelling the client ends its session, and buildkitd cancels the solve with it.
      const timer =
        req.timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              timedOut = true;
              child.kill("SIGTERM");
            }, req.timeoutMs);
      child.once("close", () => clearTimeout(timer));
      for (const s of [child.stdout, child.stderr])
        createInterface({ input: s }).on("line", (l) => {
          lines.push(l);
          if (lines.length > 200) lines.shift();
          req.log(l);
        });
      child.once("error", reject);
      child.once("close", (c) => resolve(c));
    });
    if (cancelled) throw new BuildFailed("the build was cancelled", lines.slice(-30));
    if (timedOut) throw new BuildFailed(timeLimitReason(req.timeoutMs ?? 0, req.timeLimitReason), lines.slice(-30));
    if (code !== 0) {
      const why = [...lines].reverse().find((l) => l.startsWith("error:")) ?? `buildctl exited with ${String(code)}`;
      const failed = failedStep(lines);
      if (failed)
        throw new BuildFailed(
          `the build failed at step ${failed.step}: ${why.replace(/^error:\s*/, "")}`,
          failed.output,
          failed.step,
        );
      throw new BuildFailed(`the build failed: ${why.replace(/^error:\s*/, "")}`, lines.slice(-30));
    }
    const meta = JSON.parse(await readFile(metadata, "utf8")) as Record<string, unknown>;
    const digest = meta["containerimage.digest"];
    if (typeof digest !== "string") throw new Error("buildctl wrote no image digest");
    return { digest, plan };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
