// Test helper: an agent's watch stream of one region, read in the background into a buffer, so
// a test can wait for the message it expects (with a deadline), check that nothing else came,
// and see how and when the stream ended.
import { ConnectError } from "@connectrpc/connect";
import { ClusterService, type DeploymentState, type SentinelState } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import type { TestCtrl } from "./support.js";

type State = DeploymentState | SentinelState;

export class RegionWatch<T extends State> {
  readonly messages: T[] = [];
  /** Resolves when the stream ends: null when it ended cleanly, else the error. */
  readonly ended: Promise<ConnectError | null>;
  private read = 0;
  private wake: (() => void) | null = null;
  private done = false;
  private readonly ac = new AbortController();

  constructor(open: (signal: AbortSignal) => AsyncIterable<T>) {
    this.ended = (async () => {
      try {
        for await (const m of open(this.ac.signal)) {
          // Bookmarks say the stream is alive; the tests here compare what it changes.
          if (m.state.case === "bookmark") continue;
          this.messages.push(m);
          this.wake?.();
        }
        return null;
      } catch (err) {
        return ConnectError.from(err);
      } finally {
        this.done = true;
        this.wake?.();
      }
    })();
  }

  /** The next unread message that `match` accepts (skipping the others), within `timeoutMs`. */
  async next(match: (m: T) => boolean = () => true, timeoutMs = 10_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      while (this.read < this.messages.length) {
        const m = this.messages[this.read++] as T;
        if (match(m)) return m;
      }
      if (this.done) throw new Error(`stream ended before the expected message (${this.messages.length} messages)`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no expected message within ${timeoutMs} ms (${this.messages.length} messages)`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = null;
    }
  }

  /** Reads past the initial snapshot. */
  async synced(): Promise<void> {
    await this.next((m) => m.state.case === "snapshotEnd");
  }

  /** The unread messages that arrive within `ms` (for "nothing else was streamed"). */
  async quiet(ms: number): Promise<T[]> {
    await new Promise((r) => setTimeout(r, ms));
    const rest = this.messages.slice(this.read);
    this.read = this.messages.length;
    return rest;
  }

  close(): void {
    this.ac.abort();
  }
}

export function watchDeployments(ctrl: TestCtrl, token: string, region: string): RegionWatch<DeploymentState> {
  const client = ctrl.client(ClusterService, token);
  return new RegionWatch((signal) => client.watchDeployments({ region, versionLastSeen: 0n }, { signal }));
}

export function watchSentinels(ctrl: TestCtrl, token: string, region: string): RegionWatch<SentinelState> {
  const client = ctrl.client(ClusterService, token);
  return new RegionWatch((signal) => client.watchSentinels({ region, versionLastSeen: 0n }, { signal }));
}
