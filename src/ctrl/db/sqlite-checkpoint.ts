// WAL checkpoints of ctrl's SQLite file on a thread of their own.
//
// In WAL mode every commit appends pages to the -wal file, and by default the committing
// connection copies them back into the database file once the WAL holds 1,000 pages — an fsync
// of the WAL, page writes and an fsync of the database, inside a commit. ctrl's one connection
// runs on the event loop, so that checkpoint stopped every stream and every request of the
// process for as long as the disk took: the stalls that decided the delivery bench's p99 on a
// machine whose disk others use. Here ctrl's connection does no automatic checkpoints; a worker
// thread with its own connection to the same file runs a PASSIVE checkpoint every
// `intervalMs` (PASSIVE never blocks the writer or readers, and the writer starts the WAL over
// once a checkpoint has caught up). If the worker cannot start or dies, the connection goes back
// to checkpointing itself, so the WAL never grows without bound.
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

/** How often the worker checkpoints (ms). */
export const CHECKPOINT_INTERVAL_MS = 250;
/** The automatic checkpoint threshold SQLite uses by default (pages), restored as a fallback. */
const DEFAULT_AUTOCHECKPOINT = 1000;

/** What this module needs of ctrl's better-sqlite3 connection. */
export interface PragmaDatabase {
  pragma(source: string): unknown;
}

/**
 * The worker's code, plain CommonJS so that it runs the same from the sources and from the
 * bundle: it loads better-sqlite3 from the path the parent resolved.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const SQLite = require(workerData.driver);
const db = new SQLite(workerData.file);
db.pragma("busy_timeout = 5000");
const timer = setInterval(() => {
  try { db.pragma("wal_checkpoint(PASSIVE)"); } catch (err) { parentPort.postMessage({ error: String(err) }); }
}, workerData.intervalMs);
parentPort.on("message", (m) => {
  if (m === "stop") { clearInterval(timer); db.close(); parentPort.close(); }
});
parentPort.postMessage({ ready: true });
`;

export class Checkpointer {
  private constructor(
    private readonly worker: Worker | null,
    private readonly exited: Promise<void>,
    /** Set by stop(): the worker's exit is then expected, not a failure to fall back from. */
    private readonly state: { stopping: boolean } = { stopping: false },
  ) {}

  /**
   * Moves checkpoints of `file` (opened by `db`, in WAL mode) to a worker thread. Answers a
   * checkpointer whose `stop` must run before `db` closes; ":memory:" databases need none.
   */
  static async start(
    db: PragmaDatabase,
    file: string,
    intervalMs = CHECKPOINT_INTERVAL_MS,
    onError: (err: unknown) => void = () => undefined,
  ): Promise<Checkpointer> {
    if (file === ":memory:") return new Checkpointer(null, Promise.resolve());
    const driver = createRequire(import.meta.url).resolve("better-sqlite3");
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { driver, file, intervalMs } });
    const state = { stopping: false };
    const exited = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
    const fallBack = (err: unknown): void => {
      if (state.stopping) return;
      onError(err);
      try {
        db.pragma(`wal_autocheckpoint = ${DEFAULT_AUTOCHECKPOINT}`);
      } catch (e) {
        // The connection is closed already: nothing is left to checkpoint.
        onError(e);
      }
    };
    try {
      await new Promise<void>((resolve, reject) => {
        worker.once("message", () => resolve());
        worker.once("error", reject);
        worker.once("exit", (code) => reject(new Error(`the checkpoint worker exited (${code}) before it was ready`)));
      });
    } catch (err) {
      // Checkpointing stays with ctrl's connection, as SQLite does by default.
      onError(err);
      await worker.terminate();
      return new Checkpointer(null, Promise.resolve());
    }
    worker.on("message", (m: { error?: string }) => {
      if (m.error !== undefined) onError(new Error(`WAL checkpoint failed: ${m.error}`));
    });
    worker.on("error", fallBack);
    worker.on("exit", () => fallBack(new Error("the checkpoint worker exited")));
    // Running, the worker alone does not keep the process alive (stop() holds it while it ends).
    worker.unref();
    db.pragma("wal_autocheckpoint = 0");
    return new Checkpointer(worker, exited, state);
  }

  /** Ends the worker (closing its connection); ctrl's connection may close after this. */
  async stop(): Promise<void> {
    if (this.worker === null) return;
    this.state.stopping = true;
    this.worker.ref();
    this.worker.postMessage("stop");
    await this.exited;
  }
}
