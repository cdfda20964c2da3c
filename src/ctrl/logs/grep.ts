// --grep on ctrl. Text is matched in place (a substring search is linear in the line). A regular
// expression is not: Node's RegExp backtracks and has no timeout, and a pattern such as /(a+)+$/
// takes exponential time on a line of many a's, which on the event loop would stall every call
// ctrl serves. So a regex runs on a worker thread of its own, a batch of lines at a time, each
// batch with a deadline; past it the worker is terminated and the call ends with invalid_argument
// naming grep. Input is bounded: a line is matched on its first MAX_MATCHED_CHARS characters (lines
// are cut at 5,000 bytes where they are relayed, src/contracts/logs.ts), a batch holds at most
// BATCH_CHARS characters, and at most MAX_REGEX_WORKERS regex searches run at once on a ctrl
// (more: resource_exhausted, the reader tries again).
import { Worker } from "node:worker_threads";
import { DomainError, invalidArgument } from "../errors.js";
import type { GrepPattern } from "../validate/logs.js";

export interface Grep {
  /** Which of the lines match, in order. */
  keep(lines: readonly string[]): Promise<boolean[]>;
  /** Ends the worker, if any (idempotent). */
  close(): void;
}

/** How long one batch may take on the worker (ms). */
export const GREP_DEADLINE_MS = 2_000;
export const MAX_MATCHED_CHARS = 65_536;
const BATCH_CHARS = 262_144;
export const MAX_REGEX_WORKERS = 8;

let workers = 0;

/** The matcher of a validated pattern; `deadlineMs` is for tests. */
export function grepOf(p: GrepPattern, deadlineMs = GREP_DEADLINE_MS): Grep {
  if ("text" in p) {
    const text = p.text;
    return { keep: (lines) => Promise.resolve(lines.map((l) => l.includes(text))), close: () => undefined };
  }
  return new RegexGrep(p.source, p.flags, deadlineMs);
}

/** The worker's code, plain CommonJS so that it runs the same from the sources and the bundle. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const re = new RegExp(workerData.source, workerData.flags);
parentPort.on("message", (lines) => {
  const out = new Uint8Array(lines.length);
  for (let i = 0; i < lines.length; i++) out[i] = re.test(lines[i]) ? 1 : 0;
  parentPort.postMessage(out);
});
parentPort.postMessage("ready");
`;

class RegexGrep implements Grep {
  #worker: Worker | undefined;
  #ready: Promise<void> | undefined;
  #closed = false;
  /** Batches go one at a time (a call's pages and pushes may overlap). */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly source: string,
    private readonly flags: string,
    private readonly deadlineMs: number,
  ) {}

  keep(lines: readonly string[]): Promise<boolean[]> {
    const run = this.#queue.then(() => this.#keep(lines));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #keep(lines: readonly string[]): Promise<boolean[]> {
    const out: boolean[] = [];
    let batch: string[] = [];
    let chars = 0;
    const flush = async (): Promise<void> => {
      if (batch.length === 0) return;
      for (const m of await this.#match(batch)) out.push(m === 1);
      batch = [];
      chars = 0;
    };
    for (const l of lines) {
      const s = l.length > MAX_MATCHED_CHARS ? l.slice(0, MAX_MATCHED_CHARS) : l;
      if (chars + s.length > BATCH_CHARS) await flush();
      batch.push(s);
      chars += s.length;
    }
    await flush();
    return out;
  }

  async #match(batch: string[]): Promise<Uint8Array> {
    const w = await this.#start();
    return new Promise<Uint8Array>((resolve, reject) => {
      const done = (): void => {
        clearTimeout(timer);
        w.off("message", onMessage);
        w.off("error", onError);
        w.off("exit", onExit);
      };
      const onMessage = (m: Uint8Array): void => {
        done();
        resolve(m);
      };
      const onError = (err: Error): void => {
        done();
        this.close();
        reject(invalidArgument("grep", `the regular expression could not be run: ${err.message}`));
      };
      const onExit = (): void => {
        done();
        reject(new DomainError("resource_exhausted", "the --grep search ended (ctrl is stopping it)"));
      };
      const timer = setTimeout(() => {
        done();
        this.close();
        reject(
          invalidArgument(
            "grep",
            `the regular expression took more than ${this.deadlineMs / 1000} s over ${batch.length} line(s) and was stopped (nested quantifiers such as (a+)+ backtrack exponentially); simplify it or search for plain text`,
          ),
        );
      }, this.deadlineMs);
      w.on("message", onMessage);
      w.on("error", onError);
      w.on("exit", onExit);
      w.postMessage(batch);
    });
  }

  /** The worker, started on first use and ready (its start is not part of any deadline). */
  async #start(): Promise<Worker> {
    if (this.#closed) throw new DomainError("resource_exhausted", "the --grep search ended");
    if (!this.#worker) {
      if (workers >= MAX_REGEX_WORKERS)
        throw new DomainError(
          "resource_exhausted",
          `too many regular-expression searches at once on this ctrl (${MAX_REGEX_WORKERS}); try again shortly`,
        );
      workers++;
      const w = new Worker(WORKER_SOURCE, {
        eval: true,
        workerData: { source: this.source, flags: this.flags },
        resourceLimits: { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 16 },
      });
      // A call that never closes its search does not keep the process alive.
      w.unref();
      this.#worker = w;
      this.#ready = new Promise<void>((resolve, reject) => {
        w.once("message", () => resolve());
        w.once("error", reject);
        w.once("exit", () => reject(new Error("the --grep worker exited before it was ready")));
      });
    }
    const w = this.#worker;
    await this.#ready;
    return w;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#worker) {
      workers--;
      void this.#worker.terminate();
    }
  }
}
