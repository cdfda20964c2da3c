// The Go conformance harness (tools/rollout-conformance) seen from TypeScript: one process that
// runs the real Deployment controller's sync pass on any number of inputs, fed and read as
// newline-delimited JSON. Requests are pipelined; answers come back in order, matched by id.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { ensureRolloutHarness } from "../../../src/cluster/build.js";
import type { RolloutInput, RolloutOutput } from "../../../src/rollout/index.js";

/** What the controller did, in the engine's output shape. */
export interface KubeOutput extends RolloutOutput {
  /** The error syncDeployment returned (Kubernetes then requeues with backoff). */
  syncError?: string;
}

export type KubeResult = { output: KubeOutput } | { error: string };

interface Answer {
  id: number;
  output?: KubeOutput;
  error?: string;
}

export class RolloutHarness {
  private nextId = 1;
  private readonly pending = new Map<number, (r: KubeResult) => void>();
  private stderr = "";
  private exited: string | undefined;

  private constructor(private readonly child: ChildProcessWithoutNullStreams) {
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk: string) => {
      this.stderr = (this.stderr + chunk).slice(-4000);
    });
    createInterface({ input: child.stdout }).on("line", (line) => {
      const answer = JSON.parse(line) as Answer;
      const resolve = this.pending.get(answer.id);
      if (resolve === undefined) return;
      this.pending.delete(answer.id);
      resolve(answer.output !== undefined ? { output: answer.output } : { error: answer.error ?? "no output" });
    });
    child.on("exit", (code, signal) => {
      this.exited = `the harness exited (${signal ?? code}): ${this.stderr.trim()}`;
      for (const resolve of this.pending.values()) resolve({ error: this.exited });
      this.pending.clear();
    });
  }

  /** Builds the harness if the cache lacks it (minutes, once) and starts one process. */
  static async start(log: (line: string) => void = () => {}): Promise<RolloutHarness> {
    const bin = await ensureRolloutHarness(log);
    return new RolloutHarness(spawn(bin, [], { stdio: ["pipe", "pipe", "pipe"] }));
  }

  run(input: RolloutInput): Promise<KubeResult> {
    if (this.exited !== undefined) return Promise.resolve({ error: this.exited });
    const id = this.nextId++;
    const answer = new Promise<KubeResult>((resolve) => this.pending.set(id, resolve));
    this.child.stdin.write(`${JSON.stringify({ id, input })}\n`);
    return answer;
  }

  /** Every input through the one process, written as fast as it reads them. */
  async runAll(inputs: readonly RolloutInput[]): Promise<KubeResult[]> {
    const answers: Promise<KubeResult>[] = [];
    for (const input of inputs) {
      answers.push(this.run(input));
      if (this.child.stdin.writableNeedDrain) await once(this.child.stdin, "drain");
    }
    return Promise.all(answers);
  }

  async close(): Promise<void> {
    if (this.exited !== undefined) return;
    const exit = once(this.child, "exit");
    this.child.stdin.end();
    await exit;
  }
}
