// Which krane this is: version, git commit and build date. `npm run build` stamps them into
// dist/build-stamp.json (scripts/build.mjs); the CLI, ctrl, the agent and the sentinel all read
// them from here, so every process reports the same build. Run from source (tsx) there is no
// stamp: the version comes from package.json and the commit reads "dev". The single-file CLI has
// no files beside it: its build (scripts/build-single.mjs) writes the stamp into the code as
// KRANE_SINGLE_FILE_STAMP.
import { readFileSync } from "node:fs";

export interface BuildInfo {
  /** package.json's version, e.g. "0.1.0". */
  readonly version: string;
  /** Short git commit, "+dirty" when built from a changed tree; "dev" when run from source. */
  readonly commit: string;
  /** ISO 8601 build time (SOURCE_DATE_EPOCH when set); "" when run from source. */
  readonly date: string;
  /** True in the single-file CLI (one executable, no Node.js needed). */
  readonly singleFile?: boolean;
}

/** The stamp, in the single-file CLI only: its build replaces this name with the stamp's JSON text. */
declare const KRANE_SINGLE_FILE_STAMP: string | undefined;

/** Validates a stamp file's text; throws naming the bad field. */
export function parseBuildStamp(text: string): BuildInfo {
  const raw: unknown = JSON.parse(text);
  if (typeof raw !== "object" || raw === null) throw new Error("build stamp: expected a JSON object");
  const field = (name: "version" | "commit" | "date"): string => {
    const v = (raw as Record<string, unknown>)[name];
    if (typeof v !== "string" || v === "") throw new Error(`build stamp: "${name}" must be a non-empty string`);
    return v;
  };
  return { version: field("version"), commit: field("commit"), date: field("date") };
}

let cached: BuildInfo | undefined;

/** This process's build (read once). */
export function buildInfo(): BuildInfo {
  cached ??= readBuildInfo();
  return cached;
}

function readBuildInfo(): BuildInfo {
  if (typeof KRANE_SINGLE_FILE_STAMP === "string")
    return { ...parseBuildStamp(KRANE_SINGLE_FILE_STAMP), singleFile: true };
  let stamp: string | undefined;
  try {
    stamp = readFileSync(new URL("./build-stamp.json", import.meta.url), "utf8");
  } catch {
    // Not built: running from source.
  }
  if (stamp !== undefined) return parseBuildStamp(stamp);
  let version = "0.0.0";
  try {
    const pkg: unknown = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
    const v = typeof pkg === "object" && pkg !== null ? (pkg as Record<string, unknown>).version : undefined;
    if (typeof v === "string") version = v;
  } catch {
    // no package.json next to the sources: keep the placeholder
  }
  return { version, commit: "dev", date: "" };
}

/** The short form agents send in their Heartbeat and ctrl sends in its responses: "0.1.0+3f2a1bc9d0e4". */
export function buildLabel(info: BuildInfo = buildInfo()): string {
  return `${info.version}+${info.commit}`;
}
