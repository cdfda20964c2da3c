// The builds tab's pure part: how a build reads in the table (its state's tone, where its source
// came from, how long it took) and the log kept in the page. ctrl keeps a build's newest 2,000
// lines (`krane build logs`); the page keeps as many.
import type { Build } from "../../../gen/krane/ctrl/v1/build_pb.js";
import type { Tone } from "../../components/badge.js";

/** Log lines the page keeps of one build (ctrl keeps as many). */
export const KEEP_BUILD_LINES = 2_000;

/** How often the list is asked again while a build of the environment is queued or running… */
export const LIST_REFRESH_MS = 3_000;
/** …and otherwise (a build started elsewhere, by the CLI or a push, shows up within this). */
export const LIST_IDLE_REFRESH_MS = 10_000;
/** How often a running build's log is asked for its next lines (`krane build logs -f` too). */
export const LOG_REFRESH_MS = 1_000;

export const BUILD_TONE: Readonly<Record<string, Tone>> = {
  queued: "warn",
  running: "warn",
  succeeded: "ok",
  failed: "bad",
  cancelled: "muted",
};

/** A build that may still change (its log grows, its state moves). */
export function isActive(b: Pick<Build, "state">): boolean {
  return b.state === "queued" || b.state === "running";
}

/** Where the build's source came from: a repository's branch and commit, or an upload. */
export function buildSource(b: Pick<Build, "branch" | "commit" | "sourceDigest">): string {
  if (b.commit !== "") return `${b.branch === "" ? "commit" : b.branch} @ ${b.commit.slice(0, 7)}`;
  const digest = b.sourceDigest.replace(/^sha256:/, "");
  return digest === "" ? "upload" : `upload ${digest.slice(0, 12)}`;
}

/** How long it ran ("12 s", "2 min 5 s"), or "queued"; a running build's time so far. */
export function buildTook(b: Pick<Build, "state" | "startedAtUnixMs" | "finishedAtUnixMs">, now = Date.now()): string {
  if (b.startedAtUnixMs === 0n) return b.state === "queued" ? "queued" : "—";
  const end = b.finishedAtUnixMs === 0n ? now : Number(b.finishedAtUnixMs);
  const s = Math.max(0, Math.round((end - Number(b.startedAtUnixMs)) / 1000));
  const text = s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
  return b.finishedAtUnixMs === 0n ? `${text} so far` : text;
}

/** The log with `add` appended, keeping the newest KEEP_BUILD_LINES. */
export function appendLog(old: readonly string[], add: readonly string[]): string[] {
  const all = [...old, ...add];
  return all.length > KEEP_BUILD_LINES ? all.slice(-KEEP_BUILD_LINES) : all;
}
