// `krane rollout plan [--input FILE]`: one pass of the rollout engine over JSON (stdin when no
// file), printing the engine's output JSON. Bad input exits 2 with a message naming the field.
// Also owns the `rollout` command group that the other rollout subcommands join.
import { readFile } from "node:fs/promises";
import { Command } from "commander";
import { RolloutInputError, parseRolloutInputText, planRollout } from "../rollout/index.js";

export const EXIT_BAD_INPUT = 2;

export interface PlanResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** The whole command minus the I/O: JSON text in, printed text and exit code out. */
export function runRolloutPlan(text: string): PlanResult {
  try {
    const output = planRollout(parseRolloutInputText(text));
    return { exitCode: 0, stdout: `${JSON.stringify(output, null, 2)}\n`, stderr: "" };
  } catch (err) {
    if (err instanceof RolloutInputError) {
      return { exitCode: EXIT_BAD_INPUT, stdout: "", stderr: `krane rollout plan: ${err.message}\n` };
    }
    throw err;
  }
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks).toString("utf8");
}

/** The `rollout` command group on `program`, created on first use. */
export function rolloutCommand(program: Command): Command {
  const existing = program.commands.find((c) => c.name() === "rollout");
  if (existing !== undefined) return existing;
  return program.command("rollout").description("Manage rollouts: plan, and (per environment) pause, resume, undo, status, history.");
}

export function registerRolloutPlanCommand(program: Command): void {
  rolloutCommand(program)
    .command("plan")
    .description("Run one pass of the rollout engine on JSON input and print the result as JSON.")
    .option("--input <file>", "read the input from FILE instead of stdin")
    .action(async (opts: { input?: string }) => {
      let text: string;
      try {
        text = opts.input !== undefined ? await readFile(opts.input, "utf8") : await readStdin();
      } catch (err) {
        process.stderr.write(`krane rollout plan: cannot read input: ${err instanceof Error ? err.message : String(err)}\n`);
        process.exitCode = EXIT_BAD_INPUT;
        return;
      }
      const result = runRolloutPlan(text);
      process.stdout.write(result.stdout);
      process.stderr.write(result.stderr);
      process.exitCode = result.exitCode;
    });
}
