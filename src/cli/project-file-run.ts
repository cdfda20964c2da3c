// What `krane plan`, `krane apply` and `krane export` do (loaded when one of them runs): the file
// read and checked where it is written (../project-file/read.ts), one PlanEnvironment per
// environment it names — every plan made before anything is applied, so a refusal anywhere
// applies nothing — and ApplyEnvironment with the state each plan was made against.
import { readFileSync, writeFileSync } from "node:fs";
import { ConnectError } from "@connectrpc/connect";
import { stringify } from "yaml";
import { ProjectFileSchema, type EnvironmentFile, type ProjectFile } from "../gen/krane/ctrl/v1/project_file_pb.js";
import {
  PlanEnvironmentResponseSchema,
  ProjectFileService,
  type PlanEnvironmentResponse,
} from "../gen/krane/ctrl/v1/apply_pb.js";
import type { AuditChange } from "../gen/krane/ctrl/v1/audit_pb.js";
import type { Source } from "../project-file/decode.js";
import { readProjectFile, refusalLine } from "../project-file/read.js";
import { messageTree } from "../project-file/tree.js";
import type { UserContext } from "./user-client.js";

/** Exit code of `krane plan` when the file would change something (for CI). */
export const EXIT_CHANGES = 2;

export interface FileFlags {
  file: string;
  prune?: boolean;
}

/** A refusal already worded for the user (file:line:column lines). */
class Refused extends Error {}

function load(path: string): { file: ProjectFile; source: Source } {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new Refused(`${path}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const r = readProjectFile(path, text);
  if (!r.ok) throw new Refused(r.problems.join("\n"));
  return { file: r.file, source: r.source };
}

function changeText(c: AuditChange): string {
  if (c.op === "added") return `  + ${c.field}: ${c.afterJson}`;
  if (c.op === "removed") return `  - ${c.field}: ${c.beforeJson}`;
  return `  ~ ${c.field}: ${c.beforeJson} → ${c.afterJson}`;
}

interface EnvPlan {
  environment: string;
  desired: EnvironmentFile;
  plan: PlanEnvironmentResponse;
}

async function planAll(
  x: UserContext,
  path: string,
  prune: boolean,
): Promise<{ workspace: string; project: string; plans: EnvPlan[] }> {
  const { file, source } = load(path);
  const workspace = await x.ctrl.workspace();
  const client = x.ctrl.client(ProjectFileService);
  const plans: EnvPlan[] = [];
  const refusals: string[] = [];
  for (const [environment, desired] of Object.entries(file.environments)) {
    try {
      const plan = await client.planEnvironment({ workspace, project: file.project, environment, desired, prune });
      plans.push({ environment, desired, plan });
    } catch (err) {
      if (!(err instanceof ConnectError)) throw err;
      refusals.push(refusalLine(path, source, environment, err.rawMessage));
    }
  }
  if (refusals.length > 0) throw new Refused(`${refusals.join("\n")}\nnothing applied`);
  return { workspace, project: file.project, plans };
}

function printPlans(plans: readonly EnvPlan[]): number {
  let total = 0;
  for (const { environment, plan } of plans) {
    const n = plan.changes.length;
    total += n;
    const what = plan.current === undefined ? " (new environment)" : "";
    process.stdout.write(`${environment}${what}: ${n === 0 ? "no changes" : `${n} change${n === 1 ? "" : "s"}`}\n`);
    for (const c of plan.changes) process.stdout.write(`${changeText(c)}\n`);
    for (const note of plan.notes) process.stdout.write(`  # ${note}\n`);
  }
  return total;
}

async function refusing(body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (err) {
    if (!(err instanceof Refused)) throw err;
    process.stderr.write(`${err.message}\n`);
    process.exitCode = 1;
  }
}

export async function planCommand(x: UserContext, f: FileFlags): Promise<void> {
  await refusing(async () => {
    const { plans } = await planAll(x, f.file, f.prune ?? false);
    if (x.json) {
      const out = Object.fromEntries(
        plans.map((p) => [p.environment, x.toJson(PlanEnvironmentResponseSchema, p.plan)]),
      );
      process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
      if (plans.some((p) => p.plan.changes.length > 0)) process.exitCode = EXIT_CHANGES;
      return;
    }
    const total = printPlans(plans);
    if (total > 0) process.exitCode = EXIT_CHANGES;
  });
}

export async function applyCommand(x: UserContext, f: FileFlags): Promise<void> {
  await refusing(async () => {
    const prune = f.prune ?? false;
    const { workspace, project, plans } = await planAll(x, f.file, prune);
    const client = x.ctrl.client(ProjectFileService);
    for (const { environment, desired, plan } of plans) {
      if (plan.changes.length === 0) {
        process.stdout.write(`${environment}: no changes\n`);
        continue;
      }
      try {
        const res = await client.applyEnvironment({
          workspace,
          project,
          environment,
          desired,
          prune,
          ...(plan.current !== undefined ? { plannedFrom: plan.current } : {}),
        });
        process.stdout.write(
          `${environment}: applied ${res.changes.length} change${res.changes.length === 1 ? "" : "s"}${res.deployment ? ` (revision ${res.deployment.revision})` : ""}\n`,
        );
        for (const c of res.changes) process.stdout.write(`${changeText(c)}\n`);
      } catch (err) {
        if (!(err instanceof ConnectError)) throw err;
        throw new Refused(`${environment}: not applied: ${err.rawMessage}`);
      }
    }
  });
}

/** A ProjectFile as krane.yaml's text. */
export function projectFileYaml(file: ProjectFile): string {
  const tree = messageTree(ProjectFileSchema, file as unknown as Record<string, unknown>);
  return `# krane.yaml (krane export); its schema: krane schema\n${stringify(tree, { lineWidth: 0 })}`;
}

export async function exportCommand(x: UserContext, project: string, f: { file?: string }): Promise<void> {
  const workspace = await x.ctrl.workspace();
  const { file } = await x.ctrl.client(ProjectFileService).exportProject({ workspace, project });
  if (!file) throw new Error("ctrl answered no file");
  const text = projectFileYaml(file);
  if (f.file !== undefined) writeFileSync(f.file, text);
  else process.stdout.write(text);
}
