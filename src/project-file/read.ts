// Reading krane.yaml for the CLI: the file's text decoded as a ProjectFile, its problems worded
// `file:line:column: path: message` (what an editor jumps to), and a refusal from ctrl that
// names a field turned into the same form by finding the field in the file. Pure.
import { ProjectFileSchema, type ProjectFile } from "../gen/krane/ctrl/v1/project_file_pb.js";
import { decodeYaml, positionOf, type Problem, type Source } from "./decode.js";
import { formatPath, splitFieldMessage, type Segment } from "./paths.js";

export type ReadResult = { ok: true; file: ProjectFile; source: Source } | { ok: false; problems: string[] };

/** One problem as a line: `krane.yaml:3:5: environments.production.regions: …`. */
export function problemLine(fileName: string, p: Problem): string {
  return `${fileName}:${p.pos.line}:${p.pos.col}: ${p.path === "" ? "" : `${p.path}: `}${p.message}`;
}

/** krane.yaml's text as the ProjectFile it describes, or every problem as a line. */
export function readProjectFile(fileName: string, text: string): ReadResult {
  const d = decodeYaml(ProjectFileSchema, text);
  if (!d.ok) return { ok: false, problems: d.problems.map((p) => problemLine(fileName, p)) };
  if (d.message.project === "")
    return {
      ok: false,
      problems: [
        problemLine(fileName, {
          path: "project",
          message: "is required (the project's slug)",
          pos: { line: 1, col: 1 },
        }),
      ],
    };
  return { ok: true, file: d.message, source: d.source };
}

/**
 * A refusal about one environment's part of the file (`regions.eu: …`, as ctrl words it) as a
 * line pointing at where the field is written; the message as it is when it names no field.
 */
export function refusalLine(fileName: string, source: Source, environment: string, message: string): string {
  const split = splitFieldMessage(message);
  const base: Segment[] = ["environments", environment];
  if (split === undefined) {
    const pos = positionOf(source, base);
    return `${fileName}:${pos.line}:${pos.col}: ${formatPath(base)}: ${message}`;
  }
  const path = [...base, ...split.path];
  const pos = positionOf(source, path);
  return `${fileName}:${pos.line}:${pos.col}: ${formatPath(path)}: ${split.problem}`;
}
