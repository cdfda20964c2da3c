// krane.yaml in a built source (pure): the part of the file for the environment a build deploys
// to, or the file's problems worded as `krane apply` words them (file:line:column). ctrl's build
// worker applies that part with the revision the build makes (src/ctrl/domain/project-file.ts).
import type { EnvironmentFile } from "../gen/krane/ctrl/v1/project_file_pb.js";
import { positionOf, type Source } from "../project-file/decode.js";
import { problemLine, readProjectFile } from "../project-file/read.js";
import type { TarEntry } from "./tar.js";

/** The file's name, at the source's root. */
export const SOURCE_PROJECT_FILE = "krane.yaml";
/** Its bound: a project file is text a person writes. */
export const MAX_PROJECT_FILE_BYTES = 1024 * 1024;

export type SourceProjectFile =
  /** No krane.yaml: the build deploys as without one. */
  | { readonly kind: "none" }
  /** A krane.yaml that names other environments only: nothing of it applies here. */
  | { readonly kind: "other"; readonly note: string }
  | { readonly kind: "environment"; readonly desired: EnvironmentFile; readonly source: Source };

/** krane.yaml refused: every line names the file, its line and column. */
export class ProjectFileRefused extends Error {
  constructor(readonly lines: readonly string[]) {
    super(lines.join("\n"));
    this.name = "ProjectFileRefused";
  }
}

/** The source's krane.yaml part for `environment` of `project` (throws ProjectFileRefused). */
export function sourceProjectFile(
  entries: readonly TarEntry[],
  project: string,
  environment: string,
): SourceProjectFile {
  const entry = entries.find((e) => e.path === SOURCE_PROJECT_FILE);
  if (entry === undefined) return { kind: "none" };
  const at = `${SOURCE_PROJECT_FILE}:1:1: `;
  if (entry.type !== "file" || entry.data === undefined)
    throw new ProjectFileRefused([`${at}is a ${entry.type === "dir" ? "directory" : "symbolic link"}, not a file`]);
  if (entry.data.length > MAX_PROJECT_FILE_BYTES)
    throw new ProjectFileRefused([`${at}is ${entry.data.length} bytes, over the limit of ${MAX_PROJECT_FILE_BYTES}`]);
  const read = readProjectFile(SOURCE_PROJECT_FILE, Buffer.from(entry.data).toString("utf8"));
  if (!read.ok) throw new ProjectFileRefused(read.problems);
  if (read.file.project !== project)
    throw new ProjectFileRefused([
      problemLine(SOURCE_PROJECT_FILE, {
        path: "project",
        message: `is "${read.file.project}", but this build is of project "${project}"`,
        pos: positionOf(read.source, ["project"]),
      }),
    ]);
  const desired = read.file.environments[environment];
  if (desired === undefined) {
    const named = Object.keys(read.file.environments);
    return {
      kind: "other",
      note: `${SOURCE_PROJECT_FILE} names no environment "${environment}" (${named.length === 0 ? "none" : named.join(", ")}): deploying with the environment's settings as they are`,
    };
  }
  return { kind: "environment", desired, source: read.source };
}
