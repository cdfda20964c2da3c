// `krane rollout plan [--input FILE]` (registered in rollout.ts): one pass of the rollout engine
// over JSON (stdin when no file), printing the engine's output JSON. Bad input exits 2 with a
// message naming the field. Loaded only when the command runs.
import { readFile } from "node:fs/promises";
import { readStdin } from "./command.js";
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

/** The command's I/O: reads the file (or stdin), prints, sets the exit code. */
export async function rolloutPlanCommand(input: string | undefined): Promise<void> {
  let text: string;
  try {
    text = input !== undefined ? await readFile(input, "utf8") : await readStdin();
  } catch (err) {
    process.stderr.write(
      `krane rollout plan: cannot read input: ${err instanceof Error ? err.message : String(err)}\n`,
    );
    process.exitCode = EXIT_BAD_INPUT;
    return;
  }
  const result = runRolloutPlan(text);
  process.stdout.write(result.stdout);
  process.stderr.write(result.stderr);
  process.exitCode = result.exitCode;
}
