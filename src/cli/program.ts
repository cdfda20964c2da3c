// The program every `krane` runs and its user command groups, each one registration (how to add
// one: README.md in this folder). The servers and the local system (SERVER_COMMANDS) register in
// main.ts, the npm package's and the image's entry, and not here: they need native modules
// (better-sqlite3) and the npm package's files (deploy/, tools/, the Go-built cluster), and the
// single-file CLI (single.ts), which compiles in everything its imports reach, holds only what
// this file imports.
import { Command } from "commander";
import { registerApiTokenCommands } from "./api-token.js";
import { registerAuditCommands } from "./audit.js";
import { registerDeployCommands } from "./deploy.js";
import { registerBuildCommands } from "./build.js";
import { registerRepoCommands } from "./repo.js";
import { registerEnvCommands } from "./env.js";
import { registerEventsCommand } from "./events.js";
import { registerMetricsCommand } from "./metrics.js";
import { registerExposureCommands } from "./exposure.js";
import { registerPolicyCommands } from "./policy.js";
import { registerLogsCommand } from "./logs.js";
import { registerRequestsCommand } from "./requests.js";
import { registerLogRetentionCommands } from "./log-retention.js";
import { registerPreviewCommands } from "./preview.js";
import { registerLoginCommands } from "./login.js";
import { registerMemberCommands } from "./member.js";
import { registerNotifyCommands } from "./notify.js";
import { registerAlertCommands } from "./alert.js";
import { registerKeyCommands } from "./key.js";
import { registerProjectCommands } from "./project.js";
import { registerProjectFileCommands } from "./project-file.js";
import { registerRegionCommands } from "./region.js";
import { registerQuotaCommands } from "./quota.js";
import { registerRegistryCommands } from "./registry.js";
import { registerReleaseCommands } from "./release.js";
import { registerRolloutCommands } from "./rollout.js";
import { registerSettingsCommands } from "./settings.js";
import { registerStatusCommand } from "./status.js";
import { registerVersionCommand } from "./version.js";
import { registerWorkspaceCommands } from "./workspace.js";

/** One command group: its name and its registration (which adds one or more top-level commands). */
export type Group = readonly [name: string, register: (program: Command) => void];

/**
 * The top-level commands of the servers and the local system (main.ts registers them): what the
 * single-file CLI answers by saying where they run.
 */
export const SERVER_COMMANDS: readonly string[] = ["ctrl", "agent", "cluster", "dev", "sentinel"];

/** User commands: against ctrl's public API (and `rollout plan`, which needs nothing). */
export const USER_GROUPS: readonly Group[] = [
  ["workspace", registerWorkspaceCommands],
  ["project", registerProjectCommands],
  ["env", registerEnvCommands],
  ["deploy", registerDeployCommands],
  ["build", registerBuildCommands],
  ["repo", registerRepoCommands],
  ["settings", registerSettingsCommands],
  ["release", registerReleaseCommands],
  ["rollout", registerRolloutCommands],
  ["status", registerStatusCommand],
  ["events", registerEventsCommand],
  ["logs", registerLogsCommand],
  ["requests", registerRequestsCommand],
  ["log-retention", registerLogRetentionCommands],
  ["metrics", registerMetricsCommand],
  ["exposure", registerExposureCommands],
  ["policy", registerPolicyCommands],
  ["preview", registerPreviewCommands],
  ["region", registerRegionCommands],
  ["registry", registerRegistryCommands],
  ["quota", registerQuotaCommands],
  ["api-token", registerApiTokenCommands],
  ["member", registerMemberCommands],
  ["login", registerLoginCommands],
  ["audit", registerAuditCommands],
  ["notify", registerNotifyCommands],
  ["alert", registerAlertCommands],
  ["key", registerKeyCommands],
  ["project-file", registerProjectFileCommands],
  ["version", registerVersionCommand],
];

export function newProgram(): Command {
  return new Command()
    .name("krane")
    .description("Run untrusted user code on Kubernetes: control plane, agents and user commands.")
    .showHelpAfterError()
    .enablePositionalOptions();
}

/** Parses argv and runs the command; an error that is not ctrl's becomes `krane: message` and exit 1. */
export async function runProgram(program: Command): Promise<void> {
  try {
    await program.parseAsync(process.argv);
  } catch (err) {
    console.error(`krane: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = process.exitCode && process.exitCode !== 0 ? process.exitCode : 1;
  }
}
